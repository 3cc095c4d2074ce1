"""Fuzz target: arbitrary bytes into the reactive-streams-io decoder and
``sansrs.rsio.Connection`` (either role), with an application that
subscribes, accepts subscriptions (variable and fixed size) and publishes
within demand.

Rules: only ``RemoteProtocolError`` escapes ``decode_message`` and
``receive_data``; a passive connection reports the same events whether the
bytes arrive whole or cut into chunks; after a protocol error the output ends with a goodbye; the
application's sends never exceed the demand the input granted (the core
refuses with ``LocalProtocolError``, which the target treats as the answer).

Input: byte 0: bit 0 role (client/server), bits 1-3 chunk size - 1 for the
second feeding; the rest: the peer's bytes. Seeds: fuzz/corpus/rsio/
(sessions from tests/traces/rsio_*.trace; regenerate with
``python fuzz/fuzz_rsio.py --make-corpus``).
"""

from __future__ import annotations

import sys
from typing import Any

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs.rsio import (
        Connection,
        ConnectionConfig,
        DecodeLimits,
        Goodbye,
        Incomplete,
        LocalProtocolError,
        RemoteProtocolError,
        Role,
        decode_message,
    )
    from sansrs.rsio import events as ev

CONFIG = ConnectionConfig(
    max_message_size=4096,
    max_string_size=256,
    max_subscriptions=8,
    max_element_size=8192,
    max_split_elements=4,
    max_split_buffer=8192,
    max_cancelled=4,
    split_size=16,
    max_queued_output=1 << 20,
)
LIMITS = DecodeLimits(max_message_size=4096, max_string_size=256, max_extensions=8)


def _decode_all(data: bytes) -> None:
    pos = 0
    while pos < len(data):
        try:
            _, end = decode_message(data, pos, lambda sid: sid % 3, LIMITS)
        except (Incomplete, RemoteProtocolError):
            return
        if end <= pos:
            raise AssertionError("decoder did not advance")
        pos = end


def _react(conn: Connection, events: list[Any], log: list[Any]) -> None:
    """Accept every subscription (size from the Id), publish a little, and
    subscribe back on hello."""
    for event in events:
        log.append(event)
        try:
            if isinstance(event, ev.HelloReceived):
                conn.subscribe("back", 2)
            elif isinstance(event, ev.SubscribeReceived):
                size = event.subscriber_id % 3
                conn.send_on_subscribe(event.subscriber_id, size)
                if event.initial_demand:
                    conn.send_next(event.subscriber_id, b"x" * (size or 20))
            elif isinstance(event, ev.RequestReceived):
                sid = event.subscriber_id
                if conn.demand_of(sid) >= 2 and sid % 3:
                    conn.send_packed(sid, b"y" * (2 * (sid % 3)))
                if conn.demand_of(sid) >= 1 and sid % 5 == 0:
                    conn.send_complete(sid)
            elif isinstance(event, ev.OnSubscribeReceived):
                conn.request(event.subscriber_id, 3)
            elif isinstance(event, ev.NextReceived | ev.NextPackedReceived) and (
                event.subscriber_id % 2
            ):
                conn.cancel(event.subscriber_id)
        except LocalProtocolError:
            pass  # e.g. a cancel tombstone limit: the core said no, nothing was sent


def _feed(role: Role, data: bytes, chunk: int, react: bool) -> tuple[list[Any], bytes, bool]:
    conn = Connection(role, CONFIG)
    log: list[Any] = []
    out = [conn.data_to_send()]
    failed = False
    for i in range(0, len(data), chunk):
        try:
            conn.receive_data(data[i : i + chunk])
        except RemoteProtocolError:
            failed = True
        events = conn.events()
        if react:
            _react(conn, events, log)
        else:
            log += events
        out.append(conn.data_to_send())
        if failed:
            break
    if not failed:
        conn.receive_data(b"")
        log += conn.events()
    return log, b"".join(out), failed


def test_one_input(data: bytes) -> None:
    if not data:
        return
    head, body = data[0], data[1:]
    _decode_all(body)
    role = Role.CLIENT if head & 1 else Role.SERVER
    chunk = ((head >> 1) & 7) + 1
    # A passive connection: the same events whatever the chunking.
    whole, _, failed = _feed(role, body, max(1, len(body)), False)
    chunked, _, failed2 = _feed(role, body, chunk, False)
    if whole != chunked or failed != failed2:
        raise AssertionError(f"chunking changed the events: {whole!r} != {chunked!r}")
    # An active application (its sends depend on when input arrives).
    _, out, failed = _feed(role, body, chunk, True)
    if failed:
        last: Any = None
        pos = 0
        while pos < len(out):
            last, pos = decode_message(out, pos, lambda sid: sid % 3, LIMITS)
        if not isinstance(last, Goodbye):
            raise AssertionError(f"a protocol error must end with goodbye, got {last!r}")


def make_corpus() -> None:
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parent
    from sansrs.trace import Direction, read_trace

    folder = root / "corpus" / "rsio"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    seeds = []
    for path in sorted((root.parent / "tests" / "traces").glob("rsio_*.trace")):
        trace = read_trace(path)
        seeds.append(b"\x00" + trace.data(Direction.CLIENT_TO_SERVER))  # into a server
        seeds.append(b"\x05" + trace.data(Direction.SERVER_TO_CLIENT))  # into a client
    seeds += [
        b"\x00\x01\x00\x00\x10\x01a\x03\x05\x11\x03\x00",  # request(0)
        b"\x01\x02\x00\x00\x20\x01\x02\x22\x01\x01ab",  # packed beyond no demand
        b"\x01\x02\x00\x00\x23\x01\x00\x02ab\x24\x01\x00\x01c",
        b"\x00\x01\x00\x00\x03\x03bye",
        # found by fuzzing: an error message must not depend on the chunking
        b"\x00\x01\x00\x00\x10\x01a" + b"\xf3" * 12 + b"\x03\x05\x11\x03\x00",
    ]
    for seed in seeds:
        (folder / hashlib.sha1(seed).hexdigest()[:16]).write_bytes(seed)


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-corpus"]:
        make_corpus()
    else:
        run(test_one_input)

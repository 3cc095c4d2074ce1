"""Fuzz target, differential: ``ConnectionConfig.payload_runs`` against the
plain receive path. Two client ``Connection``s, alike but for
``payload_runs``, take the same bytes in the same chunks and react alike.

Rule: with every ``PayloadRunReceived`` read as the ``PayloadReceived``
events it stands for, both report the same events in the same order, write
the same bytes, end in the same state, and raise the same error (or none).

Input: byte 0: seed of the chunk sizes; byte 1: the stream's initial
demand (1-256); the rest: the bytes from the server. The client has sent
SETUP and opened a request-response (1), a stream (3) and a channel (5);
it asks for more on a stream each time four of its items came.
Seeds: fuzz/corpus/payload_runs/ (the server's side of each trace in
tests/traces/, and runs of items; ``python fuzz/fuzz_payload_runs.py
--make-corpus``).
"""

from __future__ import annotations

import random
import sys

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs import LocalProtocolError, RemoteProtocolError
    from sansrs.rsocket import Connection, ConnectionConfig, Role
    from sansrs.rsocket import events as ev

LIMITS = {"max_frame_size": 4096, "max_reassembly_size": 8192, "fragment_size": 64}


def _flatten(events: list[ev.Event]) -> list[ev.Event]:
    out: list[ev.Event] = []
    for event in events:
        if isinstance(event, ev.PayloadRunReceived):
            out += [
                ev.PayloadReceived(stream_id=event.stream_id, data=d, metadata=None,
                                   complete=False, next=True)
                for d in event.data
            ]
        else:
            out.append(event)
    return out


class Side:
    """One client and what it saw."""

    def __init__(self, runs: bool, initial_n: int) -> None:
        self.conn = Connection(Role.CLIENT, ConnectionConfig(payload_runs=runs, **LIMITS))  # type: ignore[arg-type]
        self.conn.setup(keepalive_interval=100, max_lifetime=1000)
        self.conn.request_response(b"q")
        self.conn.request_stream(b"q", initial_n=initial_n)
        self.conn.request_channel(b"q", initial_n=initial_n)
        self.seen: dict[int, int] = {}
        self.log: list[object] = [self.conn.data_to_send()]

    def feed(self, chunk: bytes, now: float) -> None:
        conn = self.conn
        try:
            conn.receive_data(chunk, now=now)
        except RemoteProtocolError as exc:
            self.log.append(("error", type(exc).__name__, str(exc)))
        events = _flatten(conn.events())
        self.log.append(events)
        for event in events:
            if isinstance(event, ev.PayloadReceived) and event.next:
                sid = event.stream_id
                self.seen[sid] = self.seen.get(sid, 0) + 1
                if self.seen[sid] % 4 == 0:
                    try:
                        conn.request_n(sid, 4)
                    except LocalProtocolError as exc:
                        self.log.append(("refused", str(exc)))
        self.log.append((conn.data_to_send(), conn.state, conn.received_position))


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    rng = random.Random(data[0])
    initial_n = 1 + data[1]
    stream = data[2:]
    plain, runs = Side(False, initial_n), Side(True, initial_n)
    offset = 0
    now = 0.0
    while offset < len(stream):
        size = rng.choice((1, 5, 9, 16, 64, 300, 4000))
        chunk = stream[offset : offset + size]
        offset += size
        now += 0.01
        plain.feed(chunk, now)
        runs.feed(chunk, now)
        assert runs.log == plain.log, (runs.log[-3:], plain.log[-3:])


def _item(sid: int, data: bytes, flags: int = 0x20) -> bytes:
    """A PAYLOAD frame (N by default) on ``sid``, length-prefixed."""
    body = sid.to_bytes(4, "big") + (0x0A << 10 | flags).to_bytes(2, "big") + data
    return len(body).to_bytes(3, "big") + body


def make_corpus() -> None:
    """Write the seeds: the server's side of each trace, and item runs."""
    import hashlib
    from pathlib import Path

    from sansrs.trace import Direction, read_trace

    root = Path(__file__).resolve().parent
    folder = root / "corpus" / "payload_runs"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    seeds = [
        b"\x00\x40" + read_trace(path).data(Direction.SERVER_TO_CLIENT)
        for path in sorted((root.parent / "tests" / "traces").glob("*.rstrace"))
    ]
    uniform = b"".join(_item(3, b"x" * 16) for _ in range(100))
    mixed = b"".join(_item(3 if i % 5 else 5, b"y" * (i % 7)) for i in range(60))
    empty = b"".join(_item(3, b"") for _ in range(20)) + _item(3, b"", 0x40)  # then C
    seeds += [b"\x01\x10" + uniform, b"\x02\xff" + mixed, b"\x03\x02" + empty]
    for seed in seeds:
        (folder / hashlib.sha1(seed).hexdigest()[:16]).write_bytes(seed)


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-corpus"]:
        make_corpus()
    else:
        run(test_one_input)

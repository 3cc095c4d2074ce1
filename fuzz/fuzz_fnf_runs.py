"""Fuzz target, differential: ``ConnectionConfig.fnf_runs`` against the plain
receive path. Two server ``Connection``s, alike but for ``fnf_runs``, take
the same client bytes in the same chunks and react alike.

Rule: with every ``FireAndForgetRunReceived`` read as the
``FireAndForgetReceived`` events it stands for (never an empty run), both
report the same events in the same order, write the same bytes, end in the
same state and position, and raise the same error (or none).

Input: byte 0: bit 0: the client asks for leases (the server grants 1 +
byte 1 requests); bit 1: the SETUP is accepted only after the first chunk
(frames held meanwhile); byte 1: seed of the chunk sizes; the rest: the
client's bytes after its SETUP.
Seeds: fuzz/corpus/fnf_runs/ (the client's side of each trace in
tests/traces/, and runs of fire-and-forgets; ``python -m fuzz.fuzz_fnf_runs
--make-corpus``).
"""

from __future__ import annotations

import random

from fuzz._harness import instrumented, main

with instrumented(__name__):
    from sansrs import LocalProtocolError, RemoteProtocolError
    from sansrs.rsocket import Connection, ConnectionConfig, ConnectionState, Role
    from sansrs.rsocket import events as ev


def _flatten(events: list[ev.Event]) -> list[ev.Event]:
    out: list[ev.Event] = []
    for event in events:
        if isinstance(event, ev.FireAndForgetRunReceived):
            assert len(event.stream_ids) == len(event.data) == len(event.metadata) >= 1
            out += [
                ev.FireAndForgetReceived(stream_id=s, data=d, metadata=m)
                for s, d, m in zip(event.stream_ids, event.data, event.metadata, strict=True)
            ]
        else:
            out.append(event)
    return out


def _setup(lease: bool) -> bytes:
    mime = b"\x18application/octet-stream"
    flags = 0x01 << 10 | (0x40 if lease else 0)  # SETUP, L
    body = (b"\x00\x00\x00\x00" + flags.to_bytes(2, "big") + b"\x00\x01\x00\x00"
            + (1000).to_bytes(4, "big") + (60000).to_bytes(4, "big") + mime + mime)
    return len(body).to_bytes(3, "big") + body


class Side:
    """One server and what it did."""

    def __init__(self, runs: bool, lease: int | None) -> None:
        self.conn = Connection(Role.SERVER, ConnectionConfig(fnf_runs=runs, max_frame_size=4096))
        self.lease = lease
        self.log: list[object] = []
        self.feed(_setup(lease is not None), 0.0)

    def accept(self) -> None:
        conn = self.conn
        if conn.state is not ConnectionState.SETUP_RECEIVED:
            return
        try:  # (the frames held meanwhile are processed now: they may be bad)
            if self.lease is None:
                conn.accept_setup()
            else:
                conn.accept_setup(lease_ttl=60_000, lease_number=self.lease)
        except RemoteProtocolError as exc:
            self.log.append(("error", type(exc).__name__, str(exc)))
        self.log.append(("accepted", conn.data_to_send(), _flatten(conn.events())))

    def feed(self, chunk: bytes, now: float) -> None:
        conn = self.conn
        try:
            conn.receive_data(chunk, now=now)
        except (RemoteProtocolError, LocalProtocolError) as exc:
            self.log.append(("error", type(exc).__name__, str(exc)))
        self.log.append(_flatten(conn.events()))
        self.log.append((conn.data_to_send(), conn.state, conn.received_position))


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    lease = 1 + data[1] if data[0] & 1 else None
    later = bool(data[0] & 2)
    rng = random.Random(data[1])
    stream = data[2:]
    plain, runs = Side(False, lease), Side(True, lease)
    if not later:
        plain.accept()
        runs.accept()
    offset = 0
    now = 0.0
    while offset < len(stream):
        size = rng.choice((1, 5, 9, 16, 64, 300, 4000))
        chunk = stream[offset : offset + size]
        offset += size
        now += 0.01
        for side in (plain, runs):
            side.feed(chunk, now)
            side.accept()
        assert runs.log == plain.log, (runs.log[-3:], plain.log[-3:])


def _fnf(sid: int, data: bytes, metadata: bytes | None = None) -> bytes:
    """A REQUEST_FNF frame on ``sid``, length-prefixed."""
    flags = 0x05 << 10 | (0x100 if metadata is not None else 0)
    md = b"" if metadata is None else len(metadata).to_bytes(3, "big") + metadata
    body = sid.to_bytes(4, "big") + flags.to_bytes(2, "big") + md + data
    return len(body).to_bytes(3, "big") + body


def seeds() -> list[bytes]:
    """The client's side of each trace (its SETUP cut off), and runs of
    fire-and-forgets."""
    from pathlib import Path

    from sansrs.trace import Direction, read_trace

    out = []
    traces = Path(__file__).resolve().parent.parent / "tests" / "traces"
    for path in sorted(traces.glob("*.rstrace")):
        sent = read_trace(path).data(Direction.CLIENT_TO_SERVER)
        first = 3 + int.from_bytes(sent[:3], "big")  # the client's SETUP
        out.append(b"\x00\x40" + sent[first:])
    uniform = b"".join(_fnf(1 + 2 * i, b"x" * 16) for i in range(100))
    mixed = b"".join(_fnf(1 + 2 * i, b"y" * (i % 7), b"m" if i % 3 else None) for i in range(60))
    odd = uniform[:220] + _fnf(2, b"x" * 16) + _fnf(1, b"x" * 16) + uniform[220:]
    # Regression: a bad frame held before SETUP was accepted fails the accept
    # itself (the first fuzz run's find: the harness's, not the core's).
    held = bytes.fromhex(
        "fff80000160001140000007878787a7878787878787878787878780000160000"
        "00031400004000000a00000001140066697265780000160000000514007878787800787878"
    )
    return [*out, b"\x00\x10" + uniform, b"\x01\x03" + uniform, b"\x02\xff" + mixed,
            b"\x00\x07" + odd, held]


if __name__ == "__main__":
    main(test_one_input, "fnf_runs", seeds)

"""WebSocket framing per message: the batch paths of
``adapters/transport/websocket/runs.py`` against one message at a time.

In one process, no socket: a run of ``--batch`` same-length messages (16 B
and 1 KiB payloads, plus the 6-byte RSocket PAYLOAD header) framed as a
client (masked) and as a server (not masked), and the frames split back
into a run by the receiving side; ``one_by_one`` does the same with the
per-message path (``encode_data_frame`` / ``mask`` per message, what the
transport did before runs). Nanoseconds of CPU per message, median of
``--runs``.

    .venv/bin/python benchmarks/bench_websocket.py --runs 7
    .venv/bin/python benchmarks/bench_websocket.py --batch 4 --batch 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from sansrs.adapters.transport.websocket.frames import KeySource, encode_data_frame, mask
from sansrs.adapters.transport.websocket.runs import encode_run, prefix
from sansrs.adapters.transport.websocket.splitter import FrameSplitter

MESSAGES = 200_000


def _run(size: int, batch: int) -> bytes:
    message = os.urandom(size)
    return (prefix(size) + message) * batch


def _splitter(masked: bool) -> tuple[FrameSplitter, list[int]]:
    got = [0]

    def on_run(kind: int, run: bytes | bytearray) -> None:
        got[0] += len(run)

    def on_message(opcode: int, payload: bytes) -> None:
        raise AssertionError("not a run")

    def to_wsproto(data: bytes) -> None:
        raise AssertionError("not for wsproto")

    return FrameSplitter(masked=masked, max_payload=1 << 24, on_run=on_run,
                         on_message=on_message, to_wsproto=to_wsproto), got


def _time(fn: Callable[[], object], repeat: int) -> float:
    start = time.process_time()
    for _ in range(repeat):
        fn()
    return time.process_time() - start


def measure(size: int, batch: int, client: bool, runs: int) -> dict[str, float]:
    """ns per message: batch send, batch receive, one-by-one send and receive."""
    run = _run(size, batch)
    keys = KeySource() if client else None
    wire, used = encode_run(run, keys)
    assert used == len(run)
    repeat = max(1, MESSAGES // batch)
    splitter, got = _splitter(masked=client)  # the peer of a client is a server

    def send_batch() -> None:
        encode_run(run, keys)

    def receive_batch() -> None:
        splitter.feed(wire)

    messages = [run[i * (size + 3) + 3 : (i + 1) * (size + 3)] for i in range(batch)]

    def send_one() -> None:
        b"".join([encode_data_frame(2, m, keys.next() if keys else None) for m in messages])

    stride = len(wire) // batch
    head = stride - size

    def receive_one() -> None:
        out = bytearray()
        for i in range(batch):
            off = i * stride
            out += prefix(size)
            if client:
                out += mask(wire[off + head - 4 : off + head], wire[off + head : off + stride])
            else:
                out += memoryview(wire)[off + head : off + stride]

    results: dict[str, list[float]] = {k: [] for k in ("send", "receive", "send_1", "receive_1")}
    for _ in range(runs):  # alternating, so load hits both alike
        for name, fn in (("send", send_batch), ("receive", receive_batch),
                         ("send_1", send_one), ("receive_1", receive_one)):
            results[name].append(_time(fn, repeat) / (repeat * batch) * 1e9)
    assert got[0] == repeat * runs * len(run)
    return {k: statistics.median(v) for k, v in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, action="append")
    args = parser.parse_args()
    batches = args.batch or [1, 4, 16, 64, 512]
    print(f"load average at start: {os.getloadavg()[0]:.2f}; ns of CPU per message")
    print("| frame | direction | batch | send (runs) | send one by one | ratio | "
          "receive (runs) | receive one by one | ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in (22, 1030):
        for client in (True, False):
            side = "masked, client -> server" if client else "unmasked, server -> client"
            for batch in batches:
                r = measure(size, batch, client, args.runs)
                print(f"| {size} B | {side} | {batch} | {r['send']:,.0f} | {r['send_1']:,.0f} | "
                      f"{r['send_1'] / r['send']:.1f}x | {r['receive']:,.0f} | "
                      f"{r['receive_1']:,.0f} | {r['receive_1'] / r['receive']:.1f}x |",
                      flush=True)


if __name__ == "__main__":
    main()

"""A streaming server's work per item without its socket: CPU per item.

The demo responder's stream (``stream_items``: ``str(i).encode().zfill(size)``)
pumped by ``stream_outbound``'s batch path (``Outbound._pump_batches``,
``Connection.send_payloads``) into an in-memory core connection whose
output is taken as ``pieces_to_send()`` and dropped: what ``sansrs serve``
does per item on bench_tcp.py's stream1k/stream1kb rows, less the kernel
and the loop. Steadier than a socket run on a shared machine (no other
process in the figure), so a small change to the pump shows; and the
generator alone (``--generator``) is the floor the pump adds to.

    .venv/bin/python benchmarks/bench_stream_pump.py --items 300000 --size 1024 --runs 5
"""

from __future__ import annotations

import argparse
import sys
import time
from itertools import islice
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the in-memory connection pair lives with the tests

from raw_peer import settle_allocator  # noqa: E402
from sansrs.adapters.drive.sources import IteratorSource  # noqa: E402
from sansrs.adapters.rsocket.demo_contract import stream_items  # noqa: E402
from sansrs.adapters.rsocket.outbound import stream_outbound  # noqa: E402

from tests.rsocket.pair import Pair  # noqa: E402

MAX_N = 0x7FFFFFFF


def pump_once(n: int, size: int) -> float:
    """CPU seconds per item to pump ``n`` items of ``size`` bytes."""
    pair = Pair.established()
    pair.client.request_stream(b"q", initial_n=MAX_N)
    pair.pump()
    _, events = pair.take()
    sid: int = events[0].stream_id  # type: ignore[attr-defined]
    conn = pair.server
    outbound = stream_outbound(conn, sid, IteratorSource(stream_items(n, size)), MAX_N)
    start = time.process_time()
    while not outbound.finished:
        outbound.pump(MAX_N)
        conn.pieces_to_send()
    return (time.process_time() - start) / n


def generator_once(n: int, size: int) -> float:
    """CPU seconds per item to pull the same items in batches of 129."""
    items = stream_items(n, size)
    held: list[bytes] = []
    start = time.process_time()
    while True:
        held.extend(islice(items, 129))
        if len(held) < 129:
            break
        held.clear()
    return (time.process_time() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--generator", action="store_true", help="the generator alone")
    args = parser.parse_args()
    settle_allocator()  # a 1 KiB batch's join is above glibc's first mmap threshold
    once = generator_once if args.generator else pump_once
    best = min(once(args.items, args.size) for _ in range(args.runs))
    what = "generator alone" if args.generator else "pump"
    print(f"{what}: {best * 1e6:.4f} µs CPU per item (best of {args.runs}, "
          f"{args.items} items of {args.size} B)")


if __name__ == "__main__":
    main()

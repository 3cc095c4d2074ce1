"""How the stream iterator's ``prefetch`` bounds throughput (sansrs over TCP).

``python -m sansrs serve`` (the demo responder) in its own process; this
process consumes ``request_stream`` iterators with each prefetch in turn
(``--runs`` times each, interleaved, medians) and prints a markdown table of
items/s per item size and prefetch.

    .venv/bin/python benchmarks/bench_prefetch.py --runs 5
    .venv/bin/python benchmarks/bench_prefetch.py --size 16 --prefetch 256 --prefetch 8192
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_tcp import server  # noqa: E402
from sansrs.adapters.rsocket import Client, connect  # noqa: E402

WAIT = 120.0


def rate(client: Client, items: int, size: int, prefetch: int) -> float:
    request = json.dumps({"n": items, "size": size})
    start = time.perf_counter()
    done = 0
    with client.request_stream(request, prefetch=prefetch, timeout=WAIT) as stream:
        for _ in stream:
            done += 1
    if done != items:
        raise RuntimeError(f"{done} of {items} items")
    return items / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", type=int, action="append", help="item sizes (16, 1024)")
    parser.add_argument("--prefetch", type=int, action="append",
                        help="prefetch values (256, 1024, 4096, 8192, 16384)")
    parser.add_argument("--items", type=int, default=300_000, help="items per run")
    args = parser.parse_args()
    sizes = args.size or [16, 1024]
    prefetches = args.prefetch or [256, 1024, 4096, 8192, 16384]
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.items} items per run")
    print("| item size | " + " | ".join(f"prefetch {p}" for p in prefetches) + " |")
    print("| --- " * (len(prefetches) + 1) + "|")
    with server("sansrs") as (port, _), connect(f"tcp://127.0.0.1:{port}") as client:
        rate(client, 10_000, 16, 256)  # warm up both sides
        for size in sizes:
            rates: dict[int, list[float]] = {p: [] for p in prefetches}
            for _ in range(args.runs):  # interleaved: drift hits every column alike
                for p in prefetches:
                    rates[p].append(rate(client, args.items, size, p))
            cells = " | ".join(f"{statistics.median(rates[p]):,.0f}" for p in prefetches)
            print(f"| {size} B | {cells} |", flush=True)


if __name__ == "__main__":
    main()

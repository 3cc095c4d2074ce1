"""Early writes within a large read (``rsocket_engine.WRITE_EVERY``), on and
off: request-responses with 64 in flight over TCP, both processes patched.

Each run starts ``python -m sansrs serve`` with the setting and runs the
benchmark client (``request_response_many``) in this process with the same
setting; settings alternate run by run, medians are printed.

    .venv/bin/python benchmarks/bench_write_early.py --runs 5
    .venv/bin/python benchmarks/bench_write_early.py --every 16 --every 32 --every 64
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sansrs.adapters.rsocket.engine as engine  # noqa: E402
from sansrs_client import run  # noqa: E402

OFF = 10**9  # never reached: no early write

SERVER = (
    "import sys, runpy; import sansrs.adapters.rsocket.engine as e; e.WRITE_EVERY = {every}; "
    "sys.argv = ['sansrs', 'serve', 'tcp://127.0.0.1:0']; "
    "runpy.run_module('sansrs', run_name='__main__')"
)


def one_run(every: int, requests: int) -> float:
    engine.WRITE_EVERY = every
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(every=every)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1].rsplit(":", 1)[1])
        start = time.perf_counter()
        done = run(f"tcp://127.0.0.1:{port}", "rr", requests, 64)
        return done / (time.perf_counter() - start)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--every", type=int, action="append",
                        help="WRITE_EVERY values to compare (default: today's and off)")
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    settings = args.every or [engine.WRITE_EVERY, OFF]
    rates: dict[int, list[float]] = {e: [] for e in settings}
    for _ in range(args.runs):
        for every in settings:
            rates[every].append(one_run(every, args.requests))
    print("| WRITE_EVERY | round trips/s (median) | runs |")
    print("| --- | ---: | --- |")
    for every, values in rates.items():
        name = "off" if every == OFF else str(every)
        runs = ", ".join(f"{v / 1000:.0f}k" for v in values)
        print(f"| {name} | {statistics.median(values):,.0f} | {runs} |")


if __name__ == "__main__":
    main()

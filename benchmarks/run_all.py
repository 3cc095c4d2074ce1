"""Run every benchmark in this folder, one process each, in a fixed order.

``make bench`` calls this. Each script prints its own markdown table (medians
of several runs, side by side with rsocket-py and a raw-socket baseline where
the issue asks for one); the figures and the commands that produced them are
recorded in docs/performance.md. Benchmarks are never part of the test suite:
the machine is shared and noisy, so run them when it is quiet and quote the
medians.

    .venv/bin/python benchmarks/run_all.py                 # all of them
    .venv/bin/python benchmarks/run_all.py --only codec tcp
    .venv/bin/python benchmarks/run_all.py --list
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Scripts that are peers or helpers of a benchmark, not benchmarks themselves;
# bench_ab.py compares this checkout with another one (``--before PATH``), so
# it runs by hand with the checkout to compare against.
_NOT_BENCHMARKS = {
    "run_all.py", "raw_peer.py", "rsocketpy_peer.py", "sansrs_client.py", "bench_ab.py",
}

# Arguments for a full run; anything not listed runs with its own defaults.
_ARGS: dict[str, list[str]] = {
    "codec": ["--runs", "5"],
    "connection": ["--runs", "7"],
    "tcp": ["--runs", "5", "--scale", "0.5"],
}


def benchmarks() -> dict[str, Path]:
    """Every ``bench_<name>.py`` here, by name, in a stable order."""
    found = {}
    for path in sorted(HERE.glob("bench_*.py")):
        if path.name not in _NOT_BENCHMARKS:
            found[path.stem.removeprefix("bench_")] = path
    return found


def main(argv: list[str] | None = None) -> int:
    available = benchmarks()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(available), metavar="NAME",
                        help=f"run only these ({', '.join(sorted(available))})")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, path in available.items():
            print(f"{name:12} {path.relative_to(HERE.parent)} {' '.join(_ARGS.get(name, []))}")
        return 0
    failed = []
    for name in args.only or list(available):
        command = [sys.executable, str(available[name]), *_ARGS.get(name, [])]
        print(f"\n== {name}: {' '.join(command)}", flush=True)
        started = time.monotonic()
        result = subprocess.run(command, check=False)
        print(f"== {name}: exit {result.returncode} after {time.monotonic() - started:.0f} s",
              flush=True)
        if result.returncode:
            failed.append(name)
    print(f"\n== {len(args.only or available)} benchmark(s); failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

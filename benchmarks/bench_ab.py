"""Before/after: the ``bench_tcp`` scenarios of two checkouts, interleaved.

A refactor keeps its before/after figures side by side: this runs the same
client/server scenario from an older checkout (``--before DIR``, with its own
``.venv``) and from this one, alternating run by run so that load on the
machine hits both alike, and prints the medians and their ratio.

    git worktree add /tmp/before <commit> && (cd /tmp/before && make venv)
    .venv/bin/python benchmarks/bench_ab.py --before /tmp/before --runs 5
    .venv/bin/python benchmarks/bench_ab.py --before /tmp/before --only stream16 --impl sansrs-ws

Each run is one client process against a fresh server of the same
checkout (``python -m sansrs serve``, ``benchmarks/bench_tcp.py client``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

AFTER = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(AFTER / "benchmarks"))
from bench_tcp import SCENARIOS, WS_PATH  # noqa: E402

#: ``sansrs-asyncio``: the asyncio client against ``sansrs serve`` (``rr_seq`` only).
IMPLS = ("sansrs", "sansrs-ws", "sansrs-selector", "sansrs-asyncio")


def python(tree: Path) -> str:
    return str(tree / ".venv" / "bin" / "python")


def serve_args(impl: str) -> list[str]:
    if impl == "sansrs-ws":
        return ["serve", f"ws://127.0.0.1:0{WS_PATH}"]
    if impl == "sansrs-selector":
        return ["serve", "--loop", "selector", "tcp://127.0.0.1:0"]
    return ["serve", "tcp://127.0.0.1:0"]


@contextmanager
def server(tree: Path, impl: str) -> Iterator[int]:
    proc = subprocess.Popen(
        [python(tree), "-m", "sansrs", *serve_args(impl)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tree,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"{tree} {impl}: server did not start: {line}")
        yield int(line[1].rsplit(":", 1)[-1].split("/")[0])
    finally:
        proc.terminate()
        proc.wait(10)


def one_run(tree: Path, impl: str, kind: str, count: int, arg: int) -> float:
    with server(tree, impl) as port:
        command = [
            python(tree), str(tree / "benchmarks" / "bench_tcp.py"),
            "client", impl, str(port), kind, str(count), str(arg),
        ]  # fmt: skip
        out = subprocess.run(
            command, capture_output=True, text=True, timeout=600, check=True, cwd=tree
        ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    if result["count"] != count:
        raise RuntimeError(f"{tree} {impl} {kind}: {result['count']} of {count}")
    return float(result["count"] / result["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="the older checkout")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--impl", action="append", choices=IMPLS)
    parser.add_argument("--scale", type=float, default=0.5, help="multiply message counts")
    args = parser.parse_args()
    before = args.before.resolve()
    names = args.only or ["stream16", "stream1k", "rr_seq", "rr64", "fnf16"]
    impls = args.impl or ["sansrs", "sansrs-ws"]
    print(f"bench_ab: before {before}, after {AFTER}; {args.runs} runs each, interleaved")
    print("| scenario | driver | before (msg/s) | after (msg/s) | after/before |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name in names:
        kind, count, arg, _ = SCENARIOS[name]
        n = int(count * args.scale)
        if kind in ("rr", "rrc"):
            n -= n % arg
        for impl in impls:
            if impl == "sansrs-asyncio" and name != "rr_seq":
                continue
            rates: dict[Path, list[float]] = {before: [], AFTER: []}
            for i in range(args.runs):
                order = (before, AFTER) if i % 2 == 0 else (AFTER, before)
                for tree in order:
                    rates[tree].append(one_run(tree, impl, kind, n, arg))
            b, a = statistics.median(rates[before]), statistics.median(rates[AFTER])
            print(f"| {name} | {impl} | {b:,.0f} | {a:,.0f} | {a / b:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

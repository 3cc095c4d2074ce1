"""Before/after: the ``bench_tcp`` scenarios of two checkouts, interleaved.

A refactor keeps its before/after figures side by side: this runs the same
client/server scenario from an older checkout (``--before DIR``, with its own
``.venv``) and from this one, alternating run by run so that load on the
machine hits both alike, and prints the medians and the median of the
runs' ratios (each run against the other tree's run beside it).

    git worktree add /tmp/before <commit> && (cd /tmp/before && make venv)
    .venv/bin/python benchmarks/bench_ab.py --before /tmp/before --runs 5
    .venv/bin/python benchmarks/bench_ab.py --before /tmp/before --only stream16 --impl sansrs-ws
    .venv/bin/python benchmarks/bench_ab.py --before /tmp/before --cpu --runs 7  # CPU per rt

Each run is one client process against a fresh server of the same
checkout (``python -m sansrs serve``, ``benchmarks/bench_tcp.py client``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

AFTER = Path(__file__).resolve().parent.parent
# Both checkouts' processes with glibc's mmap threshold raised from the start:
# an older checkout's benchmark client may lack raw_peer.settle_allocator(),
# and a process that never freed a large block pays an mmap/mremap per
# partial 256 KiB read (docs/performance.md, "a fair baseline"), which
# would be measured as a difference between the trees.
os.environ.setdefault("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=4194304")
sys.path.insert(0, str(AFTER / "benchmarks"))
from bench_tcp import ASYNCIO_SCENARIOS, SCENARIOS, WS_PATH, cpu_split  # noqa: E402

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
def server(tree: Path, impl: str) -> Iterator[tuple[int, int]]:
    """A fresh ``sansrs serve`` of ``tree``: (its port, its process ID)."""
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
        yield int(line[1].rsplit(":", 1)[-1].split("/")[0]), proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def one_run(tree: Path, impl: str, kind: str, count: int, arg: int) -> float:
    with server(tree, impl) as (port, _):
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


def cpu_run(tree: Path, impl: str, count: int) -> tuple[float, float, float]:
    """``--cpu``: one ``bench_tcp.py rr-cpu`` run (sequential request-responses
    after a warm-up) against a fresh server of the same checkout: (round
    trips/s, client CPU µs and server CPU µs per round trip)."""
    with server(tree, impl) as (port, pid):
        before = sum(cpu_split(pid))
        out = subprocess.run(
            [python(tree), str(tree / "benchmarks" / "bench_tcp.py"), "rr-cpu", impl, str(port),
             str(count)],
            capture_output=True, text=True, timeout=600, check=True, cwd=tree,
        ).stdout  # fmt: skip
        server_cpu = sum(cpu_split(pid)) - before
    rate, user, system = json.loads(out.strip().splitlines()[-1])
    return rate, user + system, server_cpu / (count + 300) * 1e6  # (its warm-up: 300)


def paired_ratio(before: list[float], after: list[float]) -> float:
    """after / before as the median of each run's ratio to the run of the
    other tree next to it: a machine whose rate jumps between runs (this
    one's idle cores wake slowly or fast, a state that changes by the
    minute) moves both of a pair alike, the ratio of the medians not."""
    return statistics.median(a / b for b, a in zip(before, after, strict=True))


def cpu_main(before: Path, impls: list[str], runs: int, count: int) -> None:
    print(f"bench_ab --cpu: rr_seq, {count} round trips a run, {runs} runs each, interleaved")
    print("| driver | before rt/s | after rt/s | after/before | client µs before | after "
          "| server µs before | after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for impl in impls:
        got: dict[Path, list[tuple[float, float, float]]] = {before: [], AFTER: []}
        for i in range(runs):
            for tree in (before, AFTER) if i % 2 == 0 else (AFTER, before):
                got[tree].append(cpu_run(tree, impl, count))
        med = {t: [statistics.median(r[k] for r in got[t]) for k in range(3)] for t in got}
        b, a = med[before], med[AFTER]
        ratio = paired_ratio([r[0] for r in got[before]], [r[0] for r in got[AFTER]])
        print(f"| {impl} | {b[0]:,.0f} | {a[0]:,.0f} | {ratio:.2f}x | {b[1]:.1f} | {a[1]:.1f} "
              f"| {b[2]:.1f} | {a[2]:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="the older checkout")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--impl", action="append", choices=IMPLS)
    parser.add_argument("--scale", type=float, default=0.5, help="multiply message counts")
    parser.add_argument("--cpu", action="store_true",
                        help="sequential request-response only: CPU per round trip of "
                             "each side (thread and selector drivers)")
    args = parser.parse_args()
    before = args.before.resolve()
    if args.cpu:
        impls = [i for i in args.impl or ["sansrs", "sansrs-selector"]
                 if i in ("sansrs", "sansrs-selector")]
        cpu_main(before, impls, args.runs, int(20_000 * args.scale))
        return
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
            if impl == "sansrs-asyncio" and name not in ASYNCIO_SCENARIOS:
                continue
            rates: dict[Path, list[float]] = {before: [], AFTER: []}
            for i in range(args.runs):
                order = (before, AFTER) if i % 2 == 0 else (AFTER, before)
                for tree in order:
                    rates[tree].append(one_run(tree, impl, kind, n, arg))
            b, a = statistics.median(rates[before]), statistics.median(rates[AFTER])
            ratio = paired_ratio(rates[before], rates[AFTER])
            print(f"| {name} | {impl} | {b:,.0f} | {a:,.0f} | {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

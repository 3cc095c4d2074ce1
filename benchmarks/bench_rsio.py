"""reactive-streams-io over TCP: 8-byte fixed-size elements in packed mode,
against the same stream through RSocket with one element per PAYLOAD.

The server runs in its own process (``python -m sansrs serve --protocol rsio``
and ``python -m sansrs serve``), the client in this one, on 127.0.0.1. Each
scenario runs ``--runs`` times (a new connection each); the median rate of
elements received by the application is reported, with the ratio to the
RSocket baseline.

    .venv/bin/python benchmarks/bench_rsio.py --runs 5
    .venv/bin/python benchmarks/bench_rsio.py --runs 3 --only rsio_packed
    .venv/bin/python benchmarks/bench_rsio.py --runs 7 --before /tmp/before

With ``--before DIR``, ``core_on_next`` runs on the core of another
checkout too (``DIR/sansrs``, e.g. ``git archive <commit> sansrs | tar -x -C
DIR``), alternating run by run, one process per run (each imports its own
core fresh), so that load on the machine hits both alike; a markdown table
gives the medians of elements/s (wall clock) and of CPU time per element
(``process_time``: the figure load barely moves) and their ratios.

Scenarios:
- ``rsio_packed``: ``subscribe_packed("counter/N")``, demand window 65,536
  elements; the server reads the counter in bulk and sends onNextPacked.
- ``core_on_next``: two rsio cores back to back in this process, no socket:
  16-byte variable-size onNext (each element an event), for the core's cost.
- ``rsio_elements``: the same stream through ``subscribe`` (one ``bytes``
  per element out of the iterator, prefetch 4096).
- ``rsocket_payload``: RSocket request-stream of 8-byte PAYLOADs (the demo
  responder's ``{"n": N, "size": 8}``), prefetch 4096: the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sansrs.adapters import rsio as rsio_sync
from sansrs.adapters import rsocket as rsocket_sync

PY = sys.executable
TARGET = 3_000_000


@contextmanager
def server(protocol: str) -> Iterator[str]:
    cmd = [PY, "-m", "sansrs", "serve", "--protocol", protocol, "tcp://127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"{protocol} server did not start: {line}")
        yield line[1]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def rsio_packed(url: str, n: int) -> int:
    got = 0
    with rsio_sync.connect(url) as client, client.subscribe_packed(
        f"counter/{n}", prefetch=65_536, timeout=30
    ) as batches:
        for batch in batches:
            got += len(batch) >> 3
    return got


def rsio_elements(url: str, n: int) -> int:
    got = 0
    with rsio_sync.connect(url) as client, client.subscribe(
        f"counter/{n}", prefetch=4096, timeout=30
    ) as elements:
        for _ in elements:
            got += 1
    return got


def rsocket_payload(url: str, n: int) -> int:
    got = 0
    request = json.dumps({"n": n, "size": 8})
    with rsocket_sync.connect(url) as client, client.request_stream(
        request, prefetch=4096, timeout=30
    ) as items:
        for _ in items:
            got += 1
    return got


def core_on_next(url: str, n: int) -> int:
    """Two rsio cores back to back in this process (no socket): 16-byte
    variable-size onNext, 1,000 per ``data_to_send`` / ``receive_data``."""
    from sansrs.rsio import MAX_VARINT, Connection, Role

    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    sid = client.subscribe("x", MAX_VARINT)
    server.receive_data(client.data_to_send())
    server.events()
    server.send_on_subscribe(sid)
    client.receive_data(server.data_to_send())
    client.events()
    element = b"x" * 16
    send_next = server.send_next
    got = 0
    for start in range(0, n, 1000):
        for _ in range(min(1000, n - start)):
            send_next(sid, element)
        client.receive_data(server.data_to_send())
        got += len(client.events())
    return got


SCENARIOS: dict[str, tuple[str, Callable[[str, int], int], int]] = {
    "rsio_packed": ("rsio", rsio_packed, 20_000_000),
    "core_on_next": ("none", core_on_next, 1_000_000),
    "rsio_elements": ("rsio", rsio_elements, 1_000_000),
    "rsocket_payload": ("rsocket", rsocket_payload, 500_000),
}


def core_run(count: int) -> tuple[float, float]:
    """One ``core_on_next`` run: (elements/s wall, CPU microseconds per element)."""
    start, cpu = time.perf_counter(), time.process_time()
    got = core_on_next("", count)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if got != count:
        raise RuntimeError(f"core_on_next: {got} events for {count} elements")
    return count / elapsed, cpu * 1e6 / count


def compare_core_before(before: Path, runs: int, scale: float) -> None:
    """``core_on_next`` on this checkout's core and on ``before``'s, alternating."""
    count = max(1000, int(SCENARIOS["core_on_next"][2] * scale))
    results: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for _ in range(runs):
        for name, core in (("before", before), ("after", None)):
            env = dict(os.environ)
            if core is not None:
                env["PYTHONPATH"] = str(core)  # its sansrs ahead of this checkout's
            command = [PY, __file__, "--core-json", str(count)]
            here = Path(__file__).resolve().parent
            wall, cpu = json.loads(subprocess.check_output(command, env=env, cwd=here, text=True))
            results[name].append((float(wall), float(cpu)))
    print(f"\ncore_on_next, {count:,} elements, {runs} runs each, alternating (median)\n")
    print("| core | elements/s (wall) | min | max | CPU µs per element |")
    print("| --- | ---: | ---: | ---: | ---: |")
    medians = {}
    for name, rows in results.items():
        walls = [w for w, _ in rows]
        medians[name] = (statistics.median(walls), statistics.median(c for _, c in rows))
        print(
            f"| {name} | {medians[name][0]:,.0f} | {min(walls):,.0f} | {max(walls):,.0f} | "
            f"{medians[name][1]:.3f} |"
        )
    (wb, cb), (wa, ca) = medians["before"], medians["after"]
    print(f"| after / before | {wa / wb:.3f} | | | {ca / cb:.3f} |")


def measure(name: str, runs: int, scale: float) -> list[float]:
    protocol, fn, count = SCENARIOS[name]
    count = max(1000, int(count * scale))
    rates = []
    if protocol == "none":
        for _ in range(runs):
            start = time.perf_counter()
            got = fn("", count)
            rates.append(got / (time.perf_counter() - start))
        return rates
    with server(protocol) as url:
        fn(url, 1000)  # warm up: imports, first connection
        for _ in range(runs):
            start = time.perf_counter()
            got = fn(url, count)
            elapsed = time.perf_counter() - start
            if got != count:
                raise RuntimeError(f"{name}: received {got} of {count} elements")
            rates.append(count / elapsed)
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply element counts")
    parser.add_argument(
        "--before", type=Path, help="core_on_next against the core of the checkout in DIR"
    )
    parser.add_argument("--core-json", type=int, help=argparse.SUPPRESS)  # one run, for --before
    args = parser.parse_args(argv)
    if args.core_json is not None:
        print(json.dumps(core_run(args.core_json)))
        return 0
    if args.before is not None:
        compare_core_before(args.before.resolve(), args.runs, args.scale)
        return 0
    names = args.only or list(SCENARIOS)
    results = {name: measure(name, args.runs, args.scale) for name in names}
    base = statistics.median(results["rsocket_payload"]) if "rsocket_payload" in results else None
    print(f"\n| scenario (median of {args.runs} runs) | elements/s | min | max | vs RSocket |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, rates in results.items():
        med = statistics.median(rates)
        ratio = f"{med / base:.1f}x" if base else "-"
        print(f"| {name} | {med:,.0f} | {min(rates):,.0f} | {max(rates):,.0f} | {ratio} |")
    if "rsio_packed" in results:
        med = statistics.median(results["rsio_packed"])
        verdict = "met" if med >= TARGET else "NOT met"
        print(f"\nTarget rsio_packed >= {TARGET:,}/s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

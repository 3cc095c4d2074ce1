"""RSocket connection core throughput: two cores back to back in one process.

Workload: a client ``Connection`` requests a stream from a server
``Connection`` (initial REQUEST_N = batch), the server sends N (default
1,000,000) PAYLOADs of 16 bytes, and the client grants another batch with
REQUEST_N each time it has consumed a batch (default 256). Bytes move between
the two through ``data_to_send`` / ``receive_data`` (in the chunks the cores
produce), events are drained with ``events()``. The figure is payloads per
second through both cores (sender: credit check + encode + queue; receiver:
parse + stream lookup + credit + one event), the median of --runs runs, in
wall-clock time and in CPU time of the process (the machine is shared, so
the second is the steadier figure; both are reported).

With ``--resume`` the same workload runs on a resumable session too (SETUP
with R, a server ``SessionStore``: every sent PAYLOAD is retained until the
peer's KEEPALIVE position trims it), alternating plain and resumable runs,
and a markdown table compares the two (the cost of retaining frames).

With ``--before DIR`` the same workload runs on the core of another checkout
too (``DIR/sansrs``, e.g. ``git archive <commit> sansrs | tar -x -C DIR``),
alternating run by run (one process per run, so both import their own core
fresh) so that load on the machine hits both alike; a markdown table gives
the medians and their ratio (with ``--resume`` too: on resumable sessions).

Usage: python benchmarks/bench_connection.py [--payloads N] [--batch B] [--runs R]
       [--resume | --before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sansrs.rsocket import Connection, Role, SessionStore
from sansrs.rsocket.events import PayloadReceived

DATA = b"0123456789abcdef"


def run_once(payloads: int, batch: int, resume: bool = False) -> tuple[float, float]:
    """(payloads per wall-clock second, payloads per CPU second of this process)."""
    client = Connection(Role.CLIENT)
    server = Connection(Role.SERVER, sessions=SessionStore() if resume else None)
    client.setup(resume=resume)
    server.receive_data(client.data_to_send())
    server.events()
    server.accept_setup()
    sid = client.request_stream(b"bench", initial_n=batch)
    server.receive_data(client.data_to_send())
    server.events()
    send = server.send_payload
    received = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    sent = 0
    while sent < payloads:
        for _ in range(min(batch, payloads - sent)):
            send(sid, DATA)
        sent += batch
        client.receive_data(server.data_to_send())
        events = client.events()
        received += len(events)
        if sent < payloads:
            client.request_n(sid, batch)
            server.receive_data(client.data_to_send())
            server.events()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    # Every PAYLOAD arrived (a resumable session also sees KEEPALIVE events).
    assert client.received_position == payloads * (6 + len(DATA)), client.received_position
    assert received >= payloads
    assert type(events[-1]) is PayloadReceived
    if resume:
        assert server.resumable, "the retained frames must stay bounded"
    return payloads / elapsed, payloads / cpu


def compare_resume(payloads: int, batch: int, runs: int) -> None:
    """Plain vs resumable, alternating runs; a markdown table of medians."""
    plain: list[tuple[float, float]] = []
    resumable: list[tuple[float, float]] = []
    for _ in range(runs):
        plain.append(run_once(payloads, batch))
        resumable.append(run_once(payloads, batch, resume=True))
    print(f"python {sys.version.split()[0]} on {platform.machine()}")
    print(
        f"request-stream, {payloads} payloads of {len(DATA)} bytes, "
        f"REQUEST_N batches of {batch}, {runs} runs each (median)\n"
    )
    base_cpu = statistics.median(c for _, c in plain)
    print("| session | payloads/s (wall) | payloads per CPU s | ratio (CPU) |")
    print("| --- | ---: | ---: | ---: |")
    for name, results in (("plain", plain), ("resumable (frames retained)", resumable)):
        wall = statistics.median(w for w, _ in results)
        cpu = statistics.median(c for _, c in results)
        print(f"| {name} | {wall:,.0f} | {cpu:,.0f} | {cpu / base_cpu:.2f} |")


def _one_run(payloads: int, batch: int, core: Path | None, resume: bool) -> tuple[float, float]:
    """One run in a fresh process, on ``core``'s sansrs (None: this checkout's)."""
    env = dict(os.environ)
    if core is not None:
        env["PYTHONPATH"] = str(core)  # ahead of this checkout's installed package
    args = ["--payloads", str(payloads), "--batch", str(batch), "--json"]
    out = subprocess.run(
        [sys.executable, __file__, *args, *(["--resume"] if resume else [])],
        env=env,
        cwd=Path(__file__).resolve().parent,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    wall, cpu = json.loads(out)
    return float(wall), float(cpu)


def compare_before(payloads: int, batch: int, runs: int, before: Path, resume: bool) -> None:
    """This checkout's core vs ``before``'s, alternating runs; a markdown table."""
    results: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for _ in range(runs):
        results["before"].append(_one_run(payloads, batch, before, resume))
        results["after"].append(_one_run(payloads, batch, None, resume))
    print(f"python {sys.version.split()[0]} on {platform.machine()}")
    session = "resumable sessions" if resume else "plain sessions"
    print(
        f"request-stream, {payloads} payloads of {len(DATA)} bytes, {session}, "
        f"REQUEST_N batches of {batch}, {runs} runs each, alternating (median)\n"
    )
    print("| core | payloads/s (wall) | min | max | payloads per CPU s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, rows in results.items():
        walls = [w for w, _ in rows]
        cpu = statistics.median(c for _, c in rows)
        print(
            f"| {name} | {statistics.median(walls):,.0f} | {min(walls):,.0f} | "
            f"{max(walls):,.0f} | {cpu:,.0f} |"
        )
    ratio_wall = statistics.median(w for w, _ in results["after"]) / statistics.median(
        w for w, _ in results["before"]
    )
    ratio_cpu = statistics.median(c for _, c in results["after"]) / statistics.median(
        c for _, c in results["before"]
    )
    print(f"| after / before | {ratio_wall:.3f} | | | {ratio_cpu:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payloads", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--resume", action="store_true", help="compare with a resumable session (markdown table)"
    )
    parser.add_argument(
        "--before", type=Path, help="compare with the core of the checkout in DIR (markdown table)"
    )
    parser.add_argument(
        "--json", action="store_true", help=argparse.SUPPRESS
    )  # one run, for --before
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run_once(args.payloads, args.batch, resume=args.resume)))
        return
    if args.before is not None:
        compare_before(args.payloads, args.batch, args.runs, args.before.resolve(), args.resume)
        return
    if args.resume:
        compare_resume(args.payloads, args.batch, args.runs)
        return
    results = [run_once(args.payloads, args.batch) for _ in range(args.runs)]
    rates = [wall for wall, _ in results]
    cpu_rates = [cpu for _, cpu in results]
    print(f"python {sys.version.split()[0]} on {platform.machine()}")
    print(
        f"request-stream, {args.payloads} payloads of {len(DATA)} bytes, "
        f"REQUEST_N batches of {args.batch}, {args.runs} runs"
    )
    print(
        f"payloads/s through both cores: median {statistics.median(rates):,.0f} "
        f"(min {min(rates):,.0f}, max {max(rates):,.0f})"
    )
    print(
        f"payloads per CPU second (process_time, less sensitive to a loaded machine): "
        f"median {statistics.median(cpu_rates):,.0f}"
    )


if __name__ == "__main__":
    main()

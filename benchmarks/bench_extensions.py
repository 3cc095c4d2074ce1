"""Routing costs and the load-balanced client (docs/performance.md,
"Extensions: routing and load balancing").

    .venv/bin/python benchmarks/bench_extensions.py                  # routing, 5 runs
    .venv/bin/python benchmarks/bench_extensions.py --only rr64 --runs 3
    .venv/bin/python benchmarks/bench_extensions.py --balancer       # 3 servers, one killed
    .venv/bin/python benchmarks/bench_extensions.py --dispatch       # in process, µs per request

Routing: rr64 (request-response, 64 in flight) and stream16 (a stream of
16-byte items) against one ``sansrs serve`` process, from a plain client
(no metadata: the demo responder as before) and from a routed client
(``client.route("echo")`` / ``route("stream")``: composite metadata on every
request, decoded and dispatched by the server's Router); and rsocket-py's
router (``RequestRouter``, benchmarks/rsocketpy_routed_peer.py) with its
routing client, fewer requests for the same wall time. Client and server in
separate processes on 127.0.0.1; runs interleaved; medians.

Balancer: a LoadBalancedClient over three ``sansrs serve`` processes sends
request-responses from 8 threads; one server is killed (SIGKILL) a third of
the way through. Every request ends as completed or failed with an error;
lost = sent - completed - failed must be 0.

Dispatch: in one process, the server side of one request-response without
the network: the demo responder's handler against the Router's (decoding
cached, route matched, RoutedRequest built, the ``echo`` route called).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PY = sys.executable
SANSRS_SERVER = [PY, "-m", "sansrs", "serve", "tcp://127.0.0.1:0"]
RSOCKETPY_SERVER = [PY, str(HERE / "rsocketpy_routed_peer.py"), "serve", "0"]
# name: (kind, count, arg, rsocket-py count)
SCENARIOS = {
    "rr64": ("rr", 200_000, 64, 12_800),
    "stream16": ("stream", 1_000_000, 16, 50_000),
}
IMPLS = ("plain", "routed", "rsocketpy-router")


@contextmanager
def server(cmd: list[str]) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"{cmd} did not start: {line}")
        yield int(line[1].rsplit(":", 1)[-1]), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all threads; Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def run_client(
    impl: str, port: int, server_pid: int, kind: str, count: int, arg: int
) -> tuple[float, float, float]:
    """(rate /s, client CPU µs per op, server CPU µs per op); rsocket-py's
    client does not report its CPU (NaN)."""
    if impl == "rsocketpy-router":
        cmd = [PY, str(HERE / "rsocketpy_routed_peer.py"), "bench", str(port), kind, str(count),
               str(arg)]  # fmt: skip
    else:
        cmd = [PY, __file__, "client", impl, str(port), kind, str(count), str(arg)]
    before = process_cpu(server_pid)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True).stdout
    server_cpu = process_cpu(server_pid) - before
    result = json.loads(out.strip().splitlines()[-1])
    done = result["count"]
    if done != count:
        raise RuntimeError(f"{impl} {kind}: {done} of {count}")
    client_cpu = result.get("cpu", float("nan"))
    return done / result["seconds"], client_cpu * 1e6 / done, server_cpu * 1e6 / done


def client_main(impl: str, port: int, kind: str, count: int, arg: int) -> None:
    from sansrs.adapters.rsocket import COMPOSITE_METADATA, connect

    url = f"tcp://127.0.0.1:{port}"
    options = {"metadata_mime_type": COMPOSITE_METADATA} if impl == "routed" else {}
    with connect(url, **options) as client:
        rr_target = client.route("echo") if impl == "routed" else client
        stream_target = client.route("stream") if impl == "routed" else client
        start = time.perf_counter()
        cpu = time.process_time()
        done = 0
        if kind == "rr":
            answers = rr_target.request_response_many(
                itertools.repeat(b"x" * 16, count), in_flight=arg, timeout=120
            )
            for _ in answers:
                done += 1
        else:
            request = json.dumps({"n": count, "size": arg})
            with stream_target.request_stream(request, prefetch=8192, timeout=120) as items:
                for _ in items:
                    done += 1
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
    print(json.dumps({"count": done, "seconds": seconds, "cpu": cpu}))


def routing(runs: int, only: list[str]) -> None:
    """Wall-clock rates swing with the machine's load; CPU per operation
    (client + server) does not, and is the routing cost to read."""
    print("| scenario | plain /s | routed /s | rsocket-py router /s | plain CPU µs/op "
          "(client + server) | routed CPU µs/op | routed/plain rate | routed/plain CPU "
          "| routed/rsocket-py rate |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in only:
        kind, count, arg, py_count = SCENARIOS[name]
        rates: dict[str, list[float]] = {impl: [] for impl in IMPLS}
        cpu: dict[str, list[float]] = {impl: [] for impl in IMPLS}
        with server(SANSRS_SERVER) as (port, ours), server(RSOCKETPY_SERVER) as (py_port, py):
            for _ in range(runs):
                for impl in IMPLS:
                    if impl == "rsocketpy-router":
                        rate, client, srv = run_client(impl, py_port, py.pid, kind, py_count, arg)
                    else:
                        rate, client, srv = run_client(impl, port, ours.pid, kind, count, arg)
                    rates[impl].append(rate)
                    cpu[impl].append(client + srv)
        med = {impl: statistics.median(r) for impl, r in rates.items()}
        mcpu = {impl: statistics.median(c) for impl, c in cpu.items()}
        print(
            f"| {name} | {med['plain']:,.0f} | {med['routed']:,.0f} | "
            f"{med['rsocketpy-router']:,.0f} | {mcpu['plain']:.2f} | {mcpu['routed']:.2f} | "
            f"{med['routed'] / med['plain']:.2f} | {mcpu['routed'] / mcpu['plain']:.3f} | "
            f"{med['routed'] / med['rsocketpy-router']:.1f}x |",
            flush=True,
        )
        for impl in IMPLS:
            print(f"<!-- {name} {impl}: rates " + ", ".join(f"{x:.0f}" for x in rates[impl])
                  + "; CPU µs/op " + ", ".join(f"{x:.2f}" for x in cpu[impl]) + " -->",
                  flush=True)  # fmt: skip


def balancer(total: int, threads: int, strategy_name: str) -> None:
    from sansrs.adapters.rsocket import (
        ConnectionClosed,
        LoadBalancedClient,
        RoundRobinStrategy,
        RSocketError,
        WeightedStrategy,
    )

    strategy = WeightedStrategy() if strategy_name == "weighted" else RoundRobinStrategy()

    with server(SANSRS_SERVER) as (p1, _), server(SANSRS_SERVER) as (p2, victim), server(
        SANSRS_SERVER
    ) as (p3, _):
        targets = [f"tcp://127.0.0.1:{p}" for p in (p1, p2, p3)]
        completed = failed = sent = 0
        errors: dict[str, int] = {}
        lock = threading.Lock()
        kill_at = total // 3
        per_thread = total // threads
        with LoadBalancedClient(targets, strategy=strategy) as client:

            def work() -> None:
                nonlocal completed, failed, sent
                for _ in range(per_thread):
                    with lock:
                        sent += 1
                        if sent == kill_at:
                            os.kill(victim.pid, signal.SIGKILL)
                    try:
                        client.request_response(b"x" * 16, timeout=30)
                        with lock:
                            completed += 1
                    except (RSocketError, ConnectionClosed, TimeoutError) as exc:
                        with lock:
                            failed += 1
                            key = type(exc).__name__
                            errors[key] = errors.get(key, 0) + 1

            start = time.perf_counter()
            workers = [threading.Thread(target=work) for _ in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            seconds = time.perf_counter() - start
            stats = client.stats()
    lost = sent - completed - failed
    print(json.dumps({
        "strategy": strategy_name, "sent": sent, "completed": completed, "failed": failed,
        "lost": lost,
        "errors": errors, "seconds": round(seconds, 2), "rate": round(sent / seconds),
        "per_target": stats,
    }, indent=1))  # fmt: skip
    if lost:
        raise SystemExit(f"{lost} requests lost")


def dispatch(runs: int, n: int = 200_000) -> None:
    from sansrs.adapters.rsocket.demo import DemoHandler
    from sansrs.adapters.rsocket.demo_routes import demo_router_factory
    from sansrs.adapters.rsocket.fast import new_request

    from sansrs.rsocket.extensions import COMPOSITE_METADATA, compose

    class Setup:  # what accept_setup reads of the core's SetupReceived
        metadata_mime_type = COMPOSITE_METADATA
        data_mime_type = "application/octet-stream"
        metadata = None
        data = b""

    connection: Any = demo_router_factory()(None).accept_setup(Setup, None)
    demo = DemoHandler()
    route = compose("echo")
    data = b"x" * 16

    def plain() -> None:
        answer = demo.request_response
        for _ in range(n):
            answer(new_request(data, None, None))

    def routed() -> None:
        answer = connection.request_response
        for _ in range(n):
            answer(new_request(data, bytes(route), None))  # a fresh bytes, as received

    def empty() -> None:
        for _ in range(n):
            new_request(data, None, None)

    results: dict[str, list[float]] = {"plain": [], "routed": []}
    for _ in range(runs):
        for name, fn in (("plain", plain), ("routed", routed)):
            start = time.process_time()
            fn()
            spent = time.process_time() - start
            start = time.process_time()
            empty()
            results[name].append((spent - (time.process_time() - start)) / n * 1e6)
    for name, values in results.items():
        print(f"{name}: {statistics.median(values):.2f} µs per request-response "
              f"(runs: {', '.join(f'{v:.2f}' for v in values)})")  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        client_main(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]),
                    int(sys.argv[6]))  # fmt: skip
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--balancer", action="store_true", help="the load-balancer run instead")
    parser.add_argument("--dispatch", action="store_true", help="in-process dispatch cost")
    parser.add_argument("--requests", type=int, default=30_000, help="balancer requests")
    parser.add_argument("--threads", type=int, default=8, help="balancer client threads")
    parser.add_argument("--strategy", choices=("weighted", "round-robin"), default="weighted")
    args = parser.parse_args()
    if args.dispatch:
        dispatch(args.runs)
    elif args.balancer:
        balancer(args.requests, args.threads, args.strategy)
    else:
        routing(args.runs, args.only)


if __name__ == "__main__":
    main()

"""Ten thousand connections on one selector thread: memory, keepalive and
streaming throughput.

The server (``serve(url, DemoHandler, loop=Loop(...))``: every connection
and the listener on one selector thread, ``max_connections`` raised from
its default 1,024) runs in its own process; the client
process holds every connection on one selector ``Loop`` of its own. Two
phases, each against a fresh server:

- ``baseline``: ``--baseline`` connections (100), every one streaming;
- ``scale``: ``--connections`` (10,000), of which ``--streaming`` (1,000)
  stream and the others stay idle, their RSocket keepalive running every
  ``--keepalive`` seconds (20 s, RSocket's usual interval and sansrs's
  default: 450 KEEPALIVE frames a second each way; ``--keepalive 5`` and
  ``--keepalive 1`` are the stress cases, 1,800 and 9,000 a second, each
  costing a write and a read on both sides).

A streaming connection runs request-streams of ``--items`` items x
``--size`` B one after another (Publisher API, demand 64 refilled at half)
for ``--seconds``; the rate is the items received over that window, all
streaming connections together. Reported per phase (medians of ``--runs``):
items/s, the server's and the client's RSS with every connection open
(VmRSS, and the server's peak VmHWM), how long connecting took, and at the
end of the scale phase that every idle connection is still open and
answers a request-response. The figure of merit is scale items/s over
baseline items/s (the streaming connections keep their throughput beside
9,000 idle ones) and the RSS.

File descriptors: each side holds one socket per connection. The benchmark
raises its own soft ``RLIMIT_NOFILE`` to the hard limit (``resource
.setrlimit``) in both processes; if the hard limit is still too low it says
so and exits (raise it with ``ulimit -Hn`` as root, ``prlimit --nofile=N:N
--pid PID``, or ``nofile`` in /etc/security/limits.conf).

    .venv/bin/python benchmarks/bench_scale.py --runs 3
    .venv/bin/python benchmarks/bench_scale.py --connections 2000 --streaming 200 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PY = sys.executable
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_connections import _proc_kib, _Streams, close_all, stop_server  # noqa: E402

#: Descriptors a process needs beyond one per connection (listener, wake-up
#: socketpairs, stdio, imports).
SPARE_FDS = 64


def raise_fd_limit(needed: int) -> int:
    """Soft RLIMIT_NOFILE up to the hard limit; exits with how to raise the
    hard limit when it is below ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        sys.exit(
            f"bench_scale: {needed} file descriptors needed, the hard limit is {hard}: "
            f"raise it (as root: ulimit -Hn {needed}; or prlimit --nofile={needed}:{needed} "
            f"--pid {os.getpid()}; or nofile in /etc/security/limits.conf) and run again"
        )
    target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def _serve(connections: int) -> None:
    raise_fd_limit(connections + SPARE_FDS)
    from sansrs.adapters.drive import Loop, LoopConfig
    from sansrs.adapters.rsocket import serve
    from sansrs.adapters.rsocket.demo import DemoHandler

    # One selector thread; the default max_connections (1,024 per server,
    # docs/security.md) lifted to what the benchmark holds.
    loop = Loop(LoopConfig(max_connections=connections + 16), name="bench-scale-server").start()
    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop=loop) as server:
        print("READY", server.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


def run_phase(
    connections: int, streaming: int, keepalive: float, seconds: float, items: int, size: int
) -> dict[str, Any]:
    from sansrs.adapters.drive import Loop
    from sansrs.adapters.rsocket import connect

    proc = subprocess.Popen(
        [PY, __file__, "_serve", str(connections)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != "READY":
        raise RuntimeError(f"server did not start: {line}")
    url = line[1]
    loop = Loop(name="bench-scale").start()
    clients: list[Any] = []
    try:
        t0 = time.perf_counter()
        lifetime = max(30.0, 10 * keepalive)
        for _ in range(connections):
            clients.append(connect(url, loop=loop, connect_timeout=60,
                                   keepalive_interval=keepalive, max_lifetime=lifetime))
        connect_s = time.perf_counter() - t0
        # Every connection answers once (its SETUP accepted), then a few
        # keepalive rounds pass before the measurement.
        for c in clients:
            c.request_response(b"ping", timeout=60)
        time.sleep(2.0)  # the first keepalives go
        server_rss = _proc_kib(proc.pid, "VmRSS")
        client_rss = _proc_kib(os.getpid(), "VmRSS")
        request = json.dumps({"n": items, "size": size})
        # Streams one after another on each connection (bench_connections.py's
        # runner), until told to stop: its streams left set to none.
        done = threading.Semaphore(0)
        runners = [_Streams(c, 1 << 62, request, done, 64) for c in clients[:streaming]]
        for r in runners:
            r.start()
        time.sleep(1.0)  # every stream under way
        before = sum(r.items for r in runners)
        t0 = time.perf_counter()
        time.sleep(seconds)
        window = time.perf_counter() - t0
        counted = sum(r.items for r in runners) - before
        for r in runners:
            r.left = 0  # the stream under way finishes, no other starts
        for _ in runners:
            if not done.acquire(timeout=120):
                raise TimeoutError("a stream did not stop")
        errors = [r.error for r in runners if r.error is not None]
        if errors:
            raise RuntimeError(f"{len(errors)} streams failed: {errors[0]!r}")
        # The idle connections lived through it: each is open and answers.
        idle = clients[streaming:]
        alive = sum(1 for c in idle if not c.closed)
        answered = sum(1 for c in idle if c.request_response(b"ping", timeout=60) is not None)
        server_hwm = _proc_kib(proc.pid, "VmHWM")
        close_all(clients, 60)
    finally:
        stop_server(loop, proc, 60)
    if alive != len(idle) or answered != len(idle):
        raise RuntimeError(f"idle connections: {alive} open, {answered} answered of {len(idle)}")
    return {
        "items_per_s": counted / window,
        "connect_s": connect_s,
        "server_rss_mib": server_rss / 1024,
        "server_peak_mib": server_hwm / 1024,
        "client_rss_mib": client_rss / 1024,
        "idle_alive": alive,
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_serve":
        _serve(int(sys.argv[2]))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "_phase":
        connections, streaming, keepalive, seconds, items, size = json.loads(sys.argv[2])
        raise_fd_limit(connections + SPARE_FDS)
        print(json.dumps(run_phase(connections, streaming, keepalive, seconds, items, size)))
        return
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--streaming", type=int, default=1_000)
    parser.add_argument("--baseline", type=int, default=100,
                        help="connections of the baseline phase, every one streaming")
    parser.add_argument("--keepalive", type=float, default=20.0,
                        help="keepalive interval (s; RSocket's usual 20 s)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window (s)")
    parser.add_argument("--items", type=int, default=1000, help="items per stream")
    parser.add_argument("--size", type=int, default=16, help="bytes per item")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("baseline", "scale"), help="run one phase")
    args = parser.parse_args()
    raise_fd_limit(args.connections + SPARE_FDS)
    phases = {"baseline": (args.baseline, args.baseline),
              "scale": (args.connections, args.streaming)}
    if args.only:
        phases = {args.only: phases[args.only]}
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in phases}
    for run in range(args.runs):
        for name, (connections, streaming) in phases.items():  # alternating
            # Each phase's client in a process of its own: its RSS is its own.
            command = [PY, __file__, "_phase", json.dumps(
                [connections, streaming, args.keepalive, args.seconds, args.items, args.size])]
            out = subprocess.run(command, capture_output=True, text=True, check=False)
            if out.returncode:
                sys.exit(f"{name} phase failed:\n{out.stderr[-2000:]}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[name].append(r)
            print(f"# run {run + 1} {name}: " + ", ".join(
                f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
            ), file=sys.stderr, flush=True)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    if args.only:
        print(json.dumps({k: med(args.only, k) for k in results[args.only][0]}))
        return
    ratios = [s["items_per_s"] / b["items_per_s"]
              for b, s in zip(results["baseline"], results["scale"], strict=True)]
    print(f"\nOne selector thread per side; medians of {args.runs} runs; load average "
          f"{os.getloadavg()[0]:.1f}; streams of {args.items} x {args.size} B, keepalive "
          f"{args.keepalive:g} s, {args.seconds:g} s measured\n")
    print(f"| figure | baseline ({args.baseline} streaming) | scale ({args.connections:,} "
          f"connections, {args.streaming:,} streaming) |")
    print("| --- | ---: | ---: |")
    rows = [("items/s, streaming connections together", "items_per_s", "{:,.0f}"),
            ("connect every connection (s)", "connect_s", "{:,.1f}"),
            ("server RSS, all connected (MiB)", "server_rss_mib", "{:,.1f}"),
            ("server peak RSS (MiB)", "server_peak_mib", "{:,.1f}"),
            ("client RSS, all connected (MiB)", "client_rss_mib", "{:,.1f}")]
    for label, key, fmt in rows:
        print(f"| {label} | {fmt.format(med('baseline', key))} | {fmt.format(med('scale', key))} |")
    print(f"\nscale / baseline items/s (median of the per-run ratios): "
          f"{statistics.median(ratios):.2f}x; idle connections alive and answering at the "
          f"end: {int(med('scale', 'idle_alive')):,} of {args.connections - args.streaming:,}")


if __name__ == "__main__":
    main()

"""Many connections on one selector loop: connections held, streams/s, RSS.

The server (``serve(url, DemoHandler, loop=...)``) runs in its own process;
the client process holds every connection on one selector loop and runs
request-streams on all of them at once through the Publisher API (each
completion starts that connection's next stream, on the loop thread).

    .venv/bin/python benchmarks/bench_connections.py --connections 2000 --runs 3
    .venv/bin/python benchmarks/bench_connections.py --connections 500 \
        --server-loops selector,thread --runs 1      # against a thread per connection

For each server driver it reports, as medians over ``--runs``: connections
held (every one answered a request-response), streams/s and items/s over all
connections, the server's RSS with every connection open (VmRSS) and its
peak (VmHWM), and the client's RSS. The thread-per-connection server is the
baseline (``--server-loops selector,thread``; 2,000 connections are 2,000
threads there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PY = sys.executable


def _serve(loop: str) -> None:
    from sansrs.adapters.rsocket import serve
    from sansrs.adapters.rsocket.demo import DemoHandler

    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop=loop) as server:
        print("READY", server.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


def _proc_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class _Streams:
    """Runs ``count`` streams one after another on one connection."""

    def __init__(self, client: Any, count: int, request: str, done: threading.Semaphore,
                 window: int) -> None:
        self.client = client
        self.left = count
        self.request = request
        self.done = done
        self.window = window
        self.items = 0
        self.error: BaseException | None = None
        self.subscription: Any = None
        self.since_request = 0

    def start(self) -> None:
        if self.left == 0:
            self.done.release()
            return
        self.left -= 1
        self.client.stream_publisher(self.request).subscribe(self)

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription
        self.since_request = 0
        subscription.request(self.window)

    def on_next(self, item: Any) -> None:
        self.items += 1
        self.since_request += 1
        if self.since_request >= self.window // 2:
            self.subscription.request(self.since_request)
            self.since_request = 0

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.left = 0
        self.done.release()

    def on_complete(self) -> None:
        self.start()


def close_all(clients: list[Any], timeout: float) -> None:
    """Close every client, then wait for each to be closed."""
    for c in clients:
        c.close(timeout=0)
    for c in clients:
        c.wait_closed(timeout)


def stop_server(loop: Any, proc: subprocess.Popen[str], timeout: float) -> None:
    """Stop the clients' loop and the server process (killed if it lingers)."""
    loop.stop(timeout)
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def run_once(
    server_loop: str, connections: int, streams: int, items: int, size: int
) -> dict[str, Any]:
    from sansrs.adapters.drive import Loop
    from sansrs.adapters.rsocket import connect

    proc = subprocess.Popen(
        [PY, __file__, "_serve", server_loop],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != "READY":
        raise RuntimeError(f"server did not start: {line}")
    url = line[1]
    loop = Loop(name="bench-clients").start()
    try:
        t0 = time.perf_counter()
        clients = [connect(url, loop=loop, connect_timeout=60) for _ in range(connections)]
        held = sum(
            1 for c in clients if c.request_response(b"ping", timeout=60) is not None
        )
        connect_s = time.perf_counter() - t0
        server_rss_idle = _proc_kib(proc.pid, "VmRSS")
        request = json.dumps({"n": items, "size": size})
        done = threading.Semaphore(0)
        runners = [_Streams(c, streams, request, done, 64) for c in clients]
        t0 = time.perf_counter()
        for r in runners:
            r.start()
        for _ in runners:
            if not done.acquire(timeout=600):
                raise TimeoutError("streams did not finish")
        elapsed = time.perf_counter() - t0
        errors = [r.error for r in runners if r.error is not None]
        if errors:
            raise RuntimeError(f"{len(errors)} streams failed: {errors[0]!r}")
        total_items = sum(r.items for r in runners)
        server_rss = _proc_kib(proc.pid, "VmRSS")
        server_hwm = _proc_kib(proc.pid, "VmHWM")
        client_rss = _proc_kib(os.getpid(), "VmRSS")
        close_all(clients, 30)
    finally:
        stop_server(loop, proc, 30)
    return {
        "held": held,
        "connect_s": connect_s,
        "streams_per_s": connections * streams / elapsed,
        "items_per_s": total_items / elapsed,
        "server_rss_mib_connected": server_rss_idle / 1024,
        "server_rss_mib_after": server_rss / 1024,
        "server_peak_mib": server_hwm / 1024,
        "client_rss_mib": client_rss / 1024,
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_serve":
        _serve(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=5, help="streams per connection")
    parser.add_argument("--items", type=int, default=100, help="items per stream")
    parser.add_argument("--size", type=int, default=16, help="bytes per item")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--server-loops", default="selector",
        help="server drivers, e.g. selector,thread (thread = the thread-per-connection "
        "baseline: N connections are N runnable threads, which loads a shared machine)",
    )
    args = parser.parse_args()
    loops = [x.strip() for x in args.server_loops.split(",") if x.strip()]
    results: dict[str, list[dict[str, Any]]] = {}
    for loop in loops:
        for run in range(args.runs):
            r = run_once(loop, args.connections, args.streams, args.items, args.size)
            results.setdefault(loop, []).append(r)
            print(f"# {loop} run {run + 1}: " + ", ".join(
                f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
            ), file=sys.stderr, flush=True)

    def med(loop: str, key: str) -> float:
        return statistics.median(r[key] for r in results[loop])

    print(f"\n{args.connections} connections, {args.streams} streams each of {args.items} "
          f"items x {args.size} B; clients on one selector loop; median of {args.runs} runs\n")
    rows = [
        ("connections held", "held", "{:,.0f}"),
        ("connect + first request-response, all connections (s)", "connect_s", "{:,.2f}"),
        ("streams/s (all connections)", "streams_per_s", "{:,.0f}"),
        ("items/s (all connections)", "items_per_s", "{:,.0f}"),
        ("server RSS, all connected (MiB)", "server_rss_mib_connected", "{:,.1f}"),
        ("server RSS after the streams (MiB)", "server_rss_mib_after", "{:,.1f}"),
        ("server peak RSS (MiB)", "server_peak_mib", "{:,.1f}"),
        ("client RSS after the streams, all connected (MiB)", "client_rss_mib", "{:,.1f}"),
    ]
    header = "| figure | " + " | ".join(f"server loop={loop}" for loop in loops)
    if "selector" in results and "thread" in results:
        header += " | selector / thread"
    print(header + " |")
    print("| --- |" + " ---: |" * (len(loops) + ("selector" in results and "thread" in results)))
    for label, key, fmt in rows:
        cells = [fmt.format(med(loop, key)) for loop in loops]
        if "selector" in results and "thread" in results:
            base = med("thread", key)
            cells.append(f"{med('selector', key) / base:.2f}x" if base else "-")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

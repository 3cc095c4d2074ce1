"""CPU time per operation of the threaded RSocket adapters over TCP, each side.

Wall-clock rates (``bench_tcp.py``) swing with whatever else runs on the
machine; CPU time spent per message does not, so it is the figure to compare
before and after a change on a busy box. The server is ``python -m sansrs
serve`` (the demo responder) in its own process, its CPU read from
``/proc/PID/stat`` (Linux); the client runs in this process
(``time.process_time``, all threads). Rates that the CPU cost allows, if each
side had a core of its own, are ``1e6 / max(client, server)`` per second.

    .venv/bin/python benchmarks/bench_cpu_per_op.py --runs 3
    .venv/bin/python benchmarks/bench_cpu_per_op.py --only fnf16 --scale 0.5
    .venv/bin/python benchmarks/bench_cpu_per_op.py --impl sansrs --impl sansrs-ws

``--impl``: ``sansrs`` (TCP, the default), ``sansrs-ws`` (``ws://``),
``sansrs-selector`` (both ends on the selector loop), ``sansrs-asyncio`` (the
asyncio client: streams, ``rr_seq``, ``fnf16``, ``fnf16m``) and its reference
``raw-asyncio`` (asyncio streams against ``raw_peer.py``: the same reader,
the fire-and-forgets written a batch at a time), and ``raw``: the blocking
raw-socket client and server of ``bench_tcp.py``'s ``raw`` column
(``raw_peer.py``; the batch rows run its plain client, as there), the
baseline each side's CPU per item compares with.

The client's CPU is also split: ``calling thread`` is the thread that runs
the client (``time.thread_time``: a stream's consumer, the caller of
request-response or fire-and-forget); the rest is the driver's (the
connection's thread, the selector loop). This process starts with its
allocator settled, as every benchmark process (``raw_peer.settle_allocator``).

Prints a markdown table: median of ``--runs`` per scenario, microseconds of
CPU per message (request-stream item, request-response round trip, fire-and-
forget) on the client and on the server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_tcp import PLAIN_KIND, SCENARIOS, WS_PATH, server  # noqa: E402
from raw_peer import settle_allocator  # noqa: E402
from sansrs_client import run, run_asyncio  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


IMPLS = ("sansrs", "sansrs-ws", "sansrs-selector", "sansrs-asyncio", "raw-asyncio", "raw")


def _run_raw(port: int, kind: str, count: int, arg: int) -> int:
    """One run of the blocking raw client (``bench_tcp.py``'s ``raw``)."""
    import raw_peer

    kind = PLAIN_KIND.get(kind, kind)
    if kind == "stream":
        return raw_peer.stream(port, count, arg)
    if kind == "rr":
        return raw_peer.request_response(port, count, arg)
    return raw_peer.fire_and_forget(port, count, arg)


def _run_asyncio(impl: str, port: int, kind: str, count: int, arg: int) -> int:
    """One run of the asyncio client ``impl`` (the rows bench_tcp.py runs)."""
    if impl == "raw-asyncio":
        import raw_peer

        if kind in ("stream", "streamb"):
            return raw_peer.stream_asyncio(port, count, arg)
        if kind in ("fnf", "fnfm"):
            return raw_peer.fire_and_forget_asyncio(port, count, arg)
        if kind != "rr":
            raise ValueError("raw-asyncio runs streams, fire-and-forgets and rr_seq only")
        return raw_peer.request_response_asyncio(port, count)
    return run_asyncio(f"tcp://127.0.0.1:{port}", kind, count, arg)


def measure(
    name: str, scale: float, impl: str = "sansrs"
) -> tuple[float, float, float, float]:
    """(client µs/op, server µs/op, wall seconds, the client's calling
    thread µs/op) for one run of ``name``."""
    kind, count, arg, _ = SCENARIOS[name]
    count = max(1, int(count * scale))
    if kind in ("rr", "rrc"):
        count -= count % arg
    loop = "selector" if impl == "sansrs-selector" else "thread"
    with server(impl) as (port, proc):
        url = f"ws://127.0.0.1:{port}{WS_PATH}" if impl == "sansrs-ws" else f"tcp://127.0.0.1:{port}"
        if impl.endswith("asyncio"):
            _run_asyncio(impl, port, "rr", 200, 1)  # warm both sides
        elif impl == "raw":
            _run_raw(port, "rr", 200, 1)
        else:
            run(url, "rr", 200, 1, loop=loop)  # warm both sides (imports, first connection)
        server_before = _process_cpu(proc.pid)
        client_before = time.process_time()
        caller_before = time.thread_time()
        wall = time.perf_counter()
        if impl.endswith("asyncio"):
            done = _run_asyncio(impl, port, kind, count, arg)
        elif impl == "raw":
            done = _run_raw(port, kind, count, arg)
        else:
            done = run(url, kind, count, arg, loop=loop)
        wall = time.perf_counter() - wall
        caller = time.thread_time() - caller_before
        client = time.process_time() - client_before
        server_cpu = _process_cpu(proc.pid) - server_before
    if done != count:
        raise RuntimeError(f"{name}: {done} of {count}")
    return client / count * 1e6, server_cpu / count * 1e6, wall, caller / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--scale", type=float, default=0.5, help="multiply message counts")
    parser.add_argument("--impl", action="append", choices=IMPLS)
    args = parser.parse_args()
    settle_allocator()
    names = args.only or list(SCENARIOS)
    impls = args.impl or ["sansrs"]
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| scenario | impl | client µs/op | of which calling thread | server µs/op | "
          "msg/s the CPU allows | wall s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        results: dict[str, list[tuple[float, float, float, float]]] = {i: [] for i in impls}
        for _ in range(args.runs):  # implementations alternate run by run
            for impl in impls:
                results[impl].append(measure(name, args.scale, impl))
        for impl in impls:
            client = statistics.median(r[0] for r in results[impl])
            server_us = statistics.median(r[1] for r in results[impl])
            wall = statistics.median(r[2] for r in results[impl])
            caller = statistics.median(r[3] for r in results[impl])
            bound = 1e6 / max(client, server_us)
            print(f"| {name} | {impl} | {client:.2f} | {caller:.2f} | {server_us:.2f} | "
                  f"{bound:,.0f} | {wall:.2f} |", flush=True)


if __name__ == "__main__":
    main()

"""Threaded adapters over TCP: sansrs vs rsocket-py vs a raw-socket baseline.

Client and server run in separate processes on 127.0.0.1. Each scenario runs
``--runs`` times per implementation (default 5), the implementations taking
turns run by run (every server up at once), so that load from elsewhere hits
them alike; the median rate is reported with the ratios sansrs/rsocket-py,
sansrs/raw, ws/tcp and selector/thread, each the median of the ratios of one
round (back-to-back runs), which drifts less with the load than a ratio of
medians.

    .venv/bin/python benchmarks/bench_tcp.py                 # every scenario
    .venv/bin/python benchmarks/bench_tcp.py --only stream16 --runs 3
    .venv/bin/python benchmarks/bench_tcp.py --memory 10000000   # RSS check only
    .venv/bin/python benchmarks/bench_tcp.py --only stream16 --impl sansrs --impl sansrs-ws
    .venv/bin/python benchmarks/bench_tcp.py --latency-costs --runs 5   # CPU per round trip
    .venv/bin/python benchmarks/bench_tcp.py --stretch-costs --runs 5   # work before/after a write
    .venv/bin/python benchmarks/bench_tcp.py --syscall-costs --runs 5   # system calls alone

``sansrs-ws`` / ``rsocketpy-ws``: the same over WebSocket (``ws://``, one
frame per binary message), compared with TCP in the ``ws/tcp`` column.
``sansrs-selector``: both ends on the selector loop. ``sansrs-asyncio`` /
``raw-asyncio`` (``ASYNCIO_SCENARIOS``: ``rr_seq`` and the item rows
``stream16``, ``stream16b``, ``stream1k``, ``stream1kb``, ``fnf16``,
``fnf16m``): the asyncio client against ``sansrs serve``, and asyncio
streams against the raw server (``raw_peer.stream_asyncio``, a reader
cutting records from 256 KiB reads; ``raw_peer.fire_and_forget_asyncio``,
a writer of a batch of records per ``write`` + ``drain``).
``stream16b`` / ``stream1kb`` / ``fnf16m``: sansrs's batch APIs
(``request_stream_batches``, ``fire_and_forget_many``), and ``stream16p`` /
``stream1kp`` the stream as a Reactive Streams Publisher of batches
(``batch_publisher``, a Subscriber requesting one batch at a time), against
the same raw and rsocket-py clients as ``stream16`` / ``stream1k`` /
``fnf16`` (docs/performance.md, "Items at the application's end").

Servers: ``python -m sansrs serve`` (the demo responder), ``rsocketpy_peer.py
serve`` (the same contract on rsocket-py) and ``raw_peer.py serve``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable

# name: (kind, count, arg, rsocket-py count) -- rsocket-py is ~10-40x slower, so
# it moves fewer messages for the same wall time; rates are comparable.
SCENARIOS: dict[str, tuple[str, int, int, int]] = {
    "stream16": ("stream", 1_000_000, 16, 50_000),
    "stream1k": ("stream", 300_000, 1024, 30_000),
    "rr_seq": ("rr", 20_000, 1, 2_000),
    # sansrs: the same, through response_publisher (no application-thread
    # hop); the other two run their plain sequential client.
    "rr_seq_pub": ("rrc", 20_000, 1, 2_000),
    "rr64": ("rr", 200_000, 64, 10_000),
    "fnf16": ("fnf", 1_000_000, 16, 50_000),
    # sansrs: the batch APIs (request_stream_batches, fire_and_forget_many);
    # raw and rsocket-py run their stream16 / stream1k / fnf16 client
    # (docs/performance.md, "Items at the application's end").
    "stream16b": ("streamb", 1_000_000, 16, 50_000),
    "stream1kb": ("streamb", 300_000, 1024, 30_000),
    "fnf16m": ("fnfm", 1_000_000, 16, 50_000),
    # sansrs: the stream as a Publisher of batches (batch_publisher, a
    # Subscriber requesting a batch at a time); the others as stream16 / stream1k.
    "stream16p": ("streamp", 1_000_000, 16, 50_000),
    "stream1kp": ("streamp", 300_000, 1024, 30_000),
}
TARGETS = {"stream16": 400_000, "stream1k": 300_000, "rr_seq": 15_000, "rr_seq_pub": 15_000,
           "rr64": 100_000, "fnf16": 400_000, "stream16b": 1_000_000, "stream1kb": 800_000,
           "fnf16m": 1_000_000, "stream16p": 1_000_000, "stream1kp": 800_000}
#: What a client other than sansrs runs for a sansrs-only kind.
PLAIN_KIND = {"rrc": "rr", "streamb": "stream", "streamp": "stream", "fnfm": "fnf"}
IMPLS = ("sansrs", "rsocketpy", "raw", "sansrs-ws", "rsocketpy-ws", "sansrs-selector")
#: The asyncio client and its raw baseline (asyncio streams), on these scenarios.
ASYNCIO_IMPLS = ("sansrs-asyncio", "raw-asyncio")
ASYNCIO_SCENARIOS = ("rr_seq", "stream16", "stream16b", "stream1k", "stream1kb", "fnf16",
                     "fnf16m")
WS_PATH = "/rsocket"


#: ``sansrs serve`` with its allocator settled, as every benchmark process.
SANSRS_SERVER = str(HERE / "sansrs_server.py")


def server_command(impl: str) -> list[str]:
    if impl in ("sansrs", "sansrs-asyncio"):
        return [PY, SANSRS_SERVER, "serve", "tcp://127.0.0.1:0"]
    if impl == "sansrs-ws":
        return [PY, SANSRS_SERVER, "serve", f"ws://127.0.0.1:0{WS_PATH}"]
    if impl == "sansrs-selector":  # server and client on the selector loop (issue 6)
        return [PY, SANSRS_SERVER, "serve", "--loop", "selector", "tcp://127.0.0.1:0"]
    if impl == "rsocketpy":
        return [PY, str(HERE / "rsocketpy_peer.py"), "serve", "0"]
    if impl == "rsocketpy-ws":
        return [PY, str(HERE / "rsocketpy_peer.py"), "serve", "0", "--ws", WS_PATH]
    return [PY, str(HERE / "raw_peer.py"), "serve", "0"]


@contextmanager
def server(impl: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    with server_process(server_command(impl), impl) as started:
        yield started


@contextmanager
def server_process(command: list[str], name: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """A server in a process of its own that prints ``READY <port or URL>``:
    (its port, the process); terminated on exit."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"{name} server did not start: {line}")
        port = int(line[1].rsplit(":", 1)[-1].split("/")[0])  # PORT, or a URL with one
        yield port, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def client_command(impl: str, port: int, kind: str, count: int, arg: int) -> list[str]:
    if not impl.startswith("sansrs"):
        kind = PLAIN_KIND.get(kind, kind)
    if impl.startswith("rsocketpy"):
        ws = ["--ws", WS_PATH] if impl.endswith("-ws") else []
        return [PY, str(HERE / "rsocketpy_peer.py"), "bench", str(port), kind, str(count),
                str(arg), *ws]
    return [PY, str(Path(__file__)), "client", impl, str(port), kind, str(count), str(arg)]


def run_client(impl: str, port: int, kind: str, count: int, arg: int) -> float:
    out = subprocess.run(client_command(impl, port, kind, count, arg), capture_output=True,
                         text=True, timeout=600, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    if result["count"] != count:
        raise RuntimeError(f"{impl} {kind}: {result['count']} of {count}")
    return float(result["count"] / result["seconds"])


# -- client side (one process per run) -----------------------------------------


def client_main(impl: str, port: int, kind: str, count: int, arg: int) -> None:
    if impl == "raw-asyncio":
        sys.path.insert(0, str(HERE))
        import raw_peer

        start = time.perf_counter()
        if kind in ("stream", "streamb"):
            done = raw_peer.stream_asyncio(port, count, arg)
        elif kind in ("fnf", "fnfm"):
            done = raw_peer.fire_and_forget_asyncio(port, count, arg)
        else:
            done = raw_peer.request_response_asyncio(port, count)
    elif impl == "sansrs-asyncio":
        sys.path.insert(0, str(HERE))
        from sansrs_client import run_asyncio

        start = time.perf_counter()
        done = run_asyncio(f"tcp://127.0.0.1:{port}", kind, count, arg)
    elif impl == "raw":
        sys.path.insert(0, str(HERE))
        import raw_peer

        start = time.perf_counter()
        if kind == "stream":
            done = raw_peer.stream(port, count, arg)
        elif kind in ("rr", "rrc"):
            done = raw_peer.request_response(port, count, arg)
        else:
            done = raw_peer.fire_and_forget(port, count, arg)
    else:
        sys.path.insert(0, str(HERE))
        from sansrs_client import run

        url = f"ws://127.0.0.1:{port}{WS_PATH}" if impl == "sansrs-ws" else f"tcp://127.0.0.1:{port}"
        if impl == "sansrs-ws":
            # Imported on first use (the "ws" extra): 25-40 ms of wsproto and
            # h11 that would be timed, as TCP's imports are not (above).
            import sansrs.adapters.transport.websocket.handshake  # noqa: F401
        start = time.perf_counter()
        if impl == "sansrs-selector":
            done = run(url, kind, count, arg, loop="selector")
        else:
            done = run(url, kind, count, arg)
    seconds = time.perf_counter() - start
    print(json.dumps({"count": done, "seconds": seconds}))


def rr_cpu_client_main(impl: str, port: int, count: int) -> None:
    """One sequential request-response run measuring this process's CPU."""
    sys.path.insert(0, str(HERE))
    if impl == "raw":
        import raw_peer

        raw_peer.request_response(port, 300, 1)  # warm-up
        before, wall = os.times(), time.perf_counter()
        raw_peer.request_response(port, count, 1)
        wall, after = time.perf_counter() - wall, os.times()
        result = (count / wall, (after.user - before.user) / count * 1e6,
                  (after.system - before.system) / count * 1e6)
    elif impl.startswith("floor"):
        import floor_peer

        shape = impl.partition("-")[2] or "plain"  # floor, floor-poll, floor-reactor
        result = floor_peer.request_response(port, count, shape=shape)
    elif impl == "sansrs-no-driver":
        from sansrs_client import rr_cpu_no_driver

        result = rr_cpu_no_driver(port, count)
    else:
        from sansrs_client import rr_cpu

        loop = "selector" if impl == "sansrs-selector" else "thread"
        result = rr_cpu(f"tcp://127.0.0.1:{port}", count, loop)
    print(json.dumps(result))


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` (all threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


#: (client, server) pairs of ``--latency-costs``. ``floor``: floor_peer.py,
#: real RSocket frames and nothing else (no state, no checks, no driver):
#: against each other the least any Python RSocket pair can cost; against a
#: sansrs side, what that side costs alone. ``sansrs-no-driver``: the
#: client's engine on a blocking socket, no driver (the floor the engine
#: sets for the client).
LATENCY_PAIRS = (
    ("raw", "raw"),
    ("floor", "floor"),
    ("floor", "sansrs"),
    ("sansrs", "floor"),
    ("sansrs", "sansrs"),
    ("sansrs-selector", "sansrs-selector"),
    ("sansrs-no-driver", "sansrs"),
)


def latency_costs(runs: int, count: int) -> None:
    """Where a sequential round trip's time goes: each side's user and
    system CPU per round trip (client and server in their own processes,
    pairs alternating), and the RSocket engines alone (no socket, no driver)."""
    rows: dict[tuple[str, str], list[tuple[float, ...]]] = {pair: [] for pair in LATENCY_PAIRS}
    with ExitStack() as stack:
        servers = {impl: stack.enter_context(server(impl))
                   for impl in {srv for _, srv in LATENCY_PAIRS} - {"floor"}}
        servers["floor"] = stack.enter_context(
            server_process([PY, str(HERE / "floor_peer.py"), "serve", "0"], "floor"))
        for i in range(runs):
            k = i % len(LATENCY_PAIRS)
            for client, srv in LATENCY_PAIRS[k:] + LATENCY_PAIRS[:k]:
                port, proc = servers[srv]
                before = cpu_split(proc.pid)
                out = subprocess.run(
                    [PY, str(Path(__file__)), "rr-cpu", client, str(port), str(count)],
                    capture_output=True, text=True, timeout=600, check=True).stdout
                after = cpu_split(proc.pid)
                rate, user, system = json.loads(out.strip().splitlines()[-1])
                rows[client, srv].append((rate, user, system, (after[0] - before[0]) / count * 1e6,
                                          (after[1] - before[1]) / count * 1e6))
    print(f"latency costs: {runs} runs of {count} sequential round trips, medians; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| client | server | rt/s | vs raw | client user µs | client sys µs | server user µs "
          "| server sys µs | CPU µs per rt |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    raw_runs = rows["raw", "raw"]
    for (client, srv), runs_of in rows.items():
        med = [statistics.median(r[k] for r in runs_of) for k in range(5)]
        ratio = statistics.median(r[0] / w[0] for r, w in zip(runs_of, raw_runs, strict=True))
        print(f"| {client} | {srv} | {med[0]:,.0f} | {ratio:.2f}x | {med[1]:.1f} | {med[2]:.1f} "
              f"| {med[3]:.1f} | {med[4]:.1f} | {sum(med[1:]):.1f} |")
    sys.path.insert(0, str(HERE))
    from sansrs_client import engines_alone

    alone = [engines_alone(20_000) for _ in range(3)]
    print(f"RSocket engines alone (no socket, no driver, hot loop): client "
          f"{statistics.median(a[0] for a in alone):.1f} µs, server "
          f"{statistics.median(a[1] for a in alone):.1f} µs per round trip")


def _floor_rounds(
    cases: dict[str, tuple[str, tuple[str, ...]]], runs: int, count: int
) -> dict[str, list[float]]:
    """Round trips a second of each case, run by run in turns: a case is a
    client (``rr-cpu`` impl) against a floor server of its own started with
    these arguments (``floor_peer.py serve 0 ARGS``)."""
    rates: dict[str, list[float]] = {case: [] for case in cases}
    labels = list(cases)
    with ExitStack() as stack:
        ports = {args: stack.enter_context(server_process(
                     [PY, str(HERE / "floor_peer.py"), "serve", "0", *args], "floor"))[0]
                 for args in {args for _, args in cases.values()}}
        for i in range(runs):
            k = i % len(labels)
            for case in labels[k:] + labels[:k]:
                client, args = cases[case]
                out = subprocess.run(
                    [PY, str(Path(__file__)), "rr-cpu", client, str(ports[args]), str(count)],
                    capture_output=True, text=True, timeout=600, check=True).stdout
                rates[case].append(json.loads(out.strip().splitlines()[-1])[0])
    return rates


#: ``--stretch-costs``: microseconds of hot busy work the floor server runs
#: (before its write, after it), each against none.
STRETCH_WORK = ((0.0, 0.0), (5.0, 0.0), (0.0, 5.0), (10.0, 0.0), (0.0, 10.0), (20.0, 0.0),
                (0.0, 20.0))


def stretch_costs(runs: int, count: int) -> None:
    """What a side's work costs a sequential round trip, by where it runs:
    the floor client against floor servers that also run a busy loop of a
    few microseconds (calibrated hot) before or after writing each answer.
    Work before the write is on the critical stretch (the client waits for
    it); work after it overlaps the client's wake-up and work."""
    cases = {
        ("none" if before == after == 0
         else f"{before:g} before the write" if before else f"{after:g} after the write"):
        ("floor", ("--before", str(before), "--after", str(after)))
        for before, after in STRETCH_WORK  # (0, 0): the plain floor server
    }
    rates = _floor_rounds(cases, runs, count)
    print(f"stretch costs: {runs} runs of {count} sequential round trips (floor client and "
          f"server), medians; load average {os.getloadavg()[0]:.1f}")
    print("| server's busy work (µs, hot) | rt/s | vs none | µs per round trip vs none |")
    print("| --- | ---: | ---: | ---: |")
    base = rates["none"]
    for where, got in rates.items():
        ratio = statistics.median(r / b for r, b in zip(got, base, strict=True))
        delta = statistics.median(1e6 / r - 1e6 / b for r, b in zip(got, base, strict=True))
        print(f"| {where} | {statistics.median(got):,.0f} | {ratio:.2f}x | {delta:+.1f} |")


#: ``--syscall-costs``: (client shape, server) pairs of floor peers, by the
#: system calls each makes per round trip (floor_peer.py, ``SHAPES`` and
#: ``--epoll``): the floor with sansrs's system calls and none of its Python.
SYSCALL_CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "send + recv / recv + send (the floor)": ("floor", ()),
    "poll before recv / recv + send": ("floor-poll", ()),
    "as sansrs: + epoll_ctl x2 (reactor paused) / recv + send": ("floor-reactor", ()),
    "send + recv / epoll_wait before recv": ("floor", ("--epoll",)),
    "poll before recv / epoll_wait before recv": ("floor-poll", ("--epoll",)),
    "as sansrs / as sansrs": ("floor-reactor", ("--epoll",)),
}


def syscall_costs(runs: int, count: int) -> None:
    """What the system calls of sansrs's drivers cost a sequential round
    trip by themselves: floor peers (no protocol state, a dozen lines of
    Python a message) making the raw ping-pong's calls, or sansrs's: the
    client's poll before its read and the reactor's interest stopped and
    restored around the exchange, the server's epoll_wait before its read."""
    rates = _floor_rounds(SYSCALL_CASES, runs, count)
    print(f"syscall costs: {runs} runs of {count} sequential round trips (floor peers), "
          f"medians; load average {os.getloadavg()[0]:.1f}")
    print("| client / server system calls | rt/s | vs the floor | µs per round trip vs the floor |")
    print("| --- | ---: | ---: | ---: |")
    base = rates[next(iter(SYSCALL_CASES))]
    for case, got in rates.items():
        ratio = statistics.median(r / b for r, b in zip(got, base, strict=True))
        delta = statistics.median(1e6 / r - 1e6 / b for r, b in zip(got, base, strict=True))
        print(f"| {case} | {statistics.median(got):,.0f} | {ratio:.2f}x | {delta:+.1f} |")


def _vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def memory_check(items: int) -> None:
    """A slow consumer of ``items`` 16-byte stream items, item at a time and
    a list at a time (``request_stream_batches``); peak RSS of both sides."""
    for how in ("items", "batches"):
        with server("sansrs") as (port, proc):
            cmd = [PY, str(Path(__file__)), "slow-client", str(port), str(items), how]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=True)
            client = json.loads(out.stdout.strip().splitlines()[-1])
            server_kib = _vm_hwm_kib(proc.pid)
        print(f"memory ({how}): {client['count']} items in {client['seconds']:.1f} s; peak "
              f"RSS client {client['max_rss_kib'] / 1024:.1f} MiB, server "
              f"{server_kib / 1024:.1f} MiB", flush=True)


def slow_client_main(port: int, items: int, how: str = "items") -> None:
    sys.path.insert(0, str(HERE))
    from sansrs_client import consume_slowly

    start = time.perf_counter()
    count = consume_slowly(f"tcp://127.0.0.1:{port}", items, batches=how == "batches")
    print(json.dumps({
        "count": count,
        "seconds": time.perf_counter() - start,
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))


def paired(rates: dict[str, list[float]], a: str, b: str, digits: int = 2) -> str:
    """``a`` / ``b`` as the median of the per-round ratios: the runs of one
    round are back to back, so the ratio drifts less with the load than a
    ratio of medians."""
    if a not in rates or b not in rates:
        return "-"
    ratios = [x / y for x, y in zip(rates[a], rates[b], strict=True)]
    return f"{statistics.median(ratios):.{digits}f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--impl", action="append", choices=IMPLS + ASYNCIO_IMPLS,
                        help="implementations (the asyncio pair runs "
                             f"{', '.join(ASYNCIO_SCENARIOS)} only)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    parser.add_argument("--verbose", action="store_true", help="every run's rate, on stderr")
    parser.add_argument("--memory", type=int, metavar="ITEMS",
                        help="only run the slow-consumer RSS check with ITEMS items")
    parser.add_argument("--latency-costs", action="store_true",
                        help="only measure CPU per sequential round trip, each side "
                             "(user/system), against raw, and the engines alone")
    parser.add_argument("--stretch-costs", action="store_true",
                        help="only measure what busy work before / after a write costs a "
                             "sequential round trip (floor client and servers)")
    parser.add_argument("--syscall-costs", action="store_true",
                        help="only measure what sansrs's system calls per round trip cost "
                             "by themselves (floor peers making them)")
    args, rest = parser.parse_known_args()
    if rest[:1] in (["client"], ["rr-cpu"], ["slow-client"]):
        sys.path.insert(0, str(HERE))
        from raw_peer import settle_allocator

        settle_allocator()  # every client process alike (see raw_peer.py)
    if rest[:1] == ["client"]:
        impl, port, kind, count, arg = rest[1:6]
        client_main(impl, int(port), kind, int(count), int(arg))
        return
    if rest[:1] == ["rr-cpu"]:
        rr_cpu_client_main(rest[1], int(rest[2]), int(rest[3]))
        return
    if rest[:1] == ["slow-client"]:
        slow_client_main(int(rest[1]), int(rest[2]), *rest[3:4])
        return
    if rest:
        parser.error(f"unexpected arguments {rest}")
    if args.memory:
        memory_check(args.memory)
        return
    if args.latency_costs:
        latency_costs(args.runs, int(20_000 * args.scale))
        return
    if args.stretch_costs:
        stretch_costs(args.runs, int(20_000 * args.scale))
        return
    if args.syscall_costs:
        syscall_costs(args.runs, int(20_000 * args.scale))
        return
    impls = args.impl or list(IMPLS + ASYNCIO_IMPLS)
    names = args.only or list(SCENARIOS)
    print(f"bench_tcp: {args.runs} runs, medians; {os.cpu_count()} CPUs; Python "
          f"{sys.version.split()[0]}")
    # A markdown table: messages/s, medians of the runs.
    header = "| scenario | " + " | ".join(impls)
    header += " | sansrs/rsocket-py | sansrs/raw | ws/tcp | selector/thread | target |"
    print(header)
    print("| --- " * (len(impls) + 6) + "|")
    for name in names:
        kind, count, arg, rp_count = SCENARIOS[name]
        here = [i for i in impls if i not in ASYNCIO_IMPLS or name in ASYNCIO_SCENARIOS]
        rates: dict[str, list[float]] = {impl: [] for impl in here}
        with ExitStack() as stack:
            # Every server up at once; the runs alternate between them (the
            # order turning each round), so load on the machine hits all alike.
            ports = {impl: stack.enter_context(server(impl))[0] for impl in here}
            for i in range(args.runs):
                for impl in here[i % len(here):] + here[: i % len(here)]:
                    n = int((rp_count if impl.startswith("rsocketpy") else count) * args.scale)
                    if kind in ("rr", "rrc"):
                        n -= n % arg
                    rates[impl].append(run_client(impl, ports[impl], kind, n, arg))
        medians = {impl: statistics.median(r) for impl, r in rates.items()}
        if args.verbose:
            for impl, r in rates.items():
                print(f"  {name} {impl}: " + ", ".join(f"{x:,.0f}" for x in r), file=sys.stderr)
        ratio_rp = paired(rates, "sansrs", "rsocketpy", 1)
        ratio_raw = paired(rates, "sansrs", "raw")
        ratio_ws = paired(rates, "sansrs-ws", "sansrs")
        if "rsocketpy-ws" in rates:  # over WebSocket too
            ratio_rp += f" (ws {paired(rates, 'sansrs-ws', 'rsocketpy-ws', 1)})"
        ratio_sel = paired(rates, "sansrs-selector", "sansrs")
        if "sansrs-selector" in rates and "raw" in rates:
            ratio_raw += f" (selector {paired(rates, 'sansrs-selector', 'raw')})"
        if "sansrs-asyncio" in rates and "raw-asyncio" in rates:
            ratio_raw += f" (asyncio {paired(rates, 'sansrs-asyncio', 'raw-asyncio')})"
        cells = " | ".join(f"{medians[i]:,.0f}" if i in medians else "-" for i in impls)
        print(f"| {name} | {cells} | {ratio_rp} | {ratio_raw} | {ratio_ws} | {ratio_sel} | "
              f">= {TARGETS[name]:,} |", flush=True)


if __name__ == "__main__":
    main()

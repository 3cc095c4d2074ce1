"""Ditto history replay: events/s over a real WebSocket vs the cores alone.

Scenarios (``--events`` events of one thing, each a small Ditto event message):

- ``core``: client and server cores back to back in one thread, no sockets, no
  threads (the baseline: what the protocol work itself costs);
- ``ws_iter``: ``sansrs ditto`` server and client over ws://127.0.0.1, the
  client consuming a blocking iterator (prefetch 256), in one process (two
  driver threads);
- ``ws_iter_p16``: the same with prefetch 16 (more request round trips);
- ``rows``: what a Spark partition of the Ditto history reader does, without
  Spark: ``partition_reader(ws://...).read(0)`` turning every event into a
  row (``bench_spark.py``'s history: one event per row over 64 things), the
  server in a process of its own (as Spark's executors and the driver are);
- ``rows_raw``: the raw JSON-lines reader of the same rows
  (``bench_spark.py``'s baseline: length-prefixed JSON records, one
  ``json.loads`` each), its server in a process of its own.

Each runs ``--runs`` times (the scenarios taking turns); the medians
(wall-clock events/s, and process CPU time per event, which a loaded machine
disturbs less; for ``rows`` and ``rows_raw`` the server's CPU is added) are
printed in a markdown table with the CPU ratio to the ``core`` baseline, and
``rows`` against ``rows_raw``.

    .venv/bin/python benchmarks/bench_ditto.py --runs 5
    .venv/bin/python benchmarks/bench_ditto.py --runs 3 --events 20000
    .venv/bin/python benchmarks/bench_ditto.py --only rows rows_raw --runs 5
    .venv/bin/python benchmarks/bench_ditto.py --stages --runs 5 --events 100000
    .venv/bin/python benchmarks/bench_ditto.py --only rows rows_raw --things 4096 --events 32768
    .venv/bin/python benchmarks/bench_ditto.py --resume --runs 5 --drops 2

``--resume``: ``ws_iter`` against the same read through ``DittoSession``'s
resuming iterator without (``ws_session``) and with ``--drops`` connections
closed by the server mid-read (``ws_session_drops``: every revision checked
once and in order), and the time to resume: from the iterator seeing the
loss (after the events queued before it) to the first event over the
restored connection (backoff, a new TCP and WebSocket handshake, the
subscribe's round trip; the first backoff is at most 10 ms).

``--things``: how many things ``rows`` spreads its events over (default 64,
as ``bench_spark.py``): many small histories show what each thing's
subscription costs the reader (a round trip unless subscribed ahead).

``--stages`` prints the CPU per event of each stage of ``rows`` instead
(``stages()``: the server engine with its history source, the server's
WebSocket framing, the client's WebSocket splitting, the client engine with
its core, the rows made from the events, and the data source's Arrow batches
made from rows or, as it does, from columns) next to the raw reader's two
sides, each measured alone in one thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sansrs.adapters.ditto import InMemoryHistory, connect
from sansrs.adapters.ditto import serve as serve_ditto
from sansrs.adapters.ditto.resume import ReconnectPolicy
from sansrs.adapters.ditto.session import DittoSession

from sansrs.ditto import ClientState, DittoClient, DittoServer
from sansrs.ditto import events as ev
from sansrs.streams import from_iterable

NS = "org.eclipse.ditto"


def history(n: int) -> list[dict[str, Any]]:
    return [
        {
            "topic": f"{NS}/bench/things/twin/events/modified",
            "headers": {"correlation-id": f"c-{i}"},
            "path": "/attributes/counter",
            "value": i,
            "revision": i,
            "timestamp": "2023-01-01T00:00:00Z",
        }
        for i in range(1, n + 1)
    ]


def run_core(events: list[dict[str, Any]], prefetch: int = 256) -> int:
    """The two cores back to back: every message written and parsed once."""
    server, client = DittoServer(), DittoClient()
    client.subscribe_for_persisted_events(NS, "bench")
    received = consumed = 0
    done = False
    while not done:
        for text in client.messages_to_send():
            server.receive_message(text, now=0.0)
        for event in server.events():
            if isinstance(event, ev.SubscribeReceived):
                server.accept(event.subscription_id, from_iterable(events))
        for text in server.messages_to_send():
            client.receive_message(text)
        for event in client.events():
            if isinstance(event, ev.SubscriptionCreated):
                sid = event.subscription_id
                client.request(sid, prefetch)
            elif isinstance(event, ev.NextReceived):
                received += 1
                consumed += 1
                if consumed == prefetch // 2 and client.state_of(sid) is ClientState.ACTIVE:
                    client.request(sid, consumed)
                    consumed = 0
            elif isinstance(event, ev.SubscriptionCompleted | ev.SubscriptionFailed):
                done = True
    return received


def run_ws(events: list[dict[str, Any]], prefetch: int) -> int:
    history_server = serve_ditto("ws://127.0.0.1:0/ws/2", InMemoryHistory(events))
    with history_server as srv, connect(srv.url) as c:
        n = 0
        for _ in c.subscribe_for_persisted_events(f"{NS}:bench", prefetch=prefetch, timeout=30):
            n += 1
    return n


#: Seconds from the iterator seeing its connection lost to the first event
#: over the restored one (``ws_session_drops``), for the report.
_resume_times: list[float] = []
DROPS = [2]


def run_session(events: list[dict[str, Any]], drops: int) -> int:
    """The history through ``DittoSession`` (reconnect and resume on), with
    ``drops`` connections closed by the server, evenly spread over the read."""
    every = len(events) // (drops + 1)
    with (serve_ditto("ws://127.0.0.1:0/ws/2", InMemoryHistory(events)) as srv,
          DittoSession(srv.url, reconnect=ReconnectPolicy(initial_delay=0.01)) as session):
        lost: list[float] = []  # when the iterator saw the loss (it asks to reconnect)
        reconnect = session.reconnect

        def timed_reconnect(generation: int, cause: BaseException) -> None:
            lost.append(time.perf_counter())
            reconnect(generation, cause)

        session.reconnect = timed_reconnect  # type: ignore[method-assign]
        n = 0
        for event in session.subscribe_for_persisted_events(f"{NS}:bench", prefetch=256,
                                                            timeout=30):
            n += 1
            assert event["revision"] == n  # every revision once, in order
            if lost:
                _resume_times.append(time.perf_counter() - lost.pop())
            if drops and n % every == 0 and n < len(events):
                drops -= 1
                srv.peers[0].close()  # the server closes this connection
    return n


HERE = Path(__file__).resolve().parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextmanager
def _child_server(kind: str, total: int) -> Iterator[tuple[str, int]]:
    """``serve ditto|raw TOTAL THINGS`` in a child process: (its address, its pid)."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__)), "serve", kind, str(total),
                             str(THINGS[0])], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"{kind} server did not start: {line}")
        yield line[1], proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


#: Things the ``rows`` history spreads over (``--things``).
THINGS = [64]


def serve(kind: str, total: int, things: int) -> None:
    """The child process: bench_spark.py's Ditto history, or its raw server."""
    sys.path.insert(0, str(HERE))
    import bench_spark

    if kind == "ditto":
        server = serve_ditto("ws://127.0.0.1:0/ws/2", bench_spark.DittoRows(total, things))
        print(f"READY {server.url}", flush=True)
    else:
        raw = bench_spark.RawServer(total, 1)
        threading.Thread(target=raw.serve_forever, daemon=True).start()
        print(f"READY {raw.server_address[0]}:{raw.server_address[1]}", flush=True)
    threading.Event().wait()


#: The server's CPU seconds of the last ``rows`` / ``rows_raw`` run.
_last_server_cpu: list[float] = []


def run_rows(total: int, raw: bool) -> int:
    sys.path.insert(0, str(HERE))
    import bench_spark
    from sansrs.adapters.spark import partition_reader

    with _child_server("raw" if raw else "ditto", total) as (address, pid):
        before = _process_cpu(pid)
        if raw:
            host, port = address.rsplit(":", 1)
            rows = bench_spark.raw_reader((host, int(port)))(0, iter(()))
        else:
            rows = partition_reader(address, route=bench_spark.DittoRows.NS, partitions=1).read(0)
        n = sum(1 for _ in rows)
        _last_server_cpu.append(_process_cpu(pid) - before)
    return n


def stages(total: int, prefetch: int = 256) -> dict[str, float]:
    """CPU µs per event of each stage of ``rows``, in one thread, no sockets
    (the engines back to back, their records framed and split by the two
    WebSocket transports, over a stand-in socket that keeps what is sent),
    and of the raw reader's two sides over the same rows."""
    import json
    import struct

    sys.path.insert(0, str(HERE))
    import bench_spark
    from bench_websocket import _Socket
    from pyarrow import RecordBatch, int64, schema
    from sansrs.adapters.ditto.client import client_config
    from sansrs.adapters.ditto.engine import (
        DittoClientEngine,
        DittoServerEngine,
        SubscriptionHandle,
        history_request,
    )
    from sansrs.adapters.drive.queues import CreditQueue
    from sansrs.adapters.spark.ditto import event_columns, event_row
    from sansrs.adapters.transport.websocket import WebSocketOptions
    from sansrs.adapters.transport.websocket.transport import WebSocketTransport
    from wsproto import ConnectionType, WSConnection
    from wsproto.connection import Connection

    clock = time.thread_time
    spent = dict.fromkeys(
        ("server", "server ws", "client ws", "client", "rows", "arrow rows", "arrow columns"), 0.0
    )
    # bench_spark.py's data source: three columns, no value text
    fields = ["id", "device", "revision"]
    arrow_schema = schema([(name, int64()) for name in fields])
    source = bench_spark.DittoRows(total)
    n = 0

    def transport(client: bool, keep: bool = False) -> WebSocketTransport:
        """One end past the upgrade with the Ditto connections' options
        (text_lines: text runs reach the engine as lines)."""
        role = ConnectionType.CLIENT if client else ConnectionType.SERVER
        ws = WSConnection(role)
        ws.connection = Connection(role)
        return WebSocketTransport(_Socket(keep), ws, scheme="ws", path="/",  # type: ignore[arg-type]
                                  options=WebSocketOptions(text_lines=True), is_open=True)

    for k in range(source.things):
        server, client = DittoServerEngine(source), DittoClientEngine(client_config(None))
        sending, receiving = transport(False, keep=True), transport(True)
        sent: list[bytes] = sending._stream.sent  # type: ignore[attr-defined]
        queue: CreditQueue[Any] = CreditQueue(granted=prefetch)
        handle = SubscriptionHandle(history_request(f"{source.NS}:t-{k}"), queue, prefetch)
        client.subscribe(handle)
        data = client.data_to_send()
        while True:
            t = clock()
            server.receive_data(data, 0.0)
            server.pump()
            out = server.data_to_send()
            spent["server"] += clock() - t
            t = clock()
            sending.send(out)
            frames = b"".join(sent)
            sent.clear()
            spent["server ws"] += clock() - t
            t = clock()
            receiving._stream.inbox = frames  # type: ignore[attr-defined]
            records = receiving.recv()
            spent["client ws"] += clock() - t
            t = clock()
            client.receive_data(records, 0.0)
            data = client.data_to_send()
            spent["client"] += clock() - t
            got = len(queue)
            t = clock()
            events = queue.get_batch(0, got) if got else []
            list(map(event_row, events))  # what the partition function's reader does
            spent["rows"] += clock() - t
            if events:  # the data source: Arrow batches from rows, or from columns
                t = clock()
                rows = [event_row(e, value_text=False) for e in events]
                RecordBatch.from_pylist(rows, schema=arrow_schema)
                spent["arrow rows"] += clock() - t
                t = clock()
                RecordBatch.from_pydict(event_columns(events, fields), schema=arrow_schema)
                spent["arrow columns"] += clock() - t
            n += got
            if queue.done:
                break
            if got:
                queue.grant(got)
                t = clock()
                client.request_more(handle, got)
                data = client.data_to_send()
                spent["client"] += clock() - t
    assert n == total, n
    encode = json.JSONEncoder(separators=(",", ":")).encode
    pack = struct.Struct(">I").pack
    t = clock()
    records = [pack(len(b)) + b for b in (encode(bench_spark.make_row(i)).encode()
                                          for i in range(total))]
    spent["raw server"] = clock() - t
    t = clock()
    for record in records:
        json.loads(record[4:])
    spent["raw client"] = clock() - t
    return {name: s / total * 1e6 for name, s in spent.items()}


SCENARIOS: dict[str, Callable[[list[dict[str, Any]]], int]] = {
    "core": run_core,
    "ws_iter": lambda events: run_ws(events, 256),
    "ws_iter_p16": lambda events: run_ws(events, 16),
    "rows": lambda events: run_rows(len(events), raw=False),
    "rows_raw": lambda events: run_rows(len(events), raw=True),
    "ws_session": lambda events: run_session(events, 0),
    "ws_session_drops": lambda events: run_session(events, DROPS[0]),
}
#: Scenarios run only when asked for (``--resume`` or ``--only``).
_RESUME = ("ws_iter", "ws_session", "ws_session_drops")
#: Scenarios whose server runs in a child process (its CPU is added).
_CHILD_SERVER = {"rows", "rows_raw"}


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--stages", action="store_true",
                        help="CPU per event of each stage of rows (see stages())")
    parser.add_argument("--things", type=int, default=64,
                        help="things the rows scenario's history spreads over")
    parser.add_argument("--resume", action="store_true",
                        help="ws_iter against DittoSession's resuming iterator, without and "
                        "with --drops dropped connections; the time to resume")
    parser.add_argument("--drops", type=int, default=2,
                        help="connections the server closes in ws_session_drops (2)")
    args = parser.parse_args()
    THINGS[0] = args.things
    DROPS[0] = args.drops
    if args.stages:
        runs = [stages(args.events) for _ in range(args.runs)]
        print(f"\nStages of rows, {args.events} events, median of {args.runs} runs, "
              f"load average {os.getloadavg()[0]:.1f} (CPU µs per event, one thread)\n")
        print("| stage | CPU µs/event |")
        print("| --- | ---: |")
        for name in runs[0]:
            print(f"| {name} | {statistics.median(r[name] for r in runs):.2f} |")
        return
    events = history(args.events)
    default = [n for n in SCENARIOS if n not in _CHILD_SERVER and n not in _RESUME[1:]]
    names = args.only or (list(_RESUME) if args.resume else default)
    walls: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    server_cpus: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.runs):  # the scenarios take turns, so load hits them alike
        for name in names:
            started, cpu_started = time.perf_counter(), time.process_time()
            got = SCENARIOS[name](events)
            cpu_used = time.process_time() - cpu_started
            if name in _CHILD_SERVER:
                server_used = _last_server_cpu.pop()
                server_cpus[name].append(server_used / args.events * 1e6)
                cpu_used += server_used
            cpus[name].append(cpu_used / args.events * 1e6)
            walls[name].append(args.events / (time.perf_counter() - started))
            assert got == args.events, (name, got)
    server_cpu = {n: statistics.median(v) for n, v in server_cpus.items() if v}
    wall = {n: statistics.median(v) for n, v in walls.items()}
    cpu = {n: statistics.median(v) for n, v in cpus.items()}
    base = cpu.get("core")
    print(f"\nDitto history replay, {args.events} events ({args.things} things in rows), "
          f"median of {args.runs} runs, load average {os.getloadavg()[0]:.1f}")
    print("(CPU: process time of all threads, client and server together)\n")
    print("| scenario | events/s (wall) | CPU us/event | CPU vs core |")
    print("| --- | ---: | ---: | ---: |")
    for name in wall:
        ratio = f"{cpu[name] / base:.2f}x" if base else "-"
        print(f"| {name} | {wall[name]:,.0f} | {cpu[name]:.1f} | {ratio} |")
    for name, used in server_cpu.items():
        print(f"{name}: server process {used:.1f}, client process {cpu[name] - used:.1f} "
              "CPU us/event (medians)")
    if _resume_times:
        median_ms = statistics.median(_resume_times) * 1e3
        print(f"\nws_session_drops: time from the loss (seen by the iterator) to the first "
              f"event over the restored connection: median {median_ms:.1f} ms, "
              f"max {max(_resume_times) * 1e3:.1f} ms ({len(_resume_times)} resumes)")
    if "rows" in walls and "rows_raw" in walls:
        ratios = [a / b for a, b in zip(walls["rows"], walls["rows_raw"], strict=True)]
        print(f"\nrows / rows_raw (median of the per-round ratios): "
              f"{statistics.median(ratios):.2f}x events/s, "
              f"{cpu['rows_raw'] / cpu['rows']:.2f}x CPU per event")


if __name__ == "__main__":
    main()

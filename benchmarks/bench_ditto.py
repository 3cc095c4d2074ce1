"""Ditto history replay: events/s over a real WebSocket vs the cores alone.

Scenarios (``--events`` events of one thing, each a small Ditto event message):

- ``core``: client and server cores back to back in one thread, no sockets, no
  threads (the baseline: what the protocol work itself costs);
- ``ws_iter``: ``sansrs ditto`` server and client over ws://127.0.0.1, the
  client consuming a blocking iterator (prefetch 256), in one process (two
  driver threads);
- ``ws_iter_p16``: the same with prefetch 16 (more request round trips).

Each runs ``--runs`` times; the medians (wall-clock events/s, and process CPU
time per event, which a loaded machine disturbs less) are printed in a markdown
table with the CPU ratio to the ``core`` baseline.

    .venv/bin/python benchmarks/bench_ditto.py --runs 5
    .venv/bin/python benchmarks/bench_ditto.py --runs 3 --events 20000
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from sansrs.adapters.ditto import InMemoryHistory, connect, serve

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
    with serve("ws://127.0.0.1:0/ws/2", InMemoryHistory(events)) as srv, connect(srv.url) as c:
        n = 0
        for _ in c.subscribe_for_persisted_events(f"{NS}:bench", prefetch=prefetch, timeout=30):
            n += 1
    return n


SCENARIOS: dict[str, Callable[[list[dict[str, Any]]], int]] = {
    "core": run_core,
    "ws_iter": lambda events: run_ws(events, 256),
    "ws_iter_p16": lambda events: run_ws(events, 16),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    events = history(args.events)
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for name in args.only or list(SCENARIOS):
        walls, cpus = [], []
        for _ in range(args.runs):
            started, cpu_started = time.perf_counter(), time.process_time()
            got = SCENARIOS[name](events)
            cpus.append((time.process_time() - cpu_started) / args.events * 1e6)
            walls.append(args.events / (time.perf_counter() - started))
            assert got == args.events, (name, got)
        wall[name] = statistics.median(walls)
        cpu[name] = statistics.median(cpus)
    base = cpu.get("core")
    print(f"\nDitto history replay, {args.events} events, median of {args.runs} runs")
    print("(CPU: process time of all threads, client and server together)\n")
    print("| scenario | events/s (wall) | CPU us/event | CPU vs core |")
    print("| --- | ---: | ---: | ---: |")
    for name in wall:
        ratio = f"{cpu[name] / base:.2f}x" if base else "-"
        print(f"| {name} | {wall[name]:,.0f} | {cpu[name]:.1f} | {ratio} |")


if __name__ == "__main__":
    main()

"""What interceptors cost, in bytecode: stream16 (a stream of 16-byte items)
and rr64 (request-response, 64 in flight) with no interceptor, a no-op
interceptor, the Prometheus metrics and the OpenTelemetry tracing (the
SDK's TracerProvider, every span sampled, each ended span handed by a
SimpleSpanProcessor to an exporter that drops it: what a span costs up to
the exporter), client and server in this process (the thread driver), every
thread traced (``bench_opcodes.Tracer``).

Bytecode counts do not depend on the machine's load, so they compare two
versions of the code on a busy machine where wall-clock rates would not
(docs/performance.md, "Interceptors: cost when none is installed"). They
do move a little with how items batch across reads (a timing matter): each
figure is the median of ``--runs`` runs.

    .venv/bin/python benchmarks/bench_interceptors.py                  # all modes
    .venv/bin/python benchmarks/bench_interceptors.py --mode none      # e.g. on an older checkout
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import statistics
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_opcodes import Tracer  # noqa: E402

MODES = ("none", "noop", "metrics", "tracing")
SCENARIOS = {"stream16": 20_000, "rr64": 5_000}


class SideTracer(Tracer):
    """Counts per side: a thread whose name has "server" in it is the
    server's; every other thread (the application's, the client's
    connection thread, workers) the client's."""

    def __init__(self) -> None:
        super().__init__()
        self.sides: collections.Counter[str] = collections.Counter()
        self._side: dict[int, str] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.on:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            ident = threading.get_ident()
            side = self._side.get(ident)
            if side is None:
                name = threading.current_thread().name
                side = self._side[ident] = "server" if "server" in name else "client"
            self.sides[side] += 1
        return self


class Noop:
    def on_start(self, info: Any) -> None:
        pass

    def on_end(self, info: Any, outcome: Any) -> None:
        pass

    def on_open(self, info: Any) -> None:
        pass

    def on_close(self, info: Any, error: Any) -> None:
        pass


def _interceptors(mode: str) -> dict[str, Any]:
    if mode == "none":
        return {}
    from sansrs.adapters.rsocket.interceptors import Interceptors

    if mode == "noop":
        noop = Noop()
        return {"interceptors": Interceptors(connection=[noop], requests=[noop])}
    if mode == "tracing":
        return {"interceptors": _tracing().interceptors()}
    import prometheus_client
    from sansrs.adapters.rsocket.metrics import RSocketMetrics

    metrics = RSocketMetrics(prometheus_client.CollectorRegistry())
    return {"interceptors": metrics.interceptors()}


def _tracing() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from sansrs.adapters.rsocket.tracing import RSocketTracing

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    return RSocketTracing(provider)


def _run(client: Any, scenario: str, count: int) -> None:
    if scenario == "stream16":
        request = json.dumps({"n": count, "size": 16})
        with client.request_stream(request, prefetch=8192, timeout=120) as items:
            got = sum(1 for _ in items)
    else:
        answers = client.request_response_many(
            itertools.repeat(b"x" * 16, count), in_flight=64, timeout=120
        )
        got = sum(1 for _ in answers)
    assert got == count, (scenario, got)


def measure(scenario: str, mode: str, count: int) -> tuple[float, float]:
    """Bytecode per item (stream16) or per request (rr64): (client, server)."""
    from sansrs.adapters.rsocket import connect, serve
    from sansrs.adapters.rsocket.demo import DemoHandler

    tracer = SideTracer()
    tracer.install()  # before the connection threads start, so they are traced
    try:
        extra = _interceptors(mode)
        with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, **extra) as server, connect(
            server.url, **extra
        ) as client:
            _run(client, scenario, count // 10)  # warm-up, not counted
            tracer.on = True
            _run(client, scenario, count)
            tracer.on = False
    finally:
        tracer.remove()
    return tracer.sides["client"] / count, tracer.sides["server"] / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", action="append", choices=MODES)
    parser.add_argument("--only", action="append", choices=list(SCENARIOS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the counts")
    args = parser.parse_args()
    print("| scenario | interceptors | client bytecode / item | server bytecode / item |")
    print("| --- | --- | ---: | ---: |")
    for scenario in args.only or list(SCENARIOS):
        count = int(SCENARIOS[scenario] * args.scale)
        for mode in args.mode or list(MODES):
            runs = [measure(scenario, mode, count) for _ in range(args.runs)]
            client = statistics.median(r[0] for r in runs)
            server = statistics.median(r[1] for r in runs)
            print(f"| {scenario} | {mode} | {client:,.1f} | {server:,.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""examples/metrics.py runs, and its figures are right: every request of
its workload counted once on each side with its outcome, the latency
histogram and the bytes filled, the connection opened and closed cleanly;
the scrape endpoint serves the same figures. Also RSocketMetrics' bound on
distinct routes."""

from __future__ import annotations

import importlib.util
import sys
import urllib.request
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
from sansrs.adapters.rsocket.interceptors import COMPLETE, RequestInfo
from sansrs.adapters.rsocket.metrics import OTHER_ROUTE, RSocketMetrics

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "metrics.py"
MODELS = {"greet": "request_response", "fail": "request_response", "busy": "request_response",
          "count": "request_stream", "echo": "request_channel", "log": "fire_and_forget"}
ERRORS = {("fail", "requester"): "APPLICATION_ERROR", ("fail", "responder"): "ValueError",
          ("busy", "requester"): "REJECTED", ("busy", "responder"): "REJECTED"}


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("sansrs_metrics_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run() -> tuple[Any, prometheus_client.CollectorRegistry]:
    example = _example()
    return example, example.main([])


def test_metrics_example_counts_every_request_once_per_side_with_its_outcome(
    run: tuple[Any, prometheus_client.CollectorRegistry],
) -> None:
    example, registry = run
    value = registry.get_sample_value
    started: dict[str, int] = {}
    for (route, outcome), n in example.WORKLOAD.items():
        started[route] = started.get(route, 0) + n
        for side in ("requester", "responder"):
            labels = {"side": side, "model": MODELS[route], "route": route}
            ended = {**labels, "outcome": outcome, "error": ERRORS.get((route, side), "")}
            assert value("rsocket_requests_ended_total", ended) == n, ended
            assert value("rsocket_requests_in_flight", labels) == 0
    for route, n in started.items():
        for side in ("requester", "responder"):
            labels = {"side": side, "model": MODELS[route], "route": route}
            assert value("rsocket_requests_started_total", labels) == n, labels
    # Nothing else ended: the ends add up to the starts.
    total_ended = sum(
        s.value for m in registry.collect() if m.name == "rsocket_requests_ended"
        for s in m.samples if s.name.endswith("_total")
    )
    assert total_ended == 2 * sum(example.WORKLOAD.values())


def test_metrics_example_latency_and_bytes_are_filled(
    run: tuple[Any, prometheus_client.CollectorRegistry],
) -> None:
    example, registry = run
    value = registry.get_sample_value
    greet = {"side": "requester", "model": "request_response", "route": "greet"}
    n = example.WORKLOAD["greet", "complete"]
    assert value("rsocket_request_duration_seconds_count", {**greet, "outcome": "complete"}) == n
    assert value("rsocket_request_duration_seconds_sum", {**greet, "outcome": "complete"}) > 0
    # Each answer is "hello <i>": the requester's in = the responder's out.
    answered = sum(len(b"hello %d" % i) for i in range(n))
    assert value("rsocket_request_bytes_total", {**greet, "direction": "in"}) == answered
    assert value("rsocket_request_bytes_total",
                 {**greet, "side": "responder", "direction": "out"}) == answered
    count = {"side": "requester", "model": "request_stream", "route": "count",
             "direction": "in"}
    complete_items = example.WORKLOAD["count", "complete"] * example.STREAM_ITEMS
    # The cancelled stream: the two items read, and at most its window (2)
    # more that were on their way when the CANCEL left.
    got = value("rsocket_request_payloads_total", count)
    assert got is not None and complete_items + 2 <= got <= complete_items + 4


def test_metrics_example_connection_opened_and_closed_cleanly(
    run: tuple[Any, prometheus_client.CollectorRegistry],
) -> None:
    _, registry = run
    for side in ("client", "server"):
        assert registry.get_sample_value("rsocket_connections_opened_total", {"side": side}) == 1
        closed = {"side": side, "outcome": "clean"}
        assert registry.get_sample_value("rsocket_connections_closed_total", closed) == 1
        assert registry.get_sample_value("rsocket_connections_open", {"side": side}) == 0


def test_metrics_example_scrape_endpoint_serves_the_figures(
    run: tuple[Any, prometheus_client.CollectorRegistry],
) -> None:
    example, registry = run
    httpd, _ = example.scrape_endpoint(registry, 0)
    try:
        url = f"http://127.0.0.1:{httpd.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    finally:
        httpd.shutdown()
        httpd.server_close()
    line = ('rsocket_requests_started_total{model="request_response",route="greet",'
            'side="requester"} 10.0')
    assert line in text


def test_metrics_routes_beyond_max_routes_are_counted_as_other() -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics = RSocketMetrics(registry, max_routes=2)
    for route in ("a", "b", "c", "d", "a"):
        info = RequestInfo("request_response", "responder", 1, route, 0.0)
        metrics.on_start(info)
        info.ended = 1.0
        metrics.on_end(info, COMPLETE)

    def started(route: str) -> float | None:
        labels = {"side": "responder", "model": "request_response", "route": route}
        return registry.get_sample_value("rsocket_requests_started_total", labels)

    assert (started("a"), started("b"), started(OTHER_ROUTE), started("c")) == (2, 1, 2, None)

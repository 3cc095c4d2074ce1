"""Prometheus metrics for RSocket connections and requests: an interceptor
(:mod:`.interceptors`) that counts into ``prometheus_client`` metrics
(the ``metrics`` extra: ``pip install 'sansrs[metrics]'``; docs/interceptors.md).

    metrics = RSocketMetrics()                 # the default registry
    server = serve(url, handler, interceptors=metrics.interceptors())
    prometheus_client.start_http_server(9464, addr="127.0.0.1")   # the scrape endpoint

Labels: ``side`` (requester / responder for requests, client / server for
connections), ``model`` (request_response, request_stream, request_channel,
fire_and_forget, metadata_push), ``route`` (composite routing metadata's
route, ``""`` without one; at most ``max_routes`` distinct values, the rest
counted as ``"other"``: a route with variables in it would otherwise make a
series per value), ``outcome`` (complete, error, cancel, reject), ``error``
(the error's type: an RSocket error code's name or an exception's class
name, ``""`` otherwise).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

try:
    import prometheus_client
except ImportError as exc:  # the optional extra
    raise ImportError(
        "sansrs.adapters.rsocket.metrics needs prometheus_client: pip install 'sansrs[metrics]'"
    ) from exc

from .interceptors import ConnectionInfo, Interceptors, Outcome, RequestInfo

__all__ = ["DURATION_BUCKETS", "OTHER_ROUTE", "RSocketMetrics"]

#: Request latency buckets (seconds): 100 us to 60 s.
DURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)
#: The route label of routes beyond ``max_routes``.
OTHER_ROUTE = "other"
_KEY = "sansrs.metrics"  # RequestInfo.context: this request's label values

_REQUEST = ("side", "model", "route")


class RSocketMetrics:
    """Request and connection metrics in ``registry`` (default: the
    process's ``prometheus_client.REGISTRY``), named ``<namespace>_...``.
    One instance serves any number of connections, on any threads; make one
    per registry (metric names are unique in a registry).

    ===========================================  ============================================
    ``rsocket_requests_started_total``           side, model, route
    ``rsocket_requests_ended_total``             side, model, route, outcome, error
    ``rsocket_requests_in_flight``               side, model, route (a gauge)
    ``rsocket_request_duration_seconds``         side, model, route, outcome (a histogram)
    ``rsocket_request_bytes_total``              side, model, route, direction (in / out)
    ``rsocket_request_payloads_total``           side, model, route, direction
    ``rsocket_connections_opened_total``         side
    ``rsocket_connections_closed_total``         side, outcome (clean / error)
    ``rsocket_connections_open``                 side (a gauge)
    ===========================================  ============================================

    Bytes count payload data and metadata (not frame headers); a request
    counts its own payload as ``out`` on the requester, ``in`` on the
    responder.
    """

    def __init__(
        self,
        registry: prometheus_client.CollectorRegistry | None = None,
        *,
        namespace: str = "rsocket",
        buckets: Sequence[float] = DURATION_BUCKETS,
        max_routes: int = 100,
    ) -> None:
        if max_routes < 0:
            raise ValueError(f"max_routes must be >= 0, not {max_routes}")
        reg = prometheus_client.REGISTRY if registry is None else registry
        self.registry = reg
        self.max_routes = max_routes
        self._routes: set[str] = set()
        self._lock = threading.Lock()
        p = prometheus_client

        def metric(kind: Any, name: str, doc: str, labels: Sequence[str], **more: Any) -> Any:
            return kind(name, doc, tuple(labels), namespace=namespace, registry=reg, **more)

        by_outcome = (*_REQUEST, "outcome")
        by_direction = (*_REQUEST, "direction")
        self.started = metric(p.Counter, "requests_started", "Requests started", _REQUEST)
        self.ended = metric(
            p.Counter, "requests_ended", "Requests ended, by outcome", (*by_outcome, "error")
        )
        self.in_flight = metric(p.Gauge, "requests_in_flight", "Requests running", _REQUEST)
        self.duration = metric(
            p.Histogram,
            "request_duration_seconds",
            "Request duration, start to end (the last item, an error or a cancel)",
            by_outcome,
            buckets=tuple(buckets),
        )
        self.bytes = metric(
            p.Counter, "request_bytes", "Payload bytes (data + metadata) of requests", by_direction
        )
        self.payloads = metric(p.Counter, "request_payloads", "Payloads of requests", by_direction)
        self.opened = metric(p.Counter, "connections_opened", "Connections opened", ("side",))
        self.closed = metric(
            p.Counter,
            "connections_closed",
            "Connections closed: clean (CONNECTION_CLOSE, or closed by the application) or error",
            ("side", "outcome"),
        )
        self.open = metric(p.Gauge, "connections_open", "Connections open", ("side",))

    def interceptors(self, *, clock: Callable[[], float] | None = None) -> Interceptors:
        """What ``connect`` / ``serve`` take: ``interceptors=metrics.interceptors()``."""
        if clock is None:
            return Interceptors(connection=[self], requests=[self])
        return Interceptors(connection=[self], requests=[self], clock=clock)

    def _route(self, route: str | None) -> str:
        if route is None:
            return ""
        if route in self._routes:
            return route
        with self._lock:
            if len(self._routes) >= self.max_routes:
                return OTHER_ROUTE
            self._routes.add(route)
        return route

    # -- RequestInterceptor --------------------------------------------------------
    def on_start(self, info: RequestInfo) -> None:
        labels = (info.side, info.model, self._route(info.route))
        info.context[_KEY] = labels
        self.started.labels(*labels).inc()
        self.in_flight.labels(*labels).inc()

    def on_end(self, info: RequestInfo, outcome: Outcome) -> None:
        labels = info.context.get(_KEY)
        if labels is None:  # started before this interceptor was there
            return
        self.in_flight.labels(*labels).dec()
        self.ended.labels(*labels, outcome.kind, outcome.error or "").inc()
        duration = info.duration
        if duration is not None:
            self.duration.labels(*labels, outcome.kind).observe(duration)
        self.bytes.labels(*labels, "in").inc(info.bytes_in)
        self.bytes.labels(*labels, "out").inc(info.bytes_out)
        self.payloads.labels(*labels, "in").inc(info.items_in)
        self.payloads.labels(*labels, "out").inc(info.items_out)

    # -- ConnectionInterceptor ---------------------------------------------------
    def on_open(self, info: ConnectionInfo) -> None:
        self.opened.labels(info.side).inc()
        self.open.labels(info.side).inc()

    def on_close(self, info: ConnectionInfo, error: BaseException | None) -> None:
        self.closed.labels(info.side, "clean" if error is None else "error").inc()
        self.open.labels(info.side).dec()

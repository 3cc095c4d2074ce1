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
        self._by_request: dict[tuple[str, str, str], _Series] = {}
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

    def _series(self, labels: tuple[str, str, str]) -> _Series:
        """The children of one (side, model, route), made once: a child's
        ``inc`` is cheap, ``labels()`` is not (validation, a lock)."""
        series = self._by_request.get(labels)
        if series is None:
            with self._lock:
                series = self._by_request.get(labels)
                if series is None:
                    series = self._by_request[labels] = _Series(self, labels)
        return series

    # -- RequestInterceptor --------------------------------------------------------
    def on_start(self, info: RequestInfo) -> None:
        series = self._series((info.side, info.model, self._route(info.route)))
        info.context[_KEY] = series
        series.started.inc()
        series.in_flight.inc()

    def on_end(self, info: RequestInfo, outcome: Outcome) -> None:
        series = info.context.get(_KEY)
        if series is None:  # started before this interceptor was there
            return
        series.in_flight.dec()
        ended, duration = series.ended(outcome)
        ended.inc()
        if info.duration is not None:
            duration.observe(info.duration)
        series.bytes_in.inc(info.bytes_in)
        series.bytes_out.inc(info.bytes_out)
        series.payloads_in.inc(info.items_in)
        series.payloads_out.inc(info.items_out)

    # -- ConnectionInterceptor ---------------------------------------------------
    def on_open(self, info: ConnectionInfo) -> None:
        self.opened.labels(info.side).inc()
        self.open.labels(info.side).inc()

    def on_close(self, info: ConnectionInfo, error: BaseException | None) -> None:
        self.closed.labels(info.side, "clean" if error is None else "error").inc()
        self.open.labels(info.side).dec()


class _Series:
    """The metrics' children for one (side, model, route)."""

    __slots__ = (
        "_by_outcome", "_labels", "_metrics", "bytes_in", "bytes_out", "in_flight",
        "payloads_in", "payloads_out", "started",
    )

    def __init__(self, metrics: RSocketMetrics, labels: tuple[str, str, str]) -> None:
        self._metrics = metrics
        self._labels = labels
        self.started = metrics.started.labels(*labels)
        self.in_flight = metrics.in_flight.labels(*labels)
        self.bytes_in = metrics.bytes.labels(*labels, "in")
        self.bytes_out = metrics.bytes.labels(*labels, "out")
        self.payloads_in = metrics.payloads.labels(*labels, "in")
        self.payloads_out = metrics.payloads.labels(*labels, "out")
        self._by_outcome: dict[tuple[str, str], tuple[Any, Any]] = {}

    def ended(self, outcome: Outcome) -> tuple[Any, Any]:
        """The ended counter and the duration histogram of ``outcome``."""
        key = (outcome.kind, outcome.error or "")
        found = self._by_outcome.get(key)
        if found is None:  # (a race makes the same children twice: harmless)
            labels, m = self._labels, self._metrics
            found = self._by_outcome[key] = (
                m.ended.labels(*labels, *key), m.duration.labels(*labels, outcome.kind)
            )
        return found

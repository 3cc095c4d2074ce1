"""RSocket metrics with Prometheus: a routed server and a client, both with
the metrics interceptor (sansrs.adapters.rsocket.metrics, the ``metrics``
extra), make a known set of requests, then the figures are printed in
Prometheus' text format, or served for scraping. Run:

    .venv/bin/python examples/metrics.py               # print the metrics
    .venv/bin/python examples/metrics.py --serve 9464  # and serve them on
        http://127.0.0.1:9464/metrics until Ctrl-C (--serve-for 30: 30 s)

The requests (``WORKLOAD``): request-responses on ``greet`` (complete),
``fail`` (the handler raises: error) and ``busy`` (the handler rejects:
reject), streams on ``count`` (complete, and one cancelled after two items),
channels on ``echo``, fire-and-forgets on ``log``. Each is counted on both
sides: ``side="requester"`` (the client) and ``side="responder"`` (the
server). tests/adapters/rsocket/test_metrics_example.py checks the figures.
The server logs the ``fail`` handler's exception with its traceback (as it
logs any handler that raises): that is expected.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import prometheus_client
from sansrs.adapters.rsocket import (
    Payload,
    RoutedRequest,
    Router,
    RSocketError,
    connect,
    serve,
)
from sansrs.adapters.rsocket.interceptors import ConnectionInfo, Interceptors
from sansrs.adapters.rsocket.metrics import RSocketMetrics

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import COMPOSITE_METADATA

#: Requests the client makes, by (route, outcome).
WORKLOAD = {
    ("greet", "complete"): 10,
    ("fail", "error"): 2,
    ("busy", "reject"): 1,
    ("count", "complete"): 3,
    ("count", "cancel"): 1,
    ("echo", "complete"): 2,
    ("log", "complete"): 4,
}
STREAM_ITEMS = 5

router = Router()


@router.response("greet")
def greet(request: RoutedRequest) -> bytes:
    return b"hello " + request.data


@router.response("fail")
def fail(request: RoutedRequest) -> bytes:
    raise ValueError("failing on purpose")


@router.response("busy")
def busy(request: RoutedRequest) -> bytes:
    raise RSocketError(ErrorCode.REJECTED, "busy, try later")


@router.stream("count")
def count(request: RoutedRequest) -> Iterator[bytes]:
    n = int(request.data) if request.data else STREAM_ITEMS
    return (b"%d" % i for i in range(n))


@router.channel("echo")
def echo(request: RoutedRequest, inbound: Iterator[Payload]) -> Iterator[Payload]:
    yield Payload(request.data)
    yield from inbound


@router.fnf("log")
def log(request: RoutedRequest) -> None:
    pass


class ConnectionsClosed:
    """A connection interceptor: lets the example wait until the server has
    seen its connections close (then every figure is in)."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.closed = 0
        self.done = threading.Event()

    def on_open(self, info: ConnectionInfo) -> None:
        pass

    def on_close(self, info: ConnectionInfo, error: BaseException | None) -> None:
        self.closed += 1
        if self.closed >= self.expected:
            self.done.set()


def run_workload(url: str, metrics: RSocketMetrics) -> None:
    """The requests of ``WORKLOAD``, from a client counting into ``metrics``."""
    with connect(
        url, metadata_mime_type=COMPOSITE_METADATA, interceptors=metrics.interceptors()
    ) as client:
        for i in range(WORKLOAD["greet", "complete"]):
            client.route("greet").request_response(b"%d" % i, timeout=10)
        for route, outcome in (("fail", "error"), ("busy", "reject")):
            for _ in range(WORKLOAD[route, outcome]):
                with contextlib.suppress(RSocketError):
                    client.route(route).request_response(b"", timeout=10)
        for _ in range(WORKLOAD["count", "complete"]):
            items = list(client.route("count").request_stream(b"", timeout=10))
            assert len(items) == STREAM_ITEMS
        with client.route("count").request_stream(b"1000000", prefetch=2, timeout=10) as stream:
            next(stream), next(stream)  # two items, then the stream is cancelled
        for _ in range(WORKLOAD["echo", "complete"]):
            list(client.route("echo").request_channel([b"a", b"b"], timeout=10))
        for _ in range(WORKLOAD["log", "complete"]):
            client.route("log").fire_and_forget(b"line")


def scrape_endpoint(
    registry: prometheus_client.CollectorRegistry, port: int
) -> tuple[Any, threading.Thread]:
    """Prometheus' scrape endpoint for ``registry`` on 127.0.0.1:``port``
    (0: any free port; ``server.server_port`` says which), on a thread."""
    return prometheus_client.start_http_server(port, addr="127.0.0.1", registry=registry)


def main(argv: list[str] | None = None) -> prometheus_client.CollectorRegistry:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", type=int, metavar="PORT",
                        help="also serve the metrics on http://127.0.0.1:PORT/metrics")
    parser.add_argument("--serve-for", type=float, metavar="SECONDS",
                        help="with --serve: stop after SECONDS (default: until Ctrl-C)")
    args = parser.parse_args(argv)

    registry = prometheus_client.CollectorRegistry()  # the example's own, not the process's
    metrics = RSocketMetrics(registry)
    closed = ConnectionsClosed(expected=1)
    server_interceptors = Interceptors(connection=[metrics, closed], requests=[metrics])
    with serve("tcp://127.0.0.1:0", router, interceptors=server_interceptors) as server:
        run_workload(server.url, metrics)
        if not closed.done.wait(10):
            raise RuntimeError("the server did not see the connection close")
    sys.stdout.write(prometheus_client.generate_latest(registry).decode())
    if args.serve is not None:
        httpd, thread = scrape_endpoint(registry, args.serve)
        print(f"serving the metrics on http://127.0.0.1:{httpd.server_port}/metrics", flush=True)
        try:
            if args.serve_for is not None:
                thread.join(args.serve_for)
            else:
                thread.join()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.shutdown()
            httpd.server_close()
    return registry


if __name__ == "__main__":
    main()

"""RSocket tracing with OpenTelemetry: a routed server and a client in one
process, both with the tracing interceptor (sansrs.adapters.rsocket.tracing,
the ``tracing`` extra; the console exporter needs ``opentelemetry-sdk``).
The client's requests run inside an application span, ``checkout``; each
request is a CLIENT span (its child) whose context crosses the wire as
Zipkin tracing metadata, and the server's SERVER span for it is the CLIENT
span's child: one trace from the application to the handler. Run:

    .venv/bin/python examples/tracing.py

Every span is printed as one line of JSON (OpenTelemetry's console
exporter) when it is exported: ``name``, ``kind`` (``SpanKind.CLIENT`` /
``SpanKind.SERVER`` / ``SpanKind.INTERNAL``), ``context.trace_id``,
``context.span_id``, ``parent_id``, ``status``, ``attributes``. The
requests: ``greet`` (request-response), ``count`` (a stream of three
items), ``fail`` (the handler raises: status ERROR on both sides),
``echo`` (a channel), ``log`` (fire-and-forget). The server logs the
``fail`` handler's exception with its traceback (as it logs any handler
that raises): that is expected. tests/adapters/rsocket/test_tracing_example.py
runs this and checks the spans.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from sansrs.adapters.rsocket import (
    Payload,
    RoutedRequest,
    Router,
    RSocketError,
    RSocketTracing,
    connect,
    serve,
)

from sansrs.rsocket.extensions import COMPOSITE_METADATA

router = Router()
#: The fire-and-forget's handler ran (the client waits for it before closing).
logged = threading.Event()


@router.response("greet")
def greet(request: RoutedRequest) -> bytes:
    return b"hello " + request.data


@router.stream("count")
def count(request: RoutedRequest) -> Iterator[bytes]:
    return (b"%d" % i for i in range(int(request.data)))


@router.response("fail")
def fail(request: RoutedRequest) -> bytes:
    raise ValueError("failing on purpose")


@router.channel("echo")
def echo(request: RoutedRequest, inbound: Iterator[Payload]) -> Iterator[bytes]:
    yield request.data  # the first item travels in the request
    for item in inbound:
        yield item.data


@router.fnf("log")
def log(request: RoutedRequest) -> None:
    logged.set()


def one_line(span: ReadableSpan) -> str:
    return span.to_json(indent=None) + "\n"


def main() -> int:
    provider = TracerProvider(resource=Resource.create({"service.name": "tracing-example"}))
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(formatter=one_line)))
    tracing = RSocketTracing(provider)  # (default: the global TracerProvider)
    app = provider.get_tracer("examples.tracing")
    with (
        serve("tcp://127.0.0.1:0", router, interceptors=tracing.interceptors()) as server,
        connect(
            server.url,
            metadata_mime_type=COMPOSITE_METADATA,  # (the default; tracing rides on it)
            interceptors=tracing.interceptors(),
        ) as client,
        app.start_as_current_span("checkout"),  # the client spans' parent
    ):
        client.route("greet").request_response(b"world", timeout=5)
        assert len(list(client.route("count").request_stream(b"3", timeout=5))) == 3
        try:
            client.route("fail").request_response(b"", timeout=5)
        except RSocketError as exc:
            print(f"fail answered: {exc}", file=sys.stderr)
        assert len(list(client.route("echo").request_channel([b"a", b"b"], timeout=5))) == 2
        client.route("log").fire_and_forget(b"done")
        logged.wait(5)
    provider.shutdown()  # exports what is left
    return 0


if __name__ == "__main__":
    sys.exit(main())

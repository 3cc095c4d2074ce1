"""Tracing (docs/interceptors.md, "Tracing"): RSocket requests become
OpenTelemetry spans joined across the wire by Zipkin tracing metadata.

Over real connections under every driver (thread, selector, asyncio): a
CLIENT span per request, child of the caller's span, and the server's SERVER
span its child (the same trace), for request-response, stream, channel and
fire-and-forget; failures (status ERROR), cancels, a lost connection and a
timeout each end a span exactly once; malformed tracing metadata from a
scripted peer never breaks the request (the span is a root one); a request
from rsocket-py (no Zipkin metadata) gets a root span. Unit level: every
flag of the extension as a parent (64/128-bit ids, sampled, debug, not
sampled, undecided, ids missing), and what the requester writes."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind, StatusCode
from sansrs.adapters.rsocket import (
    ConnectionClosed,
    Payload,
    RoutedRequest,
    Router,
    RSocketError,
    RSocketTracing,
    aio,
    connect,
    serve,
)
from sansrs.adapters.rsocket.interceptors import COMPLETE, Interceptors, RequestInfo
from sansrs.adapters.rsocket.types import Request

from sansrs.rsocket.extensions import (
    TRACING_ZIPKIN,
    Sampling,
    ZipkinTrace,
    compose,
    decode_metadata,
    encode_composite,
)

WAIT = 10.0
U64 = (1 << 64) - 1


class Spans(SpanExporter):
    """An in-memory exporter one can wait on (spans end on the connections' threads)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self._cond = threading.Condition()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._cond:
            self.spans.extend(spans)
            self._cond.notify_all()
        return SpanExportResult.SUCCESS

    def wait(self, n: int) -> list[ReadableSpan]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.spans) >= n, WAIT), self.spans
            return list(self.spans)

    def of(self, kind: SpanKind) -> list[ReadableSpan]:
        with self._cond:
            return [s for s in self.spans if s.kind is kind]


@pytest.fixture
def spans() -> Spans:
    return Spans()


@pytest.fixture
def provider(spans: Spans) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield provider
    provider.shutdown()


@pytest.fixture
def tracing(provider: TracerProvider) -> RSocketTracing:
    return RSocketTracing(provider)


class Handler:
    """Answers every model; ``current`` keeps the span each handler call saw current."""

    def __init__(self) -> None:
        self.current: list[trace.SpanContext] = []

    def _saw(self) -> None:
        self.current.append(trace.get_current_span().get_span_context())

    def request_response(self, request: Request) -> Payload:
        self._saw()
        if request.data == b"boom":
            raise ValueError("boom")
        return Payload(request.data.upper())

    def request_stream(self, request: Request) -> Iterator[bytes]:
        self._saw()
        return (b"%04d" % i for i in range(int(request.data)))

    def request_channel(self, request: Request, inbound: Iterator[Payload]) -> Iterator[bytes]:
        self._saw()
        return itertools.chain([request.data], (item.data for item in inbound))

    def fire_and_forget(self, request: Request) -> None:
        self._saw()


def _by_model(found: list[ReadableSpan], kind: SpanKind) -> dict[str, ReadableSpan]:
    out: dict[str, ReadableSpan] = {}
    for span in found:
        if span.kind is kind:
            model = span.attributes["rsocket.request_type"] if span.attributes else None
            assert isinstance(model, str) and model not in out, (model, found)
            out[model] = span
    return out


MODELS = ("request_response", "request_stream", "request_channel", "fire_and_forget")


def _check_joined(found: list[ReadableSpan], app: ReadableSpan, handler: Handler) -> None:
    """Each model: one CLIENT span, the app span's child; one SERVER span, the
    CLIENT span's child (same trace, remote parent); the handler ran with
    the SERVER span current."""
    clients = _by_model(found, SpanKind.CLIENT)
    servers = _by_model(found, SpanKind.SERVER)
    assert set(clients) == set(servers) == set(MODELS)
    for model in MODELS:
        client, server = clients[model], servers[model]
        assert client.context is not None and server.context is not None
        assert client.parent is not None and app.context is not None
        assert client.parent.span_id == app.context.span_id
        assert client.context.trace_id == app.context.trace_id
        assert server.context.trace_id == client.context.trace_id
        assert server.parent is not None and server.parent.is_remote
        assert server.parent.span_id == client.context.span_id
        for span in (client, server):
            assert span.attributes is not None
            assert span.attributes["rpc.system"] == "rsocket"
            assert span.attributes["rsocket.outcome"] == "complete"
            assert span.status.status_code is StatusCode.UNSET
    assert {c.span_id for c in handler.current} == {
        s.context.span_id for s in servers.values() if s.context is not None
    }
    rr_c, rr_s = clients["request_response"], servers["request_response"]
    assert rr_c.attributes is not None and rr_s.attributes is not None
    # Bytes: the request's data; the server received the data plus the
    # tracing metadata the client added (a composite entry of 1 + 3 + 25 bytes).
    assert rr_c.attributes["rsocket.bytes_received"] == rr_s.attributes["rsocket.bytes_sent"] == 2
    assert rr_c.attributes["rsocket.bytes_sent"] == rr_s.attributes["rsocket.bytes_received"]
    assert rr_s.attributes["rsocket.bytes_received"] == 2 + 1 + 3 + 1 + 16 + 8 + 8
    st_c, st_s = clients["request_stream"], servers["request_stream"]
    assert st_c.attributes is not None and st_s.attributes is not None
    assert st_c.attributes["rsocket.payloads_received"] == 3
    assert st_c.attributes["rsocket.stream_id"] == st_s.attributes["rsocket.stream_id"] != 0


def _sync_requests(client: Any) -> None:
    assert client.request_response(b"ok", timeout=WAIT) == Payload(b"OK")
    assert len(list(client.request_stream(b"3", timeout=WAIT))) == 3
    assert len(list(client.request_channel([b"a", b"b"], timeout=WAIT))) == 2
    client.fire_and_forget(b"f")


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_tracing_client_and_server_spans_join_across_the_wire_on_every_model(
    loop: str, tracing: RSocketTracing, provider: TracerProvider, spans: Spans
) -> None:
    handler = Handler()
    app = provider.get_tracer("app")
    with (
        serve("tcp://127.0.0.1:0", handler, loop=loop, interceptors=tracing.interceptors()) as s,
        connect(s.url, loop=loop, interceptors=tracing.interceptors()) as client,
    ):
        with app.start_as_current_span("app") as app_span:
            _sync_requests(client)
        found = spans.wait(1 + 2 * len(MODELS))
    (app_done,) = [s for s in found if s.name == "app"]
    assert app_done.context is not None and app_span.get_span_context() == app_done.context
    _check_joined(found, app_done, handler)


def test_tracing_client_and_server_spans_join_across_the_wire_under_asyncio(
    tracing: RSocketTracing, provider: TracerProvider, spans: Spans
) -> None:
    handler = Handler()
    app = provider.get_tracer("app")

    async def main() -> list[ReadableSpan]:
        async with aio.serve(
            "tcp://127.0.0.1:0", handler, interceptors=tracing.interceptors()
        ) as server, aio.connect(server.url, interceptors=tracing.interceptors()) as client:
            with app.start_as_current_span("app"):
                assert await client.request_response(b"ok", timeout=WAIT) == Payload(b"OK")
                assert len([p async for p in client.request_stream(b"3", timeout=WAIT)]) == 3
                got = [p async for p in client.request_channel([b"a", b"b"], timeout=WAIT)]
                assert len(got) == 2
                await client.fire_and_forget(b"f")
            return await asyncio.to_thread(spans.wait, 1 + 2 * len(MODELS))

    found = asyncio.run(main())
    (app_done,) = [s for s in found if s.name == "app"]
    _check_joined(found, app_done, handler)


def test_tracing_a_routed_request_keeps_its_route_and_names_the_span_after_it(
    tracing: RSocketTracing, spans: Spans
) -> None:
    router = Router()

    @router.response("users.{id}.get")
    def get(request: RoutedRequest) -> bytes:
        return b"user " + request.variables["id"].encode()

    with (
        serve("tcp://127.0.0.1:0", router, interceptors=tracing.interceptors()) as server,
        connect(server.url, interceptors=tracing.interceptors()) as client,
    ):
        answer = client.route("users.{id}.get", 7).request_response(b"", timeout=WAIT)
        assert answer is not None and answer.data == b"user 7"
        spans.wait(2)
    (client_span,) = spans.of(SpanKind.CLIENT)
    (server_span,) = spans.of(SpanKind.SERVER)
    for span in (client_span, server_span):
        assert span.name == "users.7.get"
        assert span.attributes is not None and span.attributes["rpc.method"] == "users.7.get"
    assert server_span.parent is not None and client_span.context is not None
    assert server_span.parent.span_id == client_span.context.span_id


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_tracing_a_failed_request_has_status_error_on_both_sides(
    loop: str, tracing: RSocketTracing, spans: Spans
) -> None:
    with (
        serve("tcp://127.0.0.1:0", Handler(), loop=loop, interceptors=tracing.interceptors()) as s,
        connect(s.url, loop=loop, interceptors=tracing.interceptors()) as client,
    ):
        with pytest.raises(RSocketError, match="boom"):
            client.request_response(b"boom", timeout=WAIT)
        spans.wait(2)
    (client_span,) = spans.of(SpanKind.CLIENT)
    (server_span,) = spans.of(SpanKind.SERVER)
    for span, error in ((client_span, "APPLICATION_ERROR"), (server_span, "ValueError")):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description is not None and "boom" in span.status.description
        assert span.attributes is not None
        assert (span.attributes["error.type"], span.attributes["rsocket.outcome"]) == (
            error, "error"
        )


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_tracing_a_cancelled_stream_ends_each_span_once_as_cancel(
    loop: str, tracing: RSocketTracing, spans: Spans
) -> None:
    with (
        serve("tcp://127.0.0.1:0", Handler(), loop=loop, interceptors=tracing.interceptors()) as s,
        connect(s.url, loop=loop, interceptors=tracing.interceptors()) as client,
    ):
        with client.request_stream(b"1000000", prefetch=2, timeout=WAIT) as items:
            next(items)
        spans.wait(2)
        # The connection goes on, then closes: nothing ends a second time.
        assert client.request_response(b"x", timeout=WAIT) == Payload(b"X")
        spans.wait(4)
    streams = [s for s in spans.spans if s.attributes and
               s.attributes["rsocket.request_type"] == "request_stream"]
    assert sorted(s.kind.name for s in streams) == ["CLIENT", "SERVER"]
    for span in streams:
        assert span.attributes is not None and span.attributes["rsocket.outcome"] == "cancel"
        assert span.status.status_code is StatusCode.UNSET
    assert len(spans.spans) == 4


def test_tracing_failure_and_cancel_end_spans_once_under_asyncio(
    tracing: RSocketTracing, spans: Spans
) -> None:
    async def main() -> None:
        async with aio.serve(
            "tcp://127.0.0.1:0", Handler(), interceptors=tracing.interceptors()
        ) as server, aio.connect(server.url, interceptors=tracing.interceptors()) as client:
            with pytest.raises(RSocketError, match="boom"):
                await client.request_response(b"boom", timeout=WAIT)
            stream = client.request_stream(b"1000000", prefetch=2, timeout=WAIT)
            await anext(stream)
            await stream.aclose()
            await asyncio.to_thread(spans.wait, 4)
            assert await client.request_response(b"x", timeout=WAIT) == Payload(b"X")
            await asyncio.to_thread(spans.wait, 6)

    asyncio.run(main())
    ends = sorted(
        (s.kind.name, str(s.attributes["rsocket.request_type"]),
         str(s.attributes["rsocket.outcome"]), s.status.status_code.name)
        for s in spans.spans if s.attributes is not None
    )
    assert ends == [
        ("CLIENT", "request_response", "complete", "UNSET"),
        ("CLIENT", "request_response", "error", "ERROR"),
        ("CLIENT", "request_stream", "cancel", "UNSET"),
        ("SERVER", "request_response", "complete", "UNSET"),
        ("SERVER", "request_response", "error", "ERROR"),
        ("SERVER", "request_stream", "cancel", "UNSET"),
    ]


@pytest.mark.timeout(20)
def test_tracing_a_timeout_then_a_lost_connection_each_end_a_span_once(
    tracing: RSocketTracing, spans: Spans
) -> None:
    """A scripted server reads the SETUP and two requests, never answers,
    then drops the socket: the timed-out request-response ends as cancel,
    the stream open at the drop as error (ConnectionClosed), once each."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    got: list[bytes] = []
    release = threading.Event()
    read_both = threading.Event()

    def peer() -> None:
        sock, _ = listener.accept()
        with sock:
            seen = b""
            while b"zq-stream" not in seen:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                seen += chunk
            got.append(seen)
            read_both.set()
            release.wait(WAIT)

    thread = threading.Thread(target=peer)
    thread.start()
    try:
        with connect(f"tcp://127.0.0.1:{port}", interceptors=tracing.interceptors()) as client:
            with pytest.raises(TimeoutError):
                client.request_response(b"zq-rr", timeout=0.2)
            items = client.request_stream(b"zq-stream", timeout=WAIT)
            assert read_both.wait(WAIT)
            release.set()  # the peer drops the connection
            with pytest.raises(ConnectionClosed):
                list(items)
            found = spans.wait(2)
    finally:
        release.set()
        thread.join(WAIT)
        listener.close()
    assert len(found) == 2 == len(spans.spans)
    ends = {
        (s.attributes["rsocket.request_type"], s.attributes["rsocket.outcome"],
         s.attributes.get("error.type"))
        for s in found if s.attributes is not None
    }
    assert ends == {("request_response", "cancel", None),
                    ("request_stream", "error", "ConnectionClosed")}
    # Each request carried its span's context (the entry's well-known id, then its length).
    assert got[0].count(ZIPKIN_ID + (25).to_bytes(3, "big")) == 2


# -- malformed tracing metadata from a scripted peer ------------------------------------------


def _frame(stream_id: int, frame_type: int, flags: int, body: bytes) -> bytes:
    head = stream_id.to_bytes(4, "big") + ((frame_type << 10) | flags).to_bytes(2, "big")
    frame = head + body
    return len(frame).to_bytes(3, "big") + frame


def _setup(metadata_mime: bytes, data_mime: bytes = b"application/octet-stream") -> bytes:
    body = (
        (1).to_bytes(2, "big") + (0).to_bytes(2, "big")  # version 1.0
        + (20_000).to_bytes(4, "big") + (90_000).to_bytes(4, "big")  # keepalive, lifetime
        + bytes([len(metadata_mime)]) + metadata_mime + bytes([len(data_mime)]) + data_mime
    )
    return _frame(0, 0x01, 0, body)


def _request_response(stream_id: int, metadata: bytes, data: bytes) -> bytes:
    return _frame(stream_id, 0x04, 0x100, len(metadata).to_bytes(3, "big") + metadata + data)


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "the server closed the connection"
            out += chunk
        return out

    return exactly(int.from_bytes(exactly(3), "big"))


ZIPKIN_ID = bytes([0x80 | 0x7D])  # message/x.rsocket.tracing-zipkin.v0, a well-known id


@pytest.mark.timeout(20)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_tracing_malformed_tracing_metadata_from_a_peer_never_breaks_the_request(
    loop: str, tracing: RSocketTracing, spans: Spans
) -> None:
    """A scripted client sends requests whose Zipkin entry is malformed
    (truncated ids, a length the flags contradict, zero ids): each is
    answered as usual, its SERVER span a root one marked
    ``rsocket.tracing.invalid``; a valid one after them still joins."""
    truncated = ZIPKIN_ID + (9).to_bytes(3, "big") + bytes([0x80 | 0x20]) + b"\x01" * 8
    too_long = ZIPKIN_ID + (2).to_bytes(3, "big") + bytes([0x20, 0x00])
    zero_ids = ZIPKIN_ID + (17).to_bytes(3, "big") + bytes([0x80 | 0x20]) + b"\x00" * 16
    valid = compose(tracing=ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=7, span_id=9))
    requests = [truncated, too_long, zero_ids, valid]
    with serve("tcp://127.0.0.1:0", Handler(), loop=loop,
               interceptors=tracing.interceptors()) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(_setup(b"message/x.rsocket.composite-metadata.v0"))
            for i, metadata in enumerate(requests):
                sock.sendall(_request_response(1 + 2 * i, metadata, b"ok"))
                answer = _read_frame(sock)
                assert int.from_bytes(answer[:4], "big") == 1 + 2 * i
                assert answer[4] >> 2 == 0x0A and answer.endswith(b"OK")  # PAYLOAD, the answer
        found = spans.wait(len(requests))
    by_stream = {s.attributes["rsocket.stream_id"]: s for s in found if s.attributes}
    for i in range(3):
        span = by_stream[1 + 2 * i]
        assert span.parent is None and span.attributes is not None
        assert span.attributes["rsocket.tracing.invalid"] is True
        assert span.attributes["rsocket.outcome"] == "complete"
    joined = by_stream[7]
    assert joined.parent is not None and joined.context is not None
    assert (joined.parent.span_id, joined.context.trace_id) == (9, 7)
    assert joined.attributes is not None and "rsocket.tracing.invalid" not in joined.attributes


@pytest.mark.timeout(20)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_tracing_a_peer_gone_mid_stream_ends_the_server_span_once_as_an_error(
    loop: str, tracing: RSocketTracing, spans: Spans
) -> None:
    """A scripted client asks for an endless stream with a credit of 1, reads
    the one item, and drops the socket without CONNECTION_CLOSE."""
    request_stream = _frame(1, 0x06, 0, (1).to_bytes(4, "big") + b"1000000")
    with serve("tcp://127.0.0.1:0", Handler(), loop=loop,
               interceptors=tracing.interceptors()) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(_setup(b"message/x.rsocket.composite-metadata.v0") + request_stream)
            item = _read_frame(sock)
            assert item[4] >> 2 == 0x0A and item.endswith(b"0000")
        (span,) = spans.wait(1)
    assert span.kind is SpanKind.SERVER and span.parent is None and span.attributes is not None
    assert (span.attributes["rsocket.outcome"], span.attributes["error.type"]) == (
        "error", "ConnectionClosed"
    )
    assert span.attributes["rsocket.payloads_sent"] == 1
    assert len(spans.spans) == 1


# -- rsocket-py: no Zipkin metadata, a root span -----------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
ROUTED_PEER = ROOT / "benchmarks" / "rsocketpy_routed_peer.py"


@pytest.mark.timeout(90)
def test_tracing_a_request_from_rsocketpy_gets_a_root_span(
    tracing: RSocketTracing, spans: Spans
) -> None:
    from sansrs.adapters.rsocket import BearerAuth, SimpleAuth
    from sansrs.adapters.rsocket.demo_routes import demo_router_factory

    factory = demo_router_factory([SimpleAuth("ann", "pw"), BearerAuth("tok")])
    with serve("tcp://127.0.0.1:0", handler_factory=factory,
               interceptors=tracing.interceptors()) as server:
        port = server.url.rsplit(":", 1)[1]
        out = subprocess.run(
            [sys.executable, str(ROUTED_PEER), "interop", port],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert (seen["rr"], seen["after_errors"]) == ("hello", "still")  # answered as without tracing
    found = spans.spans
    echo = [s for s in found if s.name == "echo"]
    assert len(echo) >= 3 and all(s.kind is SpanKind.SERVER for s in found)
    assert all(s.parent is None for s in found)  # root spans: rsocket-py sends no Zipkin entry
    # rsocket-py's deliberately malformed request: still a span (a root one), its ERROR kept.
    (malformed,) = [s for s in found if s.attributes and "rsocket.tracing.invalid" in s.attributes]
    assert malformed.status.status_code is StatusCode.ERROR


# -- unit level: the extension's flags as parents, what the requester writes ---------------------


def _info(side: str, metadata: bytes | None, composite: bool = True) -> RequestInfo:
    return RequestInfo("request_response", side, 1, None, 0.0, metadata, composite)  # type: ignore[arg-type]


def _serve_one(
    tracing: RSocketTracing, metadata: bytes | None, composite: bool = True
) -> RequestInfo:
    info = _info("responder", metadata, composite)
    tracing.on_start(info)
    info.ended = 1.0
    tracing.on_end(info, COMPLETE)
    return info


@pytest.mark.parametrize(
    ("entry", "sampled"),
    [
        (ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=5, span_id=6), True),
        (ZipkinTrace(sampling=Sampling.DEBUG, trace_id=5, span_id=6), True),
        (ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=(1 << 127) | 5, span_id=6,
                     parent_span_id=4, trace_id_128=True), True),
        (ZipkinTrace(sampling=Sampling.NOT_SAMPLED, trace_id=5, span_id=6), False),
        (ZipkinTrace(sampling=Sampling.UNDECIDED, trace_id=5, span_id=6), False),
    ],
)
def test_tracing_server_span_parent_follows_the_zipkin_flags(
    tracing: RSocketTracing, spans: Spans, entry: ZipkinTrace, sampled: bool
) -> None:
    info = _serve_one(tracing, compose(tracing=entry))
    assert info.handler_context is not None
    if not sampled:  # the SDK's parent-based sampler: a non-recording span, exported nowhere
        assert spans.spans == []
        return
    (span,) = spans.spans
    assert span.context is not None and span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (entry.trace_id, entry.span_id)
    assert span.parent.is_remote and span.kind is SpanKind.SERVER


def test_tracing_not_sampled_without_ids_opens_no_span(
    tracing: RSocketTracing, spans: Spans
) -> None:
    info = _serve_one(tracing, compose(tracing=ZipkinTrace(sampling=Sampling.NOT_SAMPLED)))
    assert spans.spans == [] and info.handler_context is None


@pytest.mark.parametrize("sampling", [Sampling.SAMPLED, Sampling.DEBUG, Sampling.UNDECIDED])
def test_tracing_a_decision_without_ids_opens_a_root_span(
    tracing: RSocketTracing, spans: Spans, sampling: Sampling
) -> None:
    _serve_one(tracing, compose(tracing=ZipkinTrace(sampling=sampling)))
    (span,) = spans.spans
    assert span.parent is None


def test_tracing_root_spans_off_opens_none_without_metadata(
    provider: TracerProvider, spans: Spans
) -> None:
    tracing = RSocketTracing(provider, root_spans=False)
    _serve_one(tracing, None)
    _serve_one(tracing, compose("route"))
    assert spans.spans == []
    _serve_one(tracing, compose(tracing=ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=1,
                                                    span_id=2)))
    assert len(spans.spans) == 1


def test_tracing_metadata_of_a_connection_without_composite_metadata_is_not_read(
    tracing: RSocketTracing, spans: Spans
) -> None:
    entry = ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=5, span_id=6)
    _serve_one(tracing, compose(tracing=entry), composite=False)
    (span,) = spans.spans
    assert span.parent is None


def _zipkin(metadata: bytes | None) -> ZipkinTrace | None:
    return decode_metadata(metadata).tracing


def test_tracing_requester_appends_its_span_as_zipkin_metadata_after_the_route(
    tracing: RSocketTracing, provider: TracerProvider, spans: Spans
) -> None:
    with provider.get_tracer("app").start_as_current_span("app") as app:
        info = _info("requester", compose("users.get"))
        tracing.on_start(info)
    decoded = decode_metadata(info.metadata)
    assert decoded.route == "users.get"
    sent = decoded.tracing
    assert sent is not None and sent.sampling is Sampling.SAMPLED
    tracing.on_end(info, COMPLETE)
    (span,) = spans.of(SpanKind.CLIENT)
    assert span.context is not None
    assert (sent.trace_id, sent.span_id) == (span.context.trace_id, span.context.span_id)
    assert sent.parent_span_id == app.get_span_context().span_id
    assert sent.trace_id_128


def test_tracing_requester_replaces_the_applications_zipkin_entry_and_joins_its_trace(
    tracing: RSocketTracing, spans: Spans
) -> None:
    theirs = ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=0x1234, span_id=0x99)
    info = _info("requester", compose("r", tracing=theirs))
    tracing.on_start(info)
    assert info.metadata is not None
    entries = decode_metadata(info.metadata).all(TRACING_ZIPKIN)
    assert len(entries) == 1  # one entry: ours
    sent = _zipkin(info.metadata)
    assert sent is not None
    # A 64-bit trace goes on as 64-bit; our span is the child of theirs.
    assert (sent.trace_id, sent.trace_id_128, sent.parent_span_id) == (0x1234, False, 0x99)
    assert sent.span_id != 0x99


def test_tracing_requester_leaves_metadata_alone_without_composite_metadata(
    tracing: RSocketTracing, spans: Spans
) -> None:
    raw = b"raw bytes"
    info = _info("requester", raw, composite=False)
    tracing.on_start(info)
    assert info.metadata is raw
    tracing.on_end(info, COMPLETE)
    assert len(spans.spans) == 1  # traced, not propagated


def test_tracing_requester_sends_not_sampled_when_its_sampler_drops_the_span(
    spans: Spans,
) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    info = _info("requester", None)
    RSocketTracing(provider).on_start(info)
    sent = _zipkin(info.metadata)
    assert sent is not None and sent.sampling is Sampling.NOT_SAMPLED and sent.trace_id


def test_tracing_requester_without_an_sdk_sends_nothing(spans: Spans) -> None:
    info = _info("requester", None)
    RSocketTracing(trace.NoOpTracerProvider()).on_start(info)
    assert info.metadata is None


def test_tracing_requester_leaves_malformed_application_metadata_as_it_is(
    tracing: RSocketTracing,
) -> None:
    bad = encode_composite([("text/plain", b"x")])[:-2]  # cut short
    info = _info("requester", bad)
    tracing.on_start(info)
    assert info.metadata is bad


def test_tracing_metadata_push_opens_no_span(tracing: RSocketTracing, spans: Spans) -> None:
    for side in ("requester", "responder"):
        info = RequestInfo("metadata_push", side, 0, None, 0.0, b"", True)  # type: ignore[arg-type]
        tracing.on_start(info)
        tracing.on_end(info, COMPLETE)
    assert spans.spans == []


def test_tracing_ends_a_span_once_whatever_calls_on_end_again(
    tracing: RSocketTracing, spans: Spans
) -> None:
    info = _info("responder", None)
    tracing.on_start(info)
    tracing.on_end(info, COMPLETE)
    tracing.on_end(info, COMPLETE)
    assert len(spans.spans) == 1


def test_tracing_interceptors_are_request_interceptors_only(tracing: RSocketTracing) -> None:
    built = tracing.interceptors()
    assert isinstance(built, Interceptors)
    assert built.requests == (tracing,) and built.connection == ()


def test_tracing_lazy_exports_keep_the_adapter_import_light() -> None:
    """``import sansrs.adapters.rsocket`` loads neither OpenTelemetry nor
    prometheus_client; the names come on first use."""
    code = (
        "import sys, sansrs.adapters.rsocket as r\n"
        "assert 'opentelemetry' not in sys.modules, 'opentelemetry loaded'\n"
        "assert 'prometheus_client' not in sys.modules, 'prometheus_client loaded'\n"
        "from sansrs.adapters.rsocket import RSocketTracing, RSocketMetrics, Interceptors\n"
        "assert RSocketTracing.__module__ == 'sansrs.adapters.rsocket.tracing'\n"
        "assert RSocketMetrics.__module__ == 'sansrs.adapters.rsocket.metrics'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        import sansrs.adapters.rsocket as r

        r.Nope  # noqa: B018

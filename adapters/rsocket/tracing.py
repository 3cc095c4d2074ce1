"""OpenTelemetry spans for RSocket requests, joined across the wire by
RSocket's Zipkin tracing metadata (``message/x.rsocket.tracing-zipkin.v0``
in composite metadata): a request interceptor (:mod:`.interceptors`) over
the OpenTelemetry API (the ``tracing`` extra: ``pip install
'sansrs[tracing]'``; docs/interceptors.md, "Tracing").

    tracing = RSocketTracing()             # the global TracerProvider
    server = serve(url, handler, interceptors=tracing.interceptors())
    client = connect(server.url, interceptors=tracing.interceptors())

- **Requester**: a CLIENT span per request, a child of the caller's current
  span (the context of the thread or task that made the call); its context
  goes to the peer as a Zipkin entry appended to the request's composite
  metadata (replacing one the application put there). Only on connections
  that declared composite metadata: other metadata is never touched.
- **Responder**: a SERVER span per request, whose parent is the remote span
  the request's Zipkin entry names; without one, a new root span
  (``root_spans=False``: none). The handler runs with the span current.
- Sampling is OpenTelemetry's: the entry's decision (sampled, debug: sampled;
  not sampled, undecided: not sampled) becomes the remote parent's sampled
  flag and the configured sampler decides (the SDK's default, parent-based,
  follows it: a not-sampled parent gives a non-recording span, exported
  nowhere). An entry with no ids but the N flag ("do not trace", e.g. a
  health check) gives no span at all.
- A malformed entry (or malformed composite metadata) never fails the
  request: it is no parent, the span a root one with ``rsocket.tracing.invalid``.
- A span ends once, when the request ends: its answer, the stream's last
  item, an ERROR (status ERROR, ``error.type``), a CANCEL, the connection
  lost. METADATA_PUSH is connection-level (the extension may not ride on
  it): no span.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import (
        NonRecordingSpan,
        Span,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
    )
except ImportError as exc:  # the optional extra
    raise ImportError(
        "sansrs.adapters.rsocket.tracing needs opentelemetry-api: pip install 'sansrs[tracing]'"
    ) from exc

from sansrs import __version__
from sansrs.rsocket.extensions import (
    TRACING_ZIPKIN,
    MetadataDecodeError,
    Sampling,
    ZipkinTrace,
    decode_zipkin,
    encode_composite,
    encode_zipkin,
    iter_composite,
)

from .interceptors import Interceptors, Outcome, RequestInfo

__all__ = [
    "INSTRUMENTATION",
    "RSocketTracing",
    "default_span_name",
    "remote_parent",
    "zipkin_of",
]

log = logging.getLogger("sansrs.adapters.rsocket")

#: The instrumentation scope's name (``get_tracer``'s first argument).
INSTRUMENTATION = "sansrs.adapters.rsocket"
_KEY = "sansrs.tracing"  # RequestInfo.context: this request's span
_U64 = (1 << 64) - 1
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
_TRACED_SAMPLINGS = (Sampling.SAMPLED, Sampling.DEBUG)


def default_span_name(info: RequestInfo) -> str:
    """The route when the request has one (what the responder dispatches
    on, as an RPC's method), else ``rsocket <model>``."""
    return info.route if info.route is not None else f"rsocket {info.model}"


def remote_parent(entry: ZipkinTrace) -> SpanContext | None:
    """The remote span a Zipkin entry names, its sampled flag the entry's
    decision (D or S: sampled; N or none: not sampled, as OpenTelemetry's
    own B3 propagator reads a missing decision). A 64-bit trace id is the
    128-bit one with its high half zero. None: no ids, or ids OpenTelemetry
    calls invalid (zero)."""
    if entry.trace_id is None or entry.span_id is None:
        return None
    flags = _SAMPLED if entry.sampling in _TRACED_SAMPLINGS else _NOT_SAMPLED
    context = SpanContext(entry.trace_id, entry.span_id, is_remote=True, trace_flags=flags)
    return context if context.is_valid else None


def zipkin_of(context: SpanContext, parent_span_id: int | None = None) -> ZipkinTrace:
    """The Zipkin entry that makes ``context`` the parent of the peer's span:
    S or N as it is sampled, a 64-bit trace id when its high half is zero
    (it came from a 64-bit trace), else 128-bit; P with ``parent_span_id``."""
    return ZipkinTrace(
        sampling=Sampling.SAMPLED if context.trace_flags.sampled else Sampling.NOT_SAMPLED,
        trace_id=context.trace_id,
        span_id=context.span_id,
        parent_span_id=parent_span_id,
        trace_id_128=context.trace_id > _U64,
    )


def _incoming(metadata: bytes) -> ZipkinTrace | None:
    """The first Zipkin entry of composite ``metadata`` (MetadataDecodeError: malformed)."""
    for entry in iter_composite(metadata):
        if entry.mime == TRACING_ZIPKIN:
            return decode_zipkin(entry.content)
    return None


def _outgoing(metadata: bytes) -> tuple[ZipkinTrace | None, bytes]:
    """An application's composite ``metadata``: its own Zipkin entry (the
    first, if any) and the metadata without any (MetadataDecodeError: malformed)."""
    entries = list(iter_composite(metadata))
    ours = [e for e in entries if e.mime != TRACING_ZIPKIN]
    if len(ours) == len(entries):
        return None, metadata
    first = next(e for e in entries if e.mime == TRACING_ZIPKIN)
    return decode_zipkin(first.content), encode_composite(ours)


class RSocketTracing:
    """A request interceptor making OpenTelemetry spans (module docstring).

    ``tracer_provider``: where spans go (default: the global one,
    ``opentelemetry.trace.set_tracer_provider``). ``root_spans``: a
    request from a peer without tracing metadata opens a root span (False:
    no span). ``propagate``: the requester sends its span's context as
    Zipkin metadata (False: spans stay local). ``span_name``: a span's name
    from the request (:func:`default_span_name`). One instance serves any
    number of connections, on any threads.

    Attributes, following OpenTelemetry's RPC conventions where they fit
    (RSocket is peer-to-peer request / stream RPC, not a broker's
    messaging): ``rpc.system`` = ``rsocket``, ``rpc.method`` = the route
    (routed requests), ``rsocket.request_type`` (the interaction model: the
    conventions have none), ``rsocket.stream_id``; at the end
    ``rsocket.outcome`` (complete, error, cancel, reject),
    ``rsocket.bytes_sent`` / ``_received`` and ``rsocket.payloads_sent`` /
    ``_received`` (payload data + metadata, this side's view), and for an
    error or a reject ``error.type`` (the error code's name or the
    exception's class) with status ERROR.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        root_spans: bool = True,
        propagate: bool = True,
        span_name: Callable[[RequestInfo], str] = default_span_name,
    ) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION, __version__, tracer_provider)
        self.root_spans = root_spans
        self.propagate = propagate
        self.span_name = span_name

    def interceptors(self, *, clock: Callable[[], float] | None = None) -> Interceptors:
        """What ``connect`` / ``serve`` take: ``interceptors=tracing.interceptors()``
        (with other interceptors: ``Interceptors(requests=[tracing, ...])``)."""
        if clock is None:
            return Interceptors(requests=[self])
        return Interceptors(requests=[self], clock=clock)

    # -- RequestInterceptor --------------------------------------------------------
    def on_start(self, info: RequestInfo) -> None:
        if info.model == "metadata_push":
            return
        if info.side == "requester":
            self._requester(info)
        else:
            self._responder(info)

    def on_end(self, info: RequestInfo, outcome: Outcome) -> None:
        span: Span | None = info.context.pop(_KEY, None)
        if span is None:  # none opened (not traced), or ended already
            return
        if span.is_recording():
            span.set_attributes({
                "rsocket.outcome": outcome.kind,
                "rsocket.stream_id": info.stream_id,
                "rsocket.bytes_sent": info.bytes_out,
                "rsocket.bytes_received": info.bytes_in,
                "rsocket.payloads_sent": info.items_out,
                "rsocket.payloads_received": info.items_in,
            })
            if outcome.kind in ("error", "reject"):
                error = outcome.error or "_OTHER"
                span.set_attribute("error.type", error)
                text = error if not outcome.message else f"{error}: {outcome.message}"
                span.set_status(Status(StatusCode.ERROR, text))
        span.end()

    # -- the two sides ----------------------------------------------------------------
    def _attributes(self, info: RequestInfo) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "rpc.system": "rsocket",
            "rsocket.request_type": info.model,
        }
        if info.route is not None:
            attributes["rpc.method"] = info.route
        return attributes

    def _requester(self, info: RequestInfo) -> None:
        parent = otel_context.get_current()  # the caller's (carried to this thread)
        metadata = info.metadata
        rest: bytes | None = metadata
        carried: ZipkinTrace | None = None
        writable = info.composite and self.propagate
        if writable and metadata:
            try:
                carried, rest = _outgoing(metadata)
            except MetadataDecodeError:  # the application's own: sent as it is
                writable = False
        parent_span = trace.get_current_span(parent).get_span_context()
        if carried is not None and not parent_span.is_valid:
            # The application's Zipkin entry names the parent (no current span).
            remote = remote_parent(carried)
            if remote is not None:
                parent = trace.set_span_in_context(NonRecordingSpan(remote), parent)
                parent_span = remote
        span = self.tracer.start_span(
            self.span_name(info), parent, kind=SpanKind.CLIENT, attributes=self._attributes(info)
        )
        info.context[_KEY] = span
        if not writable:
            return
        context = span.get_span_context()
        if not context.is_valid:  # no SDK and no parent: nothing to join
            return
        parent_id = parent_span.span_id if parent_span.is_valid else None
        if parent_id == context.span_id:  # (no SDK: the parent passed through)
            parent_id = None
        entry = encode_composite([(TRACING_ZIPKIN, encode_zipkin(zipkin_of(context, parent_id)))])
        info.metadata = (rest or b"") + entry

    def _responder(self, info: RequestInfo) -> None:
        # A request from the network: its only parent is what it carries.
        parent = otel_context.Context()
        carried: ZipkinTrace | None = None
        invalid = False
        metadata = info.metadata
        if info.composite and metadata:
            try:
                carried = _incoming(metadata)
            except MetadataDecodeError as exc:
                invalid = True
                log.debug("request on stream %d: tracing metadata ignored: %s",
                          info.stream_id, exc)
        remote = None
        if carried is not None:
            if carried.trace_id is None:
                if carried.sampling is Sampling.NOT_SAMPLED:
                    return  # "not sampled" and no ids: the caller wants no trace
            else:
                remote = remote_parent(carried)
                invalid = remote is None
        if remote is not None:
            parent = trace.set_span_in_context(NonRecordingSpan(remote), parent)
        elif not self.root_spans:
            return
        attributes = self._attributes(info)
        if invalid:
            attributes["rsocket.tracing.invalid"] = True
        span = self.tracer.start_span(
            self.span_name(info), parent, kind=SpanKind.SERVER, attributes=attributes
        )
        info.context[_KEY] = span
        # The handler runs with the span current: its own requests are children.
        handler_context = contextvars.copy_context()
        handler_context.run(otel_context.attach, trace.set_span_in_context(span))
        info.handler_context = handler_context

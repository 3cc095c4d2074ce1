"""What interceptors see and what they implement (docs/interceptors.md):
a request (:class:`RequestInfo`: model, side, stream id, route, bytes and
items each way) and how it ended (:class:`Outcome`), a connection
(:class:`ConnectionInfo`), the two interceptor protocols, and
:class:`Interceptors`, what ``connect`` / ``serve`` take as
``interceptors=`` (it calls them, logging a failure once). How they are
installed on an engine is :mod:`.interceptors` (which re-exports these:
import them from there)."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import COMPOSITE_METADATA, decode_metadata

from .errors import RSocketError

__all__ = [
    "CANCEL",
    "COMPLETE",
    "ConnectionInfo",
    "ConnectionInterceptor",
    "Interceptors",
    "Model",
    "Outcome",
    "OutcomeKind",
    "RequestInfo",
    "RequestInterceptor",
    "Side",
    "composite_route",
    "is_composite",
    "outcome_of",
    "route_of",
]

log = logging.getLogger("sansrs.adapters.rsocket")

Model = Literal[
    "request_response", "request_stream", "request_channel", "fire_and_forget", "metadata_push"
]
Side = Literal["requester", "responder"]
OutcomeKind = Literal["complete", "error", "cancel", "reject"]

class RequestInfo:
    """One request as interceptors see it; the engine updates the counts as
    it goes (``ended`` is set before ``on_end``). Mutable by design: an
    interceptor may keep its own state in ``context``."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "composite",
        "context",
        "ended",
        "handler_context",
        "items_in",
        "items_out",
        "metadata",
        "model",
        "route",
        "side",
        "started",
        "stream_id",
    )

    def __init__(
        self,
        model: Model,
        side: Side,
        stream_id: int,
        route: str | None,
        started: float,
        metadata: bytes | None = None,
        composite: bool = False,
    ) -> None:
        self.model: Model = model
        self.side: Side = side
        #: 0 for a requester's request not (yet) on the wire, and for metadata_push.
        self.stream_id = stream_id
        #: The route of composite routing metadata (docs/extensions.md), if any.
        self.route = route
        #: Monotonic seconds (``Interceptors.clock``).
        self.started = started
        self.ended: float | None = None
        #: Payload bytes (data + metadata) and payloads received / sent on
        #: this request, the request's own payload included.
        self.bytes_in = 0
        self.bytes_out = 0
        self.items_in = 0
        self.items_out = 0
        #: Free for interceptors (e.g. a span); the engine never reads it.
        self.context: dict[str, Any] = {}
        #: The request's metadata. A requester's interceptor may replace it
        #: in ``on_start`` (e.g. add tracing metadata): the request is sent
        #: with what it holds after every ``on_start`` ran.
        self.metadata = metadata
        #: The connection declared composite metadata (its SETUP's metadata
        #: MIME type): ``metadata`` is composite (docs/extensions.md).
        self.composite = composite
        #: Responder: the ``contextvars.Context`` the handler is called in
        #: (None: the connection thread's own). An interceptor sets it in
        #: ``on_start`` to make e.g. its span current while the handler runs.
        self.handler_context: contextvars.Context | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end (None while the request runs)."""
        return None if self.ended is None else self.ended - self.started

    def __repr__(self) -> str:
        return (
            f"RequestInfo({self.model}, {self.side}, stream {self.stream_id},"
            f" route={self.route!r}, in={self.bytes_in} B, out={self.bytes_out} B)"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How a request ended. ``error``: the error's type for ``"error"`` and
    ``"reject"``: an RSocket error code's name (``APPLICATION_ERROR``,
    ``REJECTED``, ``CANCELED``, ``INVALID``...) or an exception's class name
    (``ConnectionClosed``); ``message`` its text."""

    kind: OutcomeKind
    error: str | None = None
    message: str | None = None


COMPLETE = Outcome(kind="complete")
CANCEL = Outcome(kind="cancel")


def outcome_of(error: BaseException | None) -> Outcome:
    """The outcome of a request that ended with ``error`` (None: complete)."""
    if error is None:
        return COMPLETE
    if isinstance(error, RSocketError):
        kind: OutcomeKind = "reject" if error.error_code == ErrorCode.REJECTED else "error"
        return Outcome(kind=kind, error=error.code_name, message=error.message)
    return Outcome(kind="error", error=type(error).__name__, message=str(error))


class RequestInterceptor(Protocol):
    """Sees every request of the connections it is installed on."""

    def on_start(self, info: RequestInfo) -> None: ...

    def on_end(self, info: RequestInfo, outcome: Outcome) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionInfo:
    """One connection: ``side`` (``"client"``: we connected; ``"server"``:
    we accepted), the peer's address, when it opened (monotonic seconds)."""

    side: Literal["client", "server"]
    peer: str
    opened: float


class ConnectionInterceptor(Protocol):
    """Sees connections open and close; ``error`` is None for a clean close
    (CONNECTION_CLOSE either way, or closed by the application), else why it
    ended (a protocol error, the peer gone, a keepalive timeout, the peer's
    connection ERROR)."""

    def on_open(self, info: ConnectionInfo) -> None: ...

    def on_close(self, info: ConnectionInfo, error: BaseException | None) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Interceptors:
    """What ``connect`` / ``serve`` take as ``interceptors=``; the same
    object may serve many connections (interceptors must be thread-safe
    when connections run on several threads). ``clock``: monotonic seconds
    (injected by tests)."""

    connection: Sequence[ConnectionInterceptor] = ()
    requests: Sequence[RequestInterceptor] = ()
    clock: Callable[[], float] = time.monotonic
    #: Interceptors whose failure was logged already (log once each).
    _failed: set[int] = field(default_factory=set, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, methods in (("connection", _CONNECTION), ("requests", _REQUEST)):
            value = getattr(self, name)
            if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
                raise TypeError(f"Interceptors({name}=...) takes a list, not {value!r}")
            for interceptor in value:
                missing = [m for m in methods if not callable(getattr(interceptor, m, None))]
                if missing:
                    raise TypeError(
                        f"Interceptors({name}=...): {interceptor!r} has no {', '.join(missing)}"
                    )
            object.__setattr__(self, name, tuple(value))

    def call(self, interceptor: object, method: str, *args: Any) -> None:
        """``interceptor.method(*args)``; an exception is logged (:meth:`failed`)
        and goes no further."""
        try:
            getattr(interceptor, method)(*args)
        except Exception:
            self.failed(interceptor, method)

    def failed(self, interceptor: object, method: str) -> None:
        """In an ``except`` block: ``interceptor.method`` raised. The first
        failure of each interceptor is logged with its traceback, later ones
        at DEBUG (no flood at the request rate)."""
        first = id(interceptor) not in self._failed
        self._failed.add(id(interceptor))
        level = logging.ERROR if first else logging.DEBUG
        log.log(level, "interceptor %r failed in %s (the connection goes on)",
                interceptor, method, exc_info=first)


_REQUEST = ("on_start", "on_end")
_CONNECTION = ("on_open", "on_close")


def is_composite(conn: Any) -> bool:
    """The connection (``conn``: the core connection) declared composite metadata."""
    setup = conn.setup_frame
    return setup is not None and setup.metadata_mime_type == COMPOSITE_METADATA


def route_of(conn: Any, metadata: bytes | None) -> str | None:
    """A request's route: only when the connection's metadata (``conn``: the
    core connection) is composite, and never failing (None for malformed
    metadata)."""
    if not metadata or not is_composite(conn):
        return None
    return composite_route(metadata)


def composite_route(metadata: bytes) -> str | None:
    """The route of composite ``metadata``; None without one or when malformed."""
    try:
        return decode_metadata(metadata).route
    except Exception:  # malformed: no route to tell
        return None

"""What :class:`~.engine.RSocketEngine` is made of, as its concerns kept in
modules of their own see it: the request handle, and the engine's state
that :mod:`.opening` (the first bytes, message records),
:mod:`.lifecycle` (SETUP acceptance, leases, the close),
:mod:`.engine_intents` (the application's intents) and
:mod:`.engine_signals` (the peer's signals on open streams) work on. Their
functions are the engine's methods (bound in its class, so a subclass such
as the resume engine still overrides them); this protocol is the engine
they are typed against, without importing it (no cycle)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ..drive import streams
from ..drive.engine import Driver
from ..drive.queues import CreditQueue
from ..drive.streams import Outbound, Outbounds
from ..transport.websocket import messages as ws
from . import core
from .leases import Leases
from .options import EngineOptions
from .responder import Responder
from .types import Payload

__all__ = ["EngineState", "RequestHandle", "Sink"]

Sink = streams.Sink[Payload]


class RequestHandle:
    """One request this side started; ``sid`` is set once the core assigned it."""

    __slots__ = ("cancelled", "inbound_done", "kind", "outbound", "sid", "sink")

    def __init__(self, kind: str, sink: Sink) -> None:
        self.kind = kind
        self.sink = sink
        self.sid: int | None = None
        self.cancelled = False
        self.inbound_done = False
        self.outbound: Outbound[Any] | None = None


class EngineState(Protocol):
    """The engine's attributes and methods its concern modules use (each
    documented where :class:`~.engine.RSocketEngine` defines it)."""

    options: EngineOptions
    conn: core.Connection
    leases: Leases[RequestHandle]
    responder: Responder
    peer: object
    thread: Driver | None
    _now: float
    _closing: BaseException | None
    _opening: bool
    _before_setup: bytes | None
    _setup_fed: int
    _setup_left: int
    _setup_pending: Any
    _records: ws.MessageReader | None
    _ws_close: tuple[int, str] | None
    _drain_by: float | None
    _peer_close: tuple[str, float] | None
    _requests: dict[int, RequestHandle]
    _outbounds: Outbounds[int]
    _inbound: dict[int, CreditQueue[Payload]]

    def _dispatch_events(self) -> None: ...

    def _call_soon(self, fn: Callable[[], None]) -> None: ...

    def _poke(self, sid: int) -> None: ...

    def _new_outbound(
        self, sid: int, source: Any, credit: int, watch: Any = None
    ) -> Outbound[Any]: ...

    def _outbound_done(self, sid: int) -> None: ...

    def start_request(
        self,
        handle: RequestHandle,
        payload: Payload,
        initial_n: int,
        outbound: Iterable[object] | None = None,
    ) -> None: ...

    def _refused(self, handle: RequestHandle, exc: core.LocalProtocolError) -> None: ...

    def fire_and_forget(self, payload: Payload) -> None: ...

    def fire_and_forget_many(self, payloads: list[Payload]) -> None: ...

    def _receive_stream(self, data: bytes, now: float) -> None: ...

    def _receive_partial(self, data: bytes, now: float) -> None: ...

    def _receive_span(
        self, buf: bytes, start: int, stop: int, now: float, frames: bool = False
    ) -> None: ...

    def _feed_setup_first(self, data: bytes, now: float) -> bytes: ...

    def _protocol_error(self, exc: core.RemoteProtocolError, data: bytes = b"") -> None: ...

    def _refuse(self, message: str, close_code: int) -> None: ...

    def _ws_closed(self, code: int, reason: str) -> None: ...

    def unexpected_input(self) -> str: ...

    def _accept_setup_hook(self, ev: Any) -> bool: ...

    def _setup_decided(self, ev: Any, done: Any) -> None: ...

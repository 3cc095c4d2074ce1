"""The one place the adapters touch the RSocket core's Connection API:
construction from :class:`EngineOptions` and event dispatch. If the core's
API moves, only this module follows."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    ConnectionState,
    FrameType,
    Framing,
    LocalProtocolError,
    RemoteProtocolError,
    ResumeFrame,
    Role,
    SessionStore,
    decode_frame,
    events,
)

if TYPE_CHECKING:
    from .engine import EngineOptions, RSocketEngine

PayloadReceived = events.PayloadReceived
RequestResponseReceived = events.RequestResponseReceived
FireAndForgetReceived = events.FireAndForgetReceived

__all__ = [
    "Connection",
    "ConnectionState",
    "FireAndForgetReceived",
    "LocalProtocolError",
    "PayloadReceived",
    "RemoteProtocolError",
    "RequestResponseReceived",
    "Role",
    "SessionStore",
    "client",
    "dispatch",
    "resume_token_of",
    "server",
]

Core = Connection


def _config(options: EngineOptions, message_framed: bool) -> ConnectionConfig:
    # A message transport (WebSocket) carries one frame per message, no
    # length prefix (spec: Framing Protocol Usage).
    limits: dict[str, Any] = {"framing": Framing.MESSAGES} if message_framed else {}
    if options.fragment_size is not None:
        limits["fragment_size"] = options.fragment_size
    if options.max_frame_size is not None:
        limits["max_frame_size"] = options.max_frame_size
    if options.max_concurrent_streams is not None:
        limits["max_concurrent_streams"] = options.max_concurrent_streams
    return ConnectionConfig(**limits)


def _ms(seconds: float) -> int:
    return max(1, min(0x7FFFFFFF, round(seconds * 1000)))


def client(
    options: EngineOptions, message_framed: bool = False, *, resume_buffer_size: int | None = None
) -> Connection:
    """A client connection with its SETUP already queued (``resume_buffer_size``:
    a resumable session, see :mod:`.rsocket_resume`)."""
    config = _config(options, message_framed)
    if resume_buffer_size is not None:
        config = dataclasses.replace(config, resume_buffer_size=resume_buffer_size)
    conn = Connection(Role.CLIENT, config)
    conn.setup(
        resume=resume_buffer_size is not None,
        keepalive_interval=_ms(options.keepalive_interval),
        max_lifetime=_ms(options.max_lifetime),
        metadata_mime_type=options.metadata_mime_type,
        data_mime_type=options.data_mime_type,
        data=options.setup_data,
        metadata=options.setup_metadata,
        lease=options.lease,
    )
    return conn


def server(
    options: EngineOptions,
    message_framed: bool = False,
    *,
    sessions: SessionStore | None = None,
    resume_buffer_size: int | None = None,
) -> Connection:
    config = _config(options, message_framed)
    if resume_buffer_size is not None:
        config = dataclasses.replace(config, resume_buffer_size=resume_buffer_size)
    return Connection(Role.SERVER, config, sessions=sessions)


def resume_token_of(frame: bytes) -> bytes | None:
    """The token of a RESUME frame (no length prefix); None for anything else."""
    if len(frame) < 6 or frame[4] >> 2 != FrameType.RESUME:
        return None
    try:
        decoded = decode_frame(frame)
    except RemoteProtocolError:
        return None
    return decoded.resume_token if isinstance(decoded, ResumeFrame) else None


def milliseconds(seconds: float) -> int:
    return _ms(seconds)


def _setup(engine: RSocketEngine, ev: events.SetupReceived) -> None:
    engine.on_setup(ev)


def _payload(engine: RSocketEngine, ev: events.PayloadReceived) -> None:
    engine.on_payload(ev.stream_id, ev.data, ev.metadata, ev.next, ev.complete)


def _rr(engine: RSocketEngine, ev: events.RequestResponseReceived) -> None:
    engine.on_request_response(ev.stream_id, ev.data, ev.metadata)


def _fnf(engine: RSocketEngine, ev: events.FireAndForgetReceived) -> None:
    engine.on_fire_and_forget(ev.data, ev.metadata)


def _stream(engine: RSocketEngine, ev: events.RequestStreamReceived) -> None:
    engine.on_request_stream(ev.stream_id, ev.data, ev.metadata, ev.initial_n)


def _channel(engine: RSocketEngine, ev: events.RequestChannelReceived) -> None:
    engine.on_request_channel(ev.stream_id, ev.data, ev.metadata, ev.initial_n, ev.complete)


def _request_n(engine: RSocketEngine, ev: events.RequestNReceived) -> None:
    engine.on_request_n(ev.stream_id, ev.n)


def _cancel(engine: RSocketEngine, ev: events.CancelReceived) -> None:
    engine.on_cancel(ev.stream_id)


def _error(engine: RSocketEngine, ev: events.ErrorReceived) -> None:
    engine.on_error(ev.stream_id, ev.error_code, ev.message)


def _metadata_push(engine: RSocketEngine, ev: events.MetadataPushReceived) -> None:
    engine.on_metadata_push(ev.metadata)


def _lease(engine: RSocketEngine, ev: events.LeaseReceived) -> None:
    engine.on_lease(ev.ttl, ev.number_of_requests)


def _closing(engine: RSocketEngine, ev: events.ConnectionClosing) -> None:
    engine.on_closing(ev.message)


def _closed(engine: RSocketEngine, ev: events.ConnectionClosed) -> None:
    engine.on_closed(ev.error_code, ev.message, ev.by_peer)


def _lost(engine: RSocketEngine, ev: events.ConnectionLost) -> None:
    engine.on_lost(ev.reason, ev.timed_out)


def _ignore(engine: RSocketEngine, ev: object) -> None:
    pass


# Resumption events reach only the resumable engine (``rsocket_resume``).
def _disconnected(engine: Any, ev: events.Disconnected) -> None:
    engine.on_disconnected(ev.reason, ev.timed_out)


def _resumed(engine: Any, ev: events.Resumed) -> None:
    engine.on_resumed(ev.peer_position, ev.retransmitted)


def _resume_accepted(engine: Any, ev: events.ResumeAccepted) -> None:
    engine.on_resume_accepted(ev.session)


_HANDLERS: dict[type, Callable[[RSocketEngine, Any], None]] = {
    events.PayloadReceived: _payload,
    events.RequestResponseReceived: _rr,
    events.FireAndForgetReceived: _fnf,
    events.RequestStreamReceived: _stream,
    events.RequestChannelReceived: _channel,
    events.RequestNReceived: _request_n,
    events.CancelReceived: _cancel,
    events.ErrorReceived: _error,
    events.MetadataPushReceived: _metadata_push,
    events.SetupReceived: _setup,
    events.LeaseReceived: _lease,
    events.KeepaliveReceived: _ignore,
    events.ExtensionReceived: _ignore,
    events.ConnectionClosing: _closing,
    events.ConnectionClosed: _closed,
    events.ConnectionLost: _lost,
    events.Disconnected: _disconnected,
    events.Resumed: _resumed,
    events.ResumeAccepted: _resume_accepted,
}


def dispatch(engine: RSocketEngine, event: object) -> None:
    _HANDLERS[type(event)](engine, event)

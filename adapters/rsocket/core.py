"""The one place the adapters touch the RSocket core's Connection API:
its names, and construction from :class:`~.options.EngineOptions`. If the
core's API moves, only this module (and the engine's event table) follows."""

from __future__ import annotations

import dataclasses
from typing import Any

from sansrs.rsocket import (
    FLAG_RESUME_ENABLE,
    Connection,
    ConnectionConfig,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
    FrameType,
    LocalProtocolError,
    RemoteProtocolError,
    ResumeFrame,
    Role,
    SessionStore,
    decode_frame,
    encode_frame_prefixed,
    events,
)

from .options import EngineOptions

PayloadReceived = events.PayloadReceived
PayloadRunReceived = events.PayloadRunReceived
RequestResponseReceived = events.RequestResponseReceived
FireAndForgetReceived = events.FireAndForgetReceived
FireAndForgetRunReceived = events.FireAndForgetRunReceived

__all__ = [
    "Connection",
    "ConnectionState",
    "FireAndForgetReceived",
    "FireAndForgetRunReceived",
    "LocalProtocolError",
    "PayloadReceived",
    "PayloadRunReceived",
    "RemoteProtocolError",
    "RequestResponseReceived",
    "Role",
    "SessionStore",
    "acknowledged_position",
    "client",
    "error_frame",
    "events",
    "is_resumable_setup",
    "resume_token_of",
    "server",
]

Core = Connection


def _config(options: EngineOptions) -> ConnectionConfig:
    # Length-prefixed framing on every transport: over a message transport
    # (WebSocket) the engine exchanges runs of frames behind their lengths,
    # and the transport makes each frame one message (spec: Framing Protocol
    # Usage; docs/adapters.md).
    # payload_runs: a stream's items reach the sinks a list per read;
    # fnf_runs: fire-and-forgets reach the handler a run per read
    # (docs/performance.md, "Items at the application's end").
    limits: dict[str, Any] = {"payload_runs": True, "fnf_runs": True}
    if options.fragment_size is not None:
        limits["fragment_size"] = options.fragment_size
    if options.max_frame_size is not None:
        limits["max_frame_size"] = options.max_frame_size
    if options.max_concurrent_streams is not None:
        limits["max_concurrent_streams"] = options.max_concurrent_streams
    if options.min_mean_fragment_size is not None:
        limits["min_mean_fragment_size"] = options.min_mean_fragment_size
    return ConnectionConfig(**limits)


def _ms(seconds: float) -> int:
    return max(1, min(0x7FFFFFFF, round(seconds * 1000)))


def client(
    options: EngineOptions,
    *,
    resume_buffer_size: int | None = None,
    resume_timeout: float | None = None,
) -> Connection:
    """A client connection with its SETUP already queued (``resume_buffer_size``:
    a resumable session, see :mod:`.resume`; ``resume_timeout``: how long its
    RESUMEs wait for RESUME_OK)."""
    config = _config(options)
    if resume_buffer_size is not None:
        config = dataclasses.replace(
            config, resume_buffer_size=resume_buffer_size, resume_timeout=resume_timeout
        )
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


def session_store(
    *, keep_detached: float, max_sessions: int, max_retained: int = 64 * 1024 * 1024
) -> SessionStore:
    """A server's store of resumable sessions (see :mod:`.resume`)."""
    return SessionStore(
        keep_detached=keep_detached, max_sessions=max_sessions, max_retained=max_retained
    )


def server(
    options: EngineOptions,
    *,
    sessions: SessionStore | None = None,
    resume_buffer_size: int | None = None,
) -> Connection:
    config = _config(options)
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


def is_resumable_setup(frame: bytes) -> bool:
    """True for a SETUP frame with the R flag (no length prefix): it asks
    the server to keep a session."""
    if len(frame) < 6 or frame[4] >> 2 != FrameType.SETUP:
        return False
    return bool(int.from_bytes(frame[4:6], "big") & FLAG_RESUME_ENABLE)


def acknowledged_position(conn: Connection) -> int | None:
    """The position up to which the peer confirmed receiving what this end
    sent (None once the session cannot resume: nothing is retained)."""
    if not conn.resumable:
        return None
    return conn.sent_position - conn.retained_bytes


def error_frame(code: int, message: str) -> bytes:
    """A length-prefixed ERROR frame on stream 0, for a connection whose core
    cannot send it itself (a RESUME refused before the core saw it)."""
    return encode_frame_prefixed(ErrorFrame(0, ErrorCode(code), message.encode()))


def milliseconds(seconds: float) -> int:
    return _ms(seconds)

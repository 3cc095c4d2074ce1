"""Resumable RSocket: sessions that survive dropped connections, under every
driver (docs/resumption.md).

    from sansrs.adapters.rsocket import ResumeOptions, connect_resumable, serve_resumable

    server = serve_resumable("tcp://127.0.0.1:0", handler, resume=ResumeOptions(keep_detached=60))
    with connect_resumable(server.url) as client:
        for item in client.request_stream(b"q"):   # keeps going across drops
            ...

Under asyncio: ``from sansrs.adapters.rsocket.resume.aio import
connect_resumable, serve_resumable``.

The modules, one concern each: :mod:`.options` (settings, what a loss
reports), :mod:`.lifecycle` (the session lifecycle table), :mod:`.session`
(one session's lifecycle under its lock, the driver its peer sees),
:mod:`.engine` (the session's engine, the link a transport drives it
through, the client's RESUME deadline), :mod:`.client` (reconnect policy and
``connect_resumable``), :mod:`.server` (the sessions a server holds, their
expiry, ``serve_resumable``), :mod:`.aio` (the same under asyncio).

Any transport: TCP, TLS, Unix, WebSocket (ws://, wss://).
"""

from .client import ReconnectPolicy, ResumableClient, connect_resumable
from .engine import EngineLink, SessionEngine
from .options import ResumeOptions, SessionLoss, SessionLost
from .server import ResumableServer, SessionRegistry, SessionState, serve_resumable

__all__ = [
    "EngineLink",
    "ReconnectPolicy",
    "ResumableClient",
    "ResumableServer",
    "ResumeOptions",
    "SessionEngine",
    "SessionLoss",
    "SessionLost",
    "SessionRegistry",
    "SessionState",
    "connect_resumable",
    "serve_resumable",
]

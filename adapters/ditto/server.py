"""``serve(url, history)``: the Ditto streaming-subscription protocol served
over WebSocket from a history source, one thread per connection or a
selector loop for many. ``authenticate`` decides on each upgrade."""

from __future__ import annotations

import dataclasses
import hmac
import ssl
from collections.abc import Mapping
from typing import Any

from sansrs.ditto import DittoServerConfig

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, attaching, open_server
from ..drive.listener import LoopServer
from ..drive.peer import ListeningServer
from ..transport import Transport
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .client import correlation_ids
from .engine import DittoServerEngine, headers_of
from .history import HistorySource
from .peer import DittoServerPeer
from .types import Authorize, basic_auth, bearer_auth, ws_endpoint

__all__ = [
    "DittoHistoryServer",
    "DittoServerPeer",
    "require_basic",
    "require_bearer",
    "serve",
    "server_websocket_options",
]


def require_basic(user: str, password: str) -> Authorize:
    """An ``authenticate`` check accepting only these Basic credentials."""
    expected = basic_auth(user, password)
    return lambda headers: hmac.compare_digest(headers.get("authorization", ""), expected)


def require_bearer(token: str) -> Authorize:
    """An ``authenticate`` check accepting only this Bearer token."""
    expected = bearer_auth(token)
    return lambda headers: hmac.compare_digest(headers.get("authorization", ""), expected)


def server_websocket_options(
    authenticate: Authorize | None, websocket: Mapping[str, Any]
) -> WebSocketOptions:
    """The listener's options: ``authenticate(headers)`` decides on each
    upgrade (a refusal answers HTTP 401; a check that raises refuses)."""

    def authorize(request: Any) -> int | None:
        if authenticate is None:
            return None
        try:
            allowed = authenticate(headers_of(request))
        except Exception:
            allowed = False
        return None if allowed else 401

    # The engine reads text runs as lines (one split, docs/performance.md).
    return WebSocketOptions(authorize=authorize, **{"text_lines": True, **websocket})


class DittoHistoryServer(ListeningServer):
    """A listening Ditto endpoint; one thread per connection (or a selector loop)."""

    def __init__(self, accept: LoopServer, peers: list[DittoServerPeer]) -> None:
        super().__init__(accept)
        self._peers = peers

    @property
    def peers(self) -> list[DittoServerPeer]:
        """The live connections."""
        return [s for s in list(self._peers) if s.thread.alive]


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
def serve(
    url: str | Endpoint,
    history: HistorySource,
    *,
    authenticate: Authorize | None = None,
    config: DittoServerConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    threaded_sources: bool = False,
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    **websocket: Any,
) -> DittoHistoryServer:
    """Serve the Ditto protocol on ``url`` (``ws://host:port/ws/2``) from ``history``.

    ``authenticate(headers)`` (names lower-case) decides on each WebSocket
    upgrade; a refusal answers HTTP 401 (see :func:`require_basic`,
    :func:`require_bearer`). ``config``: the core's limits and timeouts
    (``idle_timeout``, ...). ``ssl_context``: the certificate for ``wss://``
    (see ``sansrs.adapters.transport.tls.server_context``). ``threaded_sources``: pull
    each subscription's iterable on a worker thread of its own (for sources
    whose items block, e.g. a database cursor); by default iterables are
    pulled on the connection's thread, which must then not block. ``loop``:
    ``"thread"`` (default: an accept thread and a thread per connection),
    ``"selector"`` (the process-wide selector loop) or a :class:`~.selector.Loop`
    that accepts and drives every connection (one thread for many);
    ``loop_config``: the thread driver's limits and timeouts.
    ``websocket``: further
    ``WebSocketOptions`` (``max_message_size``, ...). Returns once
    listening; ``server.url`` has the real port when ``url`` asked for 0.
    """
    endpoint = ws_endpoint(url)
    core_config = server_config(config)
    options = server_websocket_options(authenticate, websocket)

    def new_engine(transport: Transport) -> DittoServerEngine:
        return DittoServerEngine(history, core_config, threaded_sources=threaded_sources)

    accept, peers = open_server(
        endpoint,
        new_engine,
        attaching(DittoServerPeer),
        name="sansrs-ditto-server",
        loop=loop,
        config=loop_config,
        ssl_context=ssl_context,
        websocket=options,
    )
    return DittoHistoryServer(accept, peers)


def server_config(config: DittoServerConfig | None) -> DittoServerConfig:
    """A subscribe without a ``correlation-id`` gets a fresh UUID-based one,
    as Ditto generates one, unless ``config`` has a factory."""
    config = config or DittoServerConfig()
    if config.correlation_ids is None:
        config = dataclasses.replace(config, correlation_ids=correlation_ids())
    return config

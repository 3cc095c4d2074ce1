"""``serve(url, handler)``: an RSocket server for threaded and legacy
applications: a thread per connection, or a selector loop for many."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, message_framed, open_server
from ..drive.engine import Driver
from ..drive.peer import PeersServer
from ..transport import Transport
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .engine import RSocketEngine, refuse_async_hooks
from .options import options_for
from .peer import RSocketPeer

__all__ = ["Server", "serve"]


class Server(PeersServer[RSocketPeer]):
    """A listening RSocket server (one thread per connection, or a selector
    loop); ``peers``: live connections, for server-initiated requests."""


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
def serve(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[RSocketPeer], object] | None = None,
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
    **options: Any,
) -> Server:
    """Listen on ``url`` and answer requests with ``handler`` (shared by every
    connection) or ``handler_factory(peer)`` (one per connection). Returns once
    listening; ``server.url`` has the real port when ``url`` asked for port 0.
    ``options``: ``lease`` (refuse clients that do not ask for leases; leases
    are granted to every client that asks), ``lease_ttl``, ``lease_requests``,
    ``fragment_size``, ``max_frame_size``, ``max_concurrent_streams``,
    ``min_mean_fragment_size`` (the core's ``ConnectionConfig``, docs/security.md),
    ``interceptors`` (:class:`~.interceptors.Interceptors`, for every
    connection the server accepts; docs/interceptors.md).
    ``loop``: ``"thread"`` (default: an accept thread and a thread per
    connection), ``"selector"`` (the process-wide selector loop accepts and
    drives every connection) or a :class:`~..drive.selector.Loop`;
    ``loop_config``: the thread driver's limits and timeouts. ``tls://`` needs
    ``ssl_context`` (see :func:`~..transport.tls.server_context`).
    ``ws://host:port/path`` / ``wss://``: ``websocket`` takes
    :class:`~..transport.websocket.WebSocketOptions`."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    refuse_async_hooks(handler)
    engine_options = options_for(serve, options)

    def new_engine(transport: Transport) -> RSocketEngine:
        return RSocketEngine.server(engine_options, message_framed=message_framed(transport))

    def new_peer(driver: Driver, engine: RSocketEngine) -> RSocketPeer:
        peer = RSocketPeer(driver, engine)
        engine.attach(driver, peer, handler_factory(peer) if handler_factory else handler)
        return peer

    accept, peers = open_server(
        url,
        new_engine,
        new_peer,
        name="sansrs-server",
        loop=loop,
        config=loop_config,
        ssl_context=ssl_context,
        websocket=websocket,
    )
    return Server(accept, peers)

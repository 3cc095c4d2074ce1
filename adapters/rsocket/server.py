"""``serve(url, handler)``: an RSocket server for threaded and legacy
applications: a thread per connection, or a selector loop for many."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from ..drive.choice import LoopChoice, message_framed, new_acceptor, new_driver, pick_loop
from ..drive.peer import PeersServer
from ..drive.selector import LoopConnection
from ..drive.threads import ConnectionThread
from ..transport import Transport, listen
from ..transport.urls import Endpoint
from ..transport.websocket import WebSocketOptions
from .engine import RSocketEngine
from .options import EngineOptions
from .peer import RSocketPeer

__all__ = ["Server", "serve"]


class Server(PeersServer[RSocketPeer]):
    """A listening RSocket server (one thread per connection, or a selector
    loop); ``peers``: live connections, for server-initiated requests."""


def serve(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[RSocketPeer], object] | None = None,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
    **options: Any,
) -> Server:
    """Listen on ``url`` and answer requests with ``handler`` (shared by every
    connection) or ``handler_factory(peer)`` (one per connection). Returns once
    listening; ``server.url`` has the real port when ``url`` asked for port 0.
    ``options``: ``lease`` (refuse clients that do not ask for leases; leases
    are granted to every client that asks), ``lease_ttl``, ``lease_requests``,
    ``fragment_size``, ``max_frame_size``, ``max_concurrent_streams``.
    ``loop``: ``"thread"`` (default: an accept thread and a thread per
    connection), ``"selector"`` (the process-wide selector loop accepts and
    drives every connection) or a :class:`~.selector.Loop`. ``tls://`` needs
    ``ssl_context`` (see :func:`~.tls.server_context`). ``ws://host:port/path``
    / ``wss://``: ``websocket`` takes :class:`~.websocket.WebSocketOptions`."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    engine_options = EngineOptions(**options)
    peers: list[RSocketPeer] = []

    driver_loop = pick_loop(loop)

    def make_connection(transport: Transport) -> ConnectionThread | LoopConnection:
        engine = RSocketEngine.server(engine_options, message_framed=message_framed(transport))
        thread = new_driver(
            driver_loop,
            transport,
            engine,
            f"sansrs-server {transport.peer}",
            on_exit=lambda t: peers.remove(peer) if peer in peers else None,
        )
        peer = RSocketPeer(thread, engine)
        engine.attach(thread, peer, handler_factory(peer) if handler_factory else handler)
        peers.append(peer)
        return thread

    listener = listen(url, ssl_context=ssl_context, websocket=websocket)
    accept = new_acceptor(driver_loop, listener, make_connection)
    accept.start()
    return Server(accept, peers)

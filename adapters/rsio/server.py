"""``serve(url, publishers)``: a reactive-streams-io server mapping names to
Publishers; ``server.peers`` reaches the connected clients (which may publish
too)."""

from __future__ import annotations

import ssl

from sansrs.rsio import ConnectionConfig, Role

from ..drive.choice import LoopChoice, message_framed, new_acceptor, new_driver, pick_loop
from ..drive.peer import PeersServer
from ..drive.selector import LoopConnection
from ..drive.threads import ConnectionThread
from ..transport import Transport, listen
from ..transport.urls import Endpoint
from ..transport.websocket import WebSocketOptions
from .engine import RsioEngine
from .peer import RsioPeer
from .types import Publishers

__all__ = ["Server", "serve"]


class Server(PeersServer[RsioPeer]):
    """A listening rsio server; ``peers``: live connections (subscribe to what
    a client publishes)."""


def serve(
    url: str | Endpoint,
    publishers: Publishers | None = None,
    *,
    config: ConnectionConfig | None = None,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
) -> Server:
    """Listen on ``url`` and serve ``publishers`` (names to Publishers, or a
    function of the name returning a Publisher or None) to every client.
    ``server.url`` has the real port when ``url`` asked for port 0."""
    peers: list[RsioPeer] = []
    driver_loop = pick_loop(loop)

    def make_connection(transport: Transport) -> ConnectionThread | LoopConnection:
        engine = RsioEngine(
            Role.SERVER, publishers, config, message_framed=message_framed(transport)
        )
        driver = new_driver(
            driver_loop,
            transport,
            engine,
            f"sansrs-rsio-server {transport.peer}",
            on_exit=lambda d: peers.remove(peer) if peer in peers else None,
        )
        peer = RsioPeer(driver, engine)
        engine.attach(driver)
        peers.append(peer)
        return driver

    listener = listen(url, ssl_context=ssl_context, websocket=websocket)
    accept = new_acceptor(driver_loop, listener, make_connection)
    accept.start()
    return Server(accept, peers)

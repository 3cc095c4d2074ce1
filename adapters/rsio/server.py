"""``serve(url, publishers)``: a reactive-streams-io server mapping names to
Publishers; ``server.peers`` reaches the connected clients (which may publish
too)."""

from __future__ import annotations

import ssl

from sansrs.rsio import ConnectionConfig, Role

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, message_framed, open_server
from ..drive.engine import Driver
from ..drive.peer import PeersServer
from ..transport import Transport
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
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
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
) -> Server:
    """Listen on ``url`` and serve ``publishers`` (names to Publishers, or a
    function of the name returning a Publisher or None) to every client.
    ``server.url`` has the real port when ``url`` asked for port 0.
    ``config``: the protocol core's limits; ``loop`` / ``loop_config``: the
    driver, as for :func:`~.client.connect`."""

    def new_engine(transport: Transport) -> RsioEngine:
        framed = message_framed(transport)
        return RsioEngine(Role.SERVER, publishers, config, message_framed=framed)

    def new_peer(driver: Driver, engine: RsioEngine) -> RsioPeer:
        engine.attach(driver)
        return RsioPeer(driver, engine)

    accept, peers = open_server(
        url,
        new_engine,
        new_peer,
        name="sansrs-rsio-server",
        loop=loop,
        config=loop_config,
        ssl_context=ssl_context,
        websocket=websocket,
    )
    return Server(accept, peers)

"""``serve(url, publishers)``: a reactive-streams-io server mapping names to
Publishers; ``server.peers`` reaches the connected clients (which may publish
too)."""

from __future__ import annotations

import ssl

from sansrs.rsio import ConnectionConfig, Role

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, attaching, open_server
from ..drive.peer import PeersServer
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .engine import engine_factory
from .peer import RsioPeer
from .types import Publishers

__all__ = ["Server", "serve"]


class Server(PeersServer[RsioPeer]):
    """A listening rsio server; ``peers``: live connections (subscribe to what
    a client publishes)."""


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
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

    accept, peers = open_server(
        url,
        engine_factory(Role.SERVER, publishers, config),
        attaching(RsioPeer),
        name="sansrs-rsio-server",
        loop=loop,
        config=loop_config,
        ssl_context=ssl_context,
        websocket=websocket,
    )
    return Server(accept, peers)

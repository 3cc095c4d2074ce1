"""``connect(url)``: a reactive-streams-io client. Both ends publish and
subscribe (the protocol is bidirectional): a client may serve publishers too
(``connect(url, publishers=...)``). docs/protocols/rsio.md, "Adapters"."""

from __future__ import annotations

import ssl

from sansrs.rsio import ConnectionConfig, Role

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, attaching, open_connection
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .engine import engine_factory
from .peer import RsioPeer
from .types import Publishers

__all__ = ["Client", "connect"]


class Client(RsioPeer):
    """A client connection; a context manager that closes on exit."""


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
def connect(
    url: str | Endpoint,
    *,
    publishers: Publishers | None = None,
    config: ConnectionConfig | None = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
) -> Client:
    """Connect to ``url`` (any transport URL: ``tcp://``, ``tls://``,
    ``unix://``, ``ws://``, ``wss://``); the clientHello is sent at once.
    ``publishers``: what this client serves to the server; ``config``: the
    protocol core's limits (:class:`sansrs.rsio.ConnectionConfig`). ``loop``:
    ``"thread"`` (default), ``"selector"`` or a :class:`~..drive.selector.Loop`;
    ``loop_config``: the thread driver's limits and timeouts."""

    return open_connection(
        url,
        engine_factory(Role.CLIENT, publishers, config),
        attaching(Client),
        name="sansrs-rsio-client",
        loop=loop,
        config=loop_config,
        connect_timeout=connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )

"""``connect(url)``: a reactive-streams-io client. Both ends publish and
subscribe (the protocol is bidirectional): a client may serve publishers too
(``connect(url, publishers=...)``). docs/protocols/rsio.md, "Adapters"."""

from __future__ import annotations

import ssl

from sansrs.rsio import ConnectionConfig, Role

from ..drive.choice import LoopChoice, message_framed, new_driver, pick_loop
from ..transport import open_transport
from ..transport.urls import Endpoint
from ..transport.websocket import WebSocketOptions
from .engine import RsioEngine
from .peer import RsioPeer
from .types import Publishers

__all__ = ["Client", "connect"]


class Client(RsioPeer):
    """A client connection; a context manager that closes on exit."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    url: str | Endpoint,
    *,
    publishers: Publishers | None = None,
    config: ConnectionConfig | None = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
) -> Client:
    """Connect to ``url`` (any transport URL: ``tcp://``, ``tls://``,
    ``unix://``, ``ws://``); the clientHello is sent at once. ``publishers``:
    what this client serves to the server. ``loop``: ``"thread"`` (default),
    ``"selector"`` or a :class:`~.selector.Loop`."""
    driver_loop = pick_loop(loop)
    transport = open_transport(
        url,
        connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )
    engine = RsioEngine(Role.CLIENT, publishers, config, message_framed=message_framed(transport))
    driver = new_driver(driver_loop, transport, engine, f"sansrs-rsio-client {transport.peer}")
    client = Client(driver, engine)
    engine.attach(driver)
    driver.start()
    return client

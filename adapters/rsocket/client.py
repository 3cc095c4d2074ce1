"""``connect(url)``: an RSocket client for threaded and legacy applications.

``loop=`` picks the driver: a thread per connection (``"thread"``), the
process-wide selector loop (``"selector"``), or any
:class:`~..drive.selector.Loop`: one thread for many connections. The API is
the same on all of them.
"""

from __future__ import annotations

import ssl
from typing import Any

from ..drive.choice import LoopChoice, message_framed, new_driver, pick_loop
from ..transport import open_transport
from ..transport.urls import Endpoint
from ..transport.websocket import WebSocketOptions
from .engine import RSocketEngine
from .options import EngineOptions
from .peer import RSocketPeer

__all__ = ["Client", "connect"]


class Client(RSocketPeer):
    """A client connection; a context manager that closes on exit."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
    **setup: Any,
) -> Client:
    """Connect to ``url`` (``tcp://host:port``, ``tls://host:port``,
    ``unix:///path``) and send SETUP.

    ``handler`` answers server-initiated requests. ``loop``: ``"thread"``
    (default: a thread for this connection), ``"selector"`` (the process-wide
    selector loop) or a :class:`~.selector.Loop`. ``tls://``: ``ssl_context``
    (default: system CAs, host name checked) and ``server_hostname``.
    ``ws://host:port/path`` / ``wss://``: one frame per binary message;
    ``websocket`` takes :class:`~.websocket.WebSocketOptions` (headers,
    subprotocols, max message size).
    ``setup`` options (see :class:`~.rsocket_engine.EngineOptions`):
    ``keepalive_interval``, ``max_lifetime`` (seconds), ``lease``,
    ``data_mime_type``, ``metadata_mime_type``, ``setup_data``,
    ``setup_metadata``, ``fragment_size``.
    """
    options = EngineOptions(**setup)
    driver_loop = pick_loop(loop)
    transport = open_transport(
        url,
        connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )
    engine = RSocketEngine.client(options, handler, message_framed=message_framed(transport))
    thread = new_driver(driver_loop, transport, engine, f"sansrs-client {transport.peer}")
    client = Client(thread, engine)
    engine.attach(thread, client)
    thread.start()
    return client

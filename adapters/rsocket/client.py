"""``connect(url)``: an RSocket client for threaded and legacy applications.

``loop=`` picks the driver: a thread per connection (``"thread"``), the
process-wide selector loop (``"selector"``), or any
:class:`~..drive.selector.Loop`: one thread for many connections. The API is
the same on all of them (:class:`~.peer.RSocketPeer`).
"""

from __future__ import annotations

import ssl
from typing import Any

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, message_framed, open_connection
from ..drive.engine import Driver
from ..transport import Transport
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .engine import RSocketEngine, client_websocket, refuse_async_hooks
from .options import options_for
from .peer import RSocketPeer

__all__ = ["Client", "connect"]


class Client(RSocketPeer):
    """A client connection; a context manager that closes on exit."""


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
def connect(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
    **setup: Any,
) -> Client:
    """Connect to ``url`` (``tcp://host:port``, ``tls://host:port``,
    ``unix:///path``, ``ws://host:port/path``, ``wss://``) and send SETUP.

    ``handler`` answers server-initiated requests. ``loop``: ``"thread"``
    (default: a thread for this connection), ``"selector"`` (the process-wide
    selector loop) or a :class:`~..drive.selector.Loop`; ``loop_config``: the
    thread driver's limits and timeouts (:class:`~..drive.config.LoopConfig`).
    ``tls://``: ``ssl_context`` (default: system CAs, host name checked) and
    ``server_hostname``. ``ws://`` / ``wss://``: one frame per binary
    message; ``websocket`` takes :class:`~..transport.websocket.WebSocketOptions`
    (headers, subprotocols, max message size).
    ``setup`` options (see :class:`~.options.EngineOptions`):
    ``keepalive_interval``, ``max_lifetime`` (seconds), ``lease``,
    ``data_mime_type``, ``metadata_mime_type`` (default: composite metadata,
    what routing peers expect; metadata passed to requests must then be
    composite, raw bytes raise ValueError: declare e.g.
    ``"application/octet-stream"`` for them), ``setup_data``,
    ``setup_metadata``, ``fragment_size``, ``interceptors``
    (:class:`~.interceptors.Interceptors`: request and connection
    interceptors, e.g. ``RSocketMetrics().interceptors()`` or
    ``RSocketTracing().interceptors()``; docs/interceptors.md).
    """
    refuse_async_hooks(handler)
    options = options_for(connect, setup)

    def new_engine(transport: Transport) -> RSocketEngine:
        return RSocketEngine.client(options, handler, message_framed=message_framed(transport))

    def new_peer(driver: Driver, engine: RSocketEngine) -> Client:
        client = Client(driver, engine)
        engine.attach(driver, client)
        return client

    return open_connection(
        url,
        new_engine,
        new_peer,
        name="sansrs-client",
        loop=loop,
        config=loop_config,
        connect_timeout=connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=client_websocket(url, websocket),
    )

"""sansrs.adapters: the code that touches sockets, threads, selectors, clocks
and Spark (the folder ``adapters/``, installed as ``sansrs.adapters``).

One package per role:

- :mod:`.rsocket`, :mod:`.rsio`, :mod:`.ditto`: one public import per
  protocol (``from sansrs.adapters.rsocket import connect, serve``), the same
  shape in each (``client``, ``server``, ``peer``, ``engine``, ``aio``,
  ``types``, ``errors``);
- :mod:`.drive`: the drivers (a thread per connection, a ``selectors`` loop,
  asyncio) and the engine contract they run;
- :mod:`.transport`: TCP, TLS, Unix sockets, WebSocket, URLs;
- :mod:`.spark`: Spark writers, readers and data source;
- :mod:`.tools`: the fault-injecting and capturing proxies;
- :mod:`.cli`: the ``sansrs`` command.

The names below are the ones every protocol shares.
"""

from .drive.config import LoopConfig
from .drive.errors import ConnectionClosed, LoopClosed
from .drive.selector import Loop, default_loop
from .transport.tls import client_context, server_context
from .transport.urls import Endpoint, parse_url
from .transport.websocket import WebSocketHandshakeError, WebSocketOptions

__all__ = [
    "ConnectionClosed",
    "Endpoint",
    "Loop",
    "LoopClosed",
    "LoopConfig",
    "WebSocketHandshakeError",
    "WebSocketOptions",
    "client_context",
    "default_loop",
    "parse_url",
    "server_context",
]

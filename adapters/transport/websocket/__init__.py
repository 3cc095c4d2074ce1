"""WebSocket transport (``ws://``, ``wss://``): wsproto, which runs h11 for the
HTTP upgrade, over a TCP (or TLS) byte stream.

The transport plugs into the same driver loops as TCP. It keeps message
boundaries, so it speaks *message records* (:mod:`.messages`) through
``recv`` / ``send`` and says so with ``message_framed = True``; an engine for
a message transport reads and writes those records. docs/adapters.md has the
contract.

* Client: ``open_websocket`` connects and completes the upgrade before it
  returns (blocking, bounded by the connect timeout), so a refused upgrade
  surfaces as :class:`WebSocketHandshakeError` carrying the HTTP status.
* Server: ``WebSocketListener.accept`` returns at once; the upgrade is read
  and answered inside ``recv`` (an accept loop is never blocked by a slow
  client). Wrong path: 404; not an upgrade: 400; ``authorize`` may refuse
  with any status.
* Pings are answered here; engines never see them (except the pongs of their
  own PING records). Messages bigger than ``max_message_size`` close the
  connection with 1009; broken WebSocket framing with 1002 (wsproto's
  verdict); invalid UTF-8 in a text message with 1007.
* Extensions (permessage-deflate) are not negotiated: compression would make
  ``max_message_size`` a limit on compressed bytes only.

Modules: :mod:`.transport` (the transport and listener; needs the ``ws``
extra: wsproto and h11), :mod:`.handshake` (the client's upgrade),
:mod:`.frames` (the fast path for whole data frames), :mod:`.messages` (the
record format engines speak), :mod:`.options` (options and errors; this
package exports them and imports no wsproto, so ``WebSocketOptions`` is
available without the extra).
"""

from __future__ import annotations

from .options import (
    DEFAULT_MAX_MESSAGE_SIZE,
    Authorize,
    HandshakeRequest,
    WebSocketHandshakeError,
    WebSocketOptions,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "Authorize",
    "HandshakeRequest",
    "WebSocketHandshakeError",
    "WebSocketOptions",
]

"""Options, handshake request and handshake error of the WebSocket transport
(``websocket``), kept apart so the transport module stays readable; import
them from ``sansrs.adapters.transport.websocket``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "Authorize",
    "HandshakeRequest",
    "WebSocketHandshakeError",
    "WebSocketOptions",
]

#: Largest incoming message by default: the largest RSocket frame (16 MiB - 1)
#: and then some.
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HandshakeRequest:
    """What a client asked for in its upgrade request (given to ``authorize``)."""

    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    subprotocols: tuple[str, ...]
    peer: str

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


Authorize = Callable[[HandshakeRequest], "int | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSocketOptions:
    """Options of a WebSocket client or server (docs/adapters.md has the table).

    - ``subprotocols``: client: offered; server: accepted (the first one the
      client offers that is in this list wins; none offered or none matching:
      no subprotocol).
    - ``extra_headers``: client: extra request headers (e.g. Authorization);
      server: extra response headers of the 101.
    - ``max_message_size``: largest incoming message, reassembled; bigger
      closes with 1009. Default 16 MiB.
    - ``authorize``: server: ``authorize(request)`` returns None to accept or
      an HTTP status (e.g. 401, 403) to refuse the upgrade.
    - ``text_lines``: consecutive whole text messages reach the engine as one
      TEXT_LINES record (each message followed by 0xFF) instead of a
      TEXT_RUN (each behind its length): for an engine that splits them
      with one C call (Ditto's). Default False.
    - ``binary_spans``: a client's batches of equal binary messages reach
      the engine as BINARY_SPAN records, each message behind the header it
      arrived with, instead of BINARY_RUNs re-headed with lengths: for an
      engine whose core cuts them where they lie (RSocket's, which turns it
      on); a read that is nothing but such frames comes as it arrived, a
      BINARY_FRAMES chunk (reads are then sized to end where a frame does).
      Default False.
    """

    subprotocols: tuple[str, ...] = ()
    extra_headers: tuple[tuple[str, str], ...] = ()
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    authorize: Authorize | None = None
    text_lines: bool = False
    binary_spans: bool = False

    def __post_init__(self) -> None:
        if self.max_message_size < 1:
            raise ValueError("max_message_size must be >= 1")
        for name, value in self.extra_headers:
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError("extra_headers are (name, value) pairs of str")


class WebSocketHandshakeError(ConnectionError):
    """The WebSocket upgrade failed. ``status`` is the HTTP status of a refusal
    (e.g. 401, 404), None if the peer never answered with HTTP."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        body: bytes = b"",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers
        self.body = body


def str_headers(headers: object) -> tuple[tuple[str, str], ...]:
    """wsproto's header pairs (bytes or str) as str pairs (latin-1, as HTTP)."""
    out: list[tuple[str, str]] = []
    for name, value in headers:  # type: ignore[attr-defined]
        out.append((text_of(name), text_of(value)))
    return tuple(out)


def raw_headers(headers: tuple[tuple[str, str], ...]) -> list[tuple[bytes, bytes]]:
    """str header pairs as the bytes pairs wsproto sends."""
    return [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]


def text_of(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1")
    return str(value)

"""What a peer's first bytes look like when they are not the protocol a
connection expected: the words an error uses to name a protocol or
transport mismatch (a TCP client on a WebSocket or HTTP server, plaintext
on a TLS server, one wire protocol against another). Nothing here decides
anything: a protocol engine that found its peer's opening wrong asks for
the description to put in its error."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SHOWN", "describe_bytes", "looks_like_http"]

#: Bytes of the peer's opening shown in an error, at most.
SHOWN = 16


def looks_like_http(data: bytes | bytearray) -> bool:
    """An HTTP/1.x response line (a WebSocket or HTTP server answering)."""
    return bytes(data[:5]) == b"HTTP/"


def _guess(data: bytes) -> str | None:
    if looks_like_http(data):
        line = data.split(b"\r\n", 1)[0][:60].decode("latin-1")
        return f"an HTTP response ({line!r}): an HTTP or WebSocket server? (a ws:// URL)"
    if len(data) >= 2 and data[0] in (0x15, 0x16) and data[1] == 0x03:
        return "a TLS record: a TLS server? (a tls:// or wss:// URL)"
    return None


def describe_bytes(
    data: bytes | bytearray, guess: Callable[[bytes], str | None] | None = None
) -> str:
    """``data`` (the first bytes a peer sent) for an error message: how
    many, the first of them in hex, and what they look like (``guess``:
    the protocol's own guesses first, e.g. another wire protocol's opening)."""
    raw = bytes(data)
    shown = raw[:SHOWN].hex(" ") + (" ..." if len(raw) > SHOWN else "")
    what = (guess(raw) if guess is not None else None) or _guess(raw)
    unit = "byte" if len(raw) == 1 else "bytes"
    text = f"{len(raw)} {unit} ({shown})"
    return f"{text}, which look like {what}" if what else text

"""A scripted WebSocket client on a plain socket, for tests whose peer must
write exactly the bytes it chooses: the upgrade (RFC 6455's sample key),
masked text messages, and the server's text messages as JSON."""

from __future__ import annotations

import json
import socket
from typing import Any

__all__ = ["masked_text", "text_messages", "upgrade"]

_KEY = b"\x11\x22\x33\x44"


def upgrade(sock: socket.socket, path: str) -> None:
    """Send the upgrade request for ``path``; the server must answer 101."""
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "upgrade refused"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head[:80]


def masked_text(text: str) -> bytes:
    """One text frame, masked as a client's must be."""
    payload = text.encode()
    masked = bytes(b ^ _KEY[i % 4] for i, b in enumerate(payload))
    n = len(payload)
    head = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
    return head + _KEY + masked


def text_messages(sock: socket.socket, count: int) -> list[Any]:
    """The next ``count`` text messages from the server (unmasked frames of
    at most 64 KiB), each parsed as JSON; a socket timeout if they do not come."""
    buf, out = b"", []
    while len(out) < count:
        while True:
            if len(buf) >= 2:
                n, head = buf[1] & 0x7F, 2
                if n == 126 and len(buf) >= 4:
                    n, head = int.from_bytes(buf[2:4], "big"), 4
                if n != 126 and len(buf) >= head + n:
                    out.append(json.loads(buf[head : head + n]))
                    buf = buf[head + n :]
                    break
            chunk = sock.recv(65536)
            assert chunk, "the server closed"
            buf += chunk
    return out

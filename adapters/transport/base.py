"""What drivers know of a transport: a non-blocking byte (or message-record)
stream, and a listener that accepts them. Drivers never look at which kind
they hold."""

from __future__ import annotations

from typing import Protocol

from .urls import Endpoint

__all__ = ["Listener", "Transport"]


class Transport(Protocol):
    """A bidirectional byte stream driven by a non-blocking loop.

    A transport may also have ``send_pieces(pieces)``: ``send`` of the
    pieces' concatenation without joining them (a plain socket's
    ``sendmsg``); it writes a leading part of them, at most ``MAX_PIECES``
    (``adapters.transport.tcp``) pieces, and returns the bytes written."""

    peer: str

    def fileno(self) -> int: ...
    def recv(self, max_bytes: int = ...) -> bytes: ...
    def send(self, data: bytes | bytearray | memoryview) -> int: ...
    def shutdown_write(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


class Listener(Protocol):
    endpoint: Endpoint

    def fileno(self) -> int: ...
    def accept(self) -> Transport | None: ...
    def close(self) -> None: ...

"""The two error types every sans-IO core raises.

``LocalProtocolError``: our caller misused the API (for example sent a PAYLOAD
beyond the peer's credit). ``RemoteProtocolError``: the peer sent something
invalid; it carries the protocol's error code, and a connection that raises it
has already queued the reply the spec asks for (e.g. an RSocket ERROR frame).
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class of both protocol error types."""

    def __init__(self, message: str, error_code: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, error_code={self.error_code:#x})"


class LocalProtocolError(ProtocolError):
    """The application asked for something the protocol state does not allow."""


class RemoteProtocolError(ProtocolError):
    """The peer violated the protocol; ``error_code`` is the code to answer with."""

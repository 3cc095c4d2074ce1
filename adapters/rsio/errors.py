"""The errors of the rsio adapters, one hierarchy:

- :class:`RsioError`: an onError the peer's publisher signalled on one
  subscription (an application error, not a protocol error);
- ``sansrs.adapters.drive.ConnectionClosed``: the connection is gone (a
  goodbye with a reason, a lost transport, a protocol error);
- ``sansrs.rsio.LocalProtocolError`` / ``RemoteProtocolError`` (the core):
  this side misused the protocol / the peer broke it.
"""

from __future__ import annotations

__all__ = ["RsioError"]


class RsioError(Exception):
    """An onError from the peer's publisher (``message`` is its text)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

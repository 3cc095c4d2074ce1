"""The errors of the RSocket extensions: one of each core kind.

- :class:`MetadataDecodeError` (a ``RemoteProtocolError``): metadata from the
  peer breaks an extension's format (a truncated entry, a reserved
  well-known id, a bad length, text that is not UTF-8 / US-ASCII).
  ``error_code`` is INVALID (0x204), the stream error a responder answers
  such a request with; ``extension`` names the format.
- :class:`MetadataEncodeError` (a ``LocalProtocolError``): our caller asked
  for metadata the format cannot carry (a 256-byte routing tag, a 129-byte
  MIME name, a 64 KiB user name).

No other exception leaves a decoder, whatever the bytes.
"""

from __future__ import annotations

from ..._errors import LocalProtocolError, RemoteProtocolError
from .._frames import ErrorCode

__all__ = ["MetadataDecodeError", "MetadataEncodeError"]


class MetadataDecodeError(RemoteProtocolError):
    """The peer's metadata is malformed for ``extension``."""

    def __init__(self, extension: str, message: str) -> None:
        super().__init__(f"{extension}: {message}", ErrorCode.INVALID)
        self.extension = extension


class MetadataEncodeError(LocalProtocolError, ValueError):
    """The value cannot be encoded as ``extension`` metadata. Also a
    ``ValueError``: it is a bad argument."""

    def __init__(self, extension: str, message: str) -> None:
        super().__init__(f"{extension}: {message}")
        self.extension = extension

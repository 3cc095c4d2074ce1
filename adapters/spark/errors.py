"""The errors of the Spark adapters: a remote sink or source refused or
failed (the peer's ERROR message is in the text); a malformed wire record is
``_wire.WireError``."""

from __future__ import annotations

__all__ = ["SinkError", "SourceError"]


class SinkError(RuntimeError):
    """The sink refused a write (its ERROR message is in the text)."""


class SourceError(RuntimeError):
    """The source refused or failed a read (its ERROR message is in the text)."""

"""The errors of the Spark adapters: a remote sink or source refused or
failed (the peer's ERROR message is in the text); a sink refused to stage
more (its limits); a malformed wire record is ``_wire.WireError``."""

from __future__ import annotations

__all__ = ["SinkError", "SourceError", "StagingLimitError"]


class SinkError(RuntimeError):
    """The sink refused a write (its ERROR message is in the text)."""


class SourceError(RuntimeError):
    """The source refused or failed a read (its ERROR message is in the text)."""


class StagingLimitError(RuntimeError):
    """Raised by a sink: staging more would pass one of its byte budgets
    (``SinkConfig.max_staged`` / ``max_writer_staged``). The writer receives
    the message as a :class:`SinkError` and its task fails."""

"""The drivers' errors: one word for one thing.

:class:`ConnectionClosed` means exactly this: *the connection is gone* (closed
by either side, lost, timed out or failed), so a call that needs it cannot
complete. Its message says why. Every driver and every protocol package raises
it for that and for nothing else; an error the peer reports on one stream is
the protocol's own error type (``RSocketError``, ``RsioError``,
``DittoRemoteError``), never this.
"""

from __future__ import annotations

__all__ = ["ConnectionClosed", "LoopClosed", "seconds"]


class ConnectionClosed(ConnectionError):
    """The connection is gone; outstanding and new calls on it fail with this
    (the message says why: closed by the peer, lost, timed out, failed)."""


class LoopClosed(ConnectionClosed):
    """The driver loop has stopped, so the connections it drove are gone and
    nothing more can be added to it."""


def seconds(value: float) -> str:
    """A duration for a message: three significant digits, whole seconds
    from 100 s (``2.9997537`` -> ``"3 s"``, ``0.25`` -> ``"0.25 s"``)."""
    if value >= 100:
        return f"{value:.0f} s"
    return f"{value:.3g} s"

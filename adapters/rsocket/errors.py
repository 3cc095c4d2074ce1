"""The errors of the RSocket adapters, one hierarchy:

- :class:`RSocketError`: an ERROR frame on a stream (from the peer, or one a
  handler's exception becomes); :class:`ApplicationError` is its
  APPLICATION_ERROR (0x201) case, the one handlers raise.
- ``sansrs.adapters.drive.ConnectionClosed``: the connection is gone.
- ``sansrs.rsocket.LocalProtocolError`` / ``RemoteProtocolError`` (the core):
  this side misused the protocol / the peer broke it.

An application error from the peer is an :class:`RSocketError`, never a
protocol error.
"""

from __future__ import annotations

from sansrs.rsocket import ErrorCode

__all__ = ["ApplicationError", "RSocketError", "error_for_exception", "setup_rejection"]

SETUP_ERROR_CODES = frozenset(
    {ErrorCode.INVALID_SETUP, ErrorCode.UNSUPPORTED_SETUP, ErrorCode.REJECTED_SETUP}
)
STREAM_ERROR_CODES = frozenset(
    {ErrorCode.APPLICATION_ERROR, ErrorCode.REJECTED, ErrorCode.CANCELED, ErrorCode.INVALID}
)


class RSocketError(Exception):
    """An ERROR frame from the peer (or one to send): ``error_code`` and ``message``."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @property
    def code_name(self) -> str:
        try:
            return ErrorCode(self.error_code).name
        except ValueError:
            return f"{self.error_code:#x}"

    def __str__(self) -> str:
        return f"{self.code_name} ({self.error_code:#x}): {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.error_code:#x}, {self.message!r})"


class ApplicationError(RSocketError):
    """APPLICATION_ERROR (0x201). Raise it (or any exception) from a handler."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.APPLICATION_ERROR, message)


def error_for_exception(exc: BaseException) -> tuple[int, str]:
    """The (code, message) of the ERROR frame a handler exception becomes."""
    if isinstance(exc, RSocketError) and exc.error_code in STREAM_ERROR_CODES:
        return exc.error_code, exc.message
    message = str(exc) or type(exc).__name__
    return ErrorCode.APPLICATION_ERROR, message


def setup_rejection(exc: BaseException) -> tuple[int, str]:
    """The (code, message) of the ERROR a SETUP hook's exception becomes:
    an :class:`RSocketError` with a setup code keeps it, anything else is
    REJECTED_SETUP."""
    if isinstance(exc, RSocketError):
        # Its own text, not "APPLICATION_ERROR (0x201): ..." inside the
        # REJECTED_SETUP: the code it carried means nothing to a SETUP.
        code = exc.error_code if exc.error_code in SETUP_ERROR_CODES else ErrorCode.REJECTED_SETUP
        return code, exc.message or type(exc).__name__
    return ErrorCode.REJECTED_SETUP, str(exc) or type(exc).__name__

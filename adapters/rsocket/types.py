"""Application-facing RSocket values shared by the synchronous API, the
engine that binds the core to a driver, and handlers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sansrs.rsocket import ErrorCode

if TYPE_CHECKING:
    from .client import RSocketPeer

__all__ = [
    "ApplicationError",
    "Payload",
    "RSocketError",
    "Request",
    "as_payload",
]

STREAM_ERROR_CODES = frozenset(
    {ErrorCode.APPLICATION_ERROR, ErrorCode.REJECTED, ErrorCode.CANCELED, ErrorCode.INVALID}
)


class Payload(NamedTuple):
    """Data and optional metadata of one RSocket payload. A named tuple: built
    once per item on the hot path, where it is several times cheaper than a
    frozen dataclass."""

    data: bytes = b""
    metadata: bytes | None = None


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


def _bytes(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


_new_tuple = tuple.__new__


def as_payload(value: object, metadata: object = None) -> Payload:
    """A handler's item or a caller's argument as a :class:`Payload`:
    ``Payload``, ``bytes``/``str`` (data), or ``(data, metadata)``."""
    if type(value) is Payload:
        return value
    if type(value) is bytes and metadata is None:  # the common case, first
        return _new_tuple(Payload, (value, None))  # Payload(value) minus its __new__
    if isinstance(value, tuple) and len(value) == 2:
        data, md = value
        return Payload(_bytes(data, "data"), None if md is None else _bytes(md, "metadata"))
    md = None if metadata is None else _bytes(metadata, "metadata")
    return Payload(_bytes(value, "data"), md)


def is_single_value(value: object) -> bool:
    """Values a stream handler may return to mean "one item"."""
    return isinstance(value, bytes | str | bytearray | memoryview | Payload | tuple)


@dataclass(frozen=True, slots=True)
class Request:
    """What a handler receives: the request payload and the peer that sent it
    (a requester too: both sides of a connection may request)."""

    data: bytes
    metadata: bytes | None
    peer: RSocketPeer


# Same layout as Request: filled with plain stores, then made a Request by
# __class__ assignment (as the core's events are, see sansrs.rsocket.events).
_RequestBuilder: Any = type("_RequestBuilder", (), {"__slots__": Request.__dict__["__slots__"]})


def new_request(data: bytes, metadata: bytes | None, peer: RSocketPeer) -> Request:
    """``Request(data, metadata, peer)`` without the frozen ``__init__`` (one
    per request served)."""
    request = object.__new__(_RequestBuilder)
    request.data = data
    request.metadata = metadata
    request.peer = peer
    request.__class__ = Request
    return request  # type: ignore[no-any-return]


class Handler(Protocol):
    """Optional methods of a responder; a missing one answers REJECTED.

    Each may return a value, an iterable, a generator or a Publisher (streams),
    and is called on the connection's thread except as noted in docs/adapters.md.
    """

    def request_response(self, request: Request) -> Any: ...

"""Application-facing RSocket values: the payload, the request a handler
receives, and the handler's shape. Shared by the synchronous and asyncio
APIs, the engine and handlers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

__all__ = ["Handler", "Payload", "Request", "Setup", "is_single_value"]


class Payload(NamedTuple):
    """Data and optional metadata of one RSocket payload. A named tuple: built
    once per item on the hot path, where it is several times cheaper than a
    frozen dataclass."""

    data: bytes = b""
    metadata: bytes | None = None


def is_single_value(value: object) -> bool:
    """Values a stream handler may return to mean "one item"."""
    return isinstance(value, bytes | str | bytearray | memoryview | Payload | tuple)


@dataclass(frozen=True, slots=True)
class Request:
    """What a handler receives: the request payload and the peer that sent it
    (a requester too: both sides of a connection may request). ``peer`` is an
    ``RSocketPeer`` under the synchronous API and an ``AsyncPeer`` under
    asyncio (typed ``Any``: one handler class may serve both)."""

    data: bytes
    metadata: bytes | None
    peer: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """A client's SETUP as a server's ``authenticate`` hook sees it: the
    SETUP's data and metadata with their MIME types, and the connecting
    ``peer`` (``peer.transport`` has the address and, over TLS, the verified
    client certificate: ``peer.transport.peer_certificate``)."""

    data: bytes
    metadata: bytes | None
    data_mime_type: str
    metadata_mime_type: str
    peer: Any


class Handler(Protocol):
    """Optional methods of a responder; a missing one answers REJECTED.

    Each may return a value, an iterable, a generator or a Publisher (streams),
    and is called on the connection's thread except as noted in docs/adapters.md.
    """

    def request_response(self, request: Request) -> Any: ...

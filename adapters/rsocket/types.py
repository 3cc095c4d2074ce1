"""Application-facing RSocket values: the payload, the request a handler
receives, and the handler's shape. Shared by the synchronous and asyncio
APIs, the engine and handlers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from sansrs.rsocket.extensions import CompositeMetadata, ZipkinTrace

__all__ = ["Handler", "Payload", "Request", "RoutedRequest", "is_single_value"]


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


@dataclass(frozen=True, slots=True)
class RoutedRequest:
    """What a route's handler receives (:class:`~.routing.Router`): the
    request as :class:`Request` has it (``data``, ``metadata``, ``peer``),
    plus the route it was sent to and the template's ``variables``
    (``users.{id}.get`` called as ``users.42.get``: ``{"id": "42"}``), the
    authenticated ``principal`` (what the router's ``authenticate`` hook
    returned for the request's or the SETUP's credentials; None without),
    the stream's ``data_mime`` type (its own, else the SETUP's) and the
    decoded composite metadata."""

    data: bytes
    metadata: bytes | None
    peer: Any
    route: str
    variables: Mapping[str, str]
    principal: Any
    data_mime: str
    composite: CompositeMetadata

    @property
    def accept(self) -> tuple[str, ...]:
        """The response data MIME types the requester accepts (may be empty)."""
        return self.composite.accept

    @property
    def tracing(self) -> ZipkinTrace | None:
        return self.composite.tracing


class Handler(Protocol):
    """The methods a responder may have, each optional: a missing request
    method answers REJECTED (docs/adapters.md, "Handlers" and "The SETUP
    hook").

    Each request method may return a value, an iterable, a generator or a
    Publisher (streams); under asyncio also a coroutine or an async
    iterable. They are called on the connection's thread (the event loop
    under asyncio) except as noted in docs/adapters.md.
    """

    def request_response(self, request: Request) -> Any: ...

    def request_stream(self, request: Request) -> Any: ...

    def request_channel(self, request: Request, inbound: Any) -> Any: ...

    def fire_and_forget(self, request: Request) -> Any: ...

    def fire_and_forget_many(self, requests: list[Request]) -> Any:
        """Fire-and-forgets that arrived together (a run of REQUEST_FNF in
        one read), in order: one call for them all. Without it each goes to
        ``fire_and_forget``; returning ``NotImplemented`` asks for that too.
        If it raises, the error is logged once and every request of the
        list counts as failed (interceptors)."""
        ...

    def metadata_push(self, metadata: bytes) -> Any: ...

    def accept_setup(self, setup: Any, peer: Any) -> Any:
        """Server: called with the client's SETUP (``SetupReceived``: MIME
        types, data, metadata, keepalive, lease and resume flags) before it
        is accepted. Return the handler for this connection (None: keep
        this one); raise to refuse it (ERROR[REJECTED_SETUP], or the setup
        code of an ``RSocketError``; the connection closes). ``async def``
        only under the asyncio server, which awaits it (the synchronous
        ones refuse such a handler with ``TypeError``)."""

    def channel_window(self, metadata: bytes | None) -> tuple[int, int | None]:
        """A channel's inbound window for a request with ``metadata``:
        (prefetch, batch). Without it: the ``channel_prefetch`` (default
        256) and ``channel_batch`` (default half the window) attributes."""
        ...

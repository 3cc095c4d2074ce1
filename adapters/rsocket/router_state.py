"""What a :class:`~.routing.Router` is made of, as its concerns kept in
modules of their own see it: the routes registered (:class:`Route`), what a
request's metadata resolves to (:class:`Lookup`), and the router and its
per-connection state as :mod:`.router_connection` (a connection's requests),
:mod:`.router_fnf` (the requests nobody answers) and :mod:`.router_auth`
(credentials) work on them: protocols, so that those modules type against
the router without importing it (no cycle)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from sansrs.rsocket.extensions import Authentication, CompositeMetadata

from .errors import RSocketError
from .types import Request, RoutedRequest

__all__ = ["DASHED", "KINDS", "ConnectionState", "Lookup", "Route", "Routed", "RouterState"]

#: The interaction models a route may have a handler for (``setup``: the
#: SETUP's route, as Spring's ``@ConnectMapping``).
KINDS = (
    "request_response",
    "request_stream",
    "request_channel",
    "fire_and_forget",
    "metadata_push",
    "setup",
)
DASHED = {k: k.replace("_", "-") for k in KINDS}


@dataclass(frozen=True, slots=True)
class Route:
    """One registered handler."""

    kind: str
    route: str
    handler: Callable[..., Any]
    produces: str | None
    authenticated: bool
    #: A channel route's inbound window (None: the router's).
    prefetch: int | None = None
    batch: int | None = None
    #: A fire-and-forget route whose handler takes a list of requests.
    many: bool = False



@dataclass(frozen=True, slots=True)
class Lookup:
    """What a request's metadata resolves to for one interaction model
    (cached by the metadata bytes): the decoded metadata, the route and
    what matched it (None: no handler)."""

    composite: CompositeMetadata
    route: str | None
    found: Route | None
    variables: Mapping[str, str]


#: A request's route and what its handler gets; None: the fallback's; a
#: coroutine giving either: an async ``authenticate`` must run first.
Routed: TypeAlias = (
    "tuple[Route, RoutedRequest]"
    " | Coroutine[Any, Any, tuple[Route, RoutedRequest] | None]"
    " | None"
)



class RouterState(Protocol):
    """The :class:`~.routing.Router` as a connection and the credential
    checks see it."""

    authenticate: Callable[[Authentication], Any] | None
    require_auth: bool
    channel_prefetch: int
    channel_batch: int | None
    _async_auth: bool
    _fallback: object
    _fallback_factory: Callable[[Any], object] | None
    _caches: dict[str, dict[bytes, Lookup]]

    def _lookup(self, kind: str, metadata: bytes) -> Lookup: ...
    def _authenticate(self, auth: Authentication, code: int) -> Any: ...
    async def _authenticate_later(self, auth: Authentication, code: int) -> Any: ...
    def _unknown(self, kind: str, route: str) -> RSocketError: ...


class ConnectionState(Protocol):
    """A :class:`~.router_connection.RouterConnection` as its fire-and-forget
    paths (:mod:`.router_fnf`, bound in its class) see it."""

    router: RouterState
    peer: object
    principal: Any
    composite: bool
    _fire_direct: Callable[[Request], Any] | None

    def fallback(self) -> object: ...
    def _routed(self, kind: str, request: Request) -> Routed: ...
    def _resolve(
        self, kind: str, request: Request, hit: Lookup, principal: Any
    ) -> tuple[Route, RoutedRequest] | None: ...
    def _fire(self, kind: str, request: Request, fallback_argument: object) -> Any: ...
    async def _fire_later(
        self,
        kind: str,
        later: Coroutine[Any, Any, tuple[Route, RoutedRequest] | None],
        fallback_argument: object,
    ) -> None: ...
    def _fire_routed(
        self, kind: str, routed: tuple[Route, RoutedRequest] | None, fallback_argument: object
    ) -> Any: ...

"""A :class:`~.routing.Router`'s state for one connection and the handler
the engine calls for it: the SETUP's principal and data MIME type, the
fallback, each request routed to its handler (or the fallback), checked
and answered (:mod:`.router_fnf`: the requests nobody answers)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import (
    COMPOSITE_METADATA,
    Authentication,
    compose,
    needs_response_mime,
)

from . import router_fnf
from .errors import ApplicationError, RSocketError
from .fast import new_routed_request
from .router_answers import declare_mime, items_later, single_later
from .router_state import Lookup, Route, Routed, RouterState
from .types import Request, RoutedRequest

__all__ = ["RouterConnection"]


class RouterConnection:
    """The router's state for one connection, and the handler the engine
    calls for it: the SETUP's principal and data MIME type, the fallback."""

    __slots__ = (
        "_fallback",
        "_fire_direct",
        "composite",
        "peer",
        "principal",
        "router",
        "setup_data_mime",
    )

    def __init__(
        self, router: RouterState, peer: object, setup_data_mime: str, composite: bool
    ) -> None:
        self.router = router
        self.peer = peer
        self.setup_data_mime = setup_data_mime
        #: The SETUP declared composite metadata: requests are routed.
        self.composite = composite
        self.principal: Any = None
        self._fallback: object = None
        #: The fallback's fire_and_forget (or a no-op), found on first use.
        self._fire_direct: Callable[[Request], Any] | None = None

    def channel_window(self, metadata: bytes | None) -> tuple[int, int | None]:
        """The inbound window of a channel with ``metadata`` (the engine asks
        before it grants the first REQUEST_N): its route's ``prefetch`` /
        ``batch``, else the router's. Metadata that does not resolve gets
        the router's; the request's own answer says why."""
        router = self.router
        found = None
        if self.composite and metadata:
            kind = "request_channel"
            with contextlib.suppress(RSocketError):
                found = (router._caches[kind].get(metadata) or router._lookup(kind, metadata)).found
        if found is None or (found.prefetch is None and found.batch is None):
            return router.channel_prefetch, router.channel_batch
        prefetch = router.channel_prefetch if found.prefetch is None else found.prefetch
        return prefetch, found.batch

    def fallback(self) -> object:
        if self._fallback is None:
            router = self.router
            factory = router._fallback_factory
            self._fallback = factory(self.peer) if factory is not None else router._fallback
        return self._fallback

    def _routed(self, kind: str, request: Request) -> Routed:
        """The route and the request its handler gets; None: the fallback's
        (which, when the router requires authentication, needs a principal too)."""
        metadata = request.metadata
        router = self.router
        if not self.composite or not metadata:
            if self.principal is None and router.require_auth:
                raise RSocketError(ErrorCode.REJECTED, "authentication required")
            return None
        hit = router._caches[kind].get(metadata) or router._lookup(kind, metadata)
        meta = hit.composite
        principal = self.principal
        if meta.auth is not None and router.authenticate is not None:
            if router._async_auth:  # the answer waits for the awaited check
                return self._routed_later(kind, request, hit, meta.auth)
            principal = router._authenticate(meta.auth, ErrorCode.REJECTED)
        return self._resolve(kind, request, hit, principal)

    async def _routed_later(
        self, kind: str, request: Request, hit: Lookup, auth: Authentication
    ) -> tuple[Route, RoutedRequest] | None:
        principal = await self.router._authenticate_later(auth, ErrorCode.REJECTED)
        return self._resolve(kind, request, hit, principal)

    def _resolve(
        self, kind: str, request: Request, hit: Lookup, principal: Any
    ) -> tuple[Route, RoutedRequest] | None:
        router = self.router
        meta = hit.composite
        found = hit.found
        if principal is None and (found.authenticated if found else router.require_auth):
            raise RSocketError(ErrorCode.REJECTED, "authentication required")
        if hit.route is None:
            return None
        if found is None:
            raise router._unknown(kind, hit.route)
        data_mime = meta.data_mime or self.setup_data_mime
        routed = new_routed_request(request, hit.route, hit.variables, principal, data_mime, meta)
        return found, routed

    def _no_route(self, name: str) -> object:
        method = getattr(self.fallback(), name, None)
        if callable(method):
            return method
        if not self.composite:
            raise ApplicationError(
                f"this responder routes requests: declare {COMPOSITE_METADATA} in SETUP"
                " and send a routing entry"
            )
        raise ApplicationError("no route in the request's metadata")

    def _answer(self, route: Route, request: RoutedRequest, result: Any) -> Any:
        """``result``, declaring the route's data MIME type where the
        requester asked for another."""
        produces = route.produces
        assert produces is not None
        if not needs_response_mime(request.composite, self.setup_data_mime, produces):
            return result
        return declare_mime(result, compose(data_mime=produces))

    def _respond(self, kind: str, request: Request, *inbound: Any) -> Any:
        routed = self._routed(kind, request)
        if isinstance(routed, Coroutine):  # an async authenticate, awaited first
            later = routed
            answer = lambda r: self._handle(kind, request, r, inbound)  # noqa: E731
            if kind == "request_response":
                return single_later(later, answer)
            return items_later(later, answer)
        return self._handle(kind, request, routed, inbound)

    def _handle(
        self,
        kind: str,
        request: Request,
        routed: tuple[Route, RoutedRequest] | None,
        inbound: tuple[Any, ...],
    ) -> Any:
        if routed is None:
            return self._no_route(kind)(request, *inbound)  # type: ignore[operator]
        route, req = routed
        result = route.handler(req, *inbound)
        return result if route.produces is None else self._answer(route, req, result)

    def _unrouted(self, request: Request) -> bool:
        """A request that cannot name a route (no metadata) and needs no
        principal beyond the SETUP's: it goes to the fallback at once. What
        pays for it: clients declare composite metadata by default, so every
        request to ``sansrs serve`` passes here; through the whole routing
        path a fire-and-forget cost 347 bytecodes on the server instead of 260
        (``fnf16``: 3.2 -> 4.1 µs of server CPU each); 282 with this
        (docs/performance.md, "Items at the application's end")."""
        return not request.metadata and (
            self.principal is not None or not self.router.require_auth
        )

    def request_response(self, request: Request) -> Any:
        if self._unrouted(request):
            return self._no_route("request_response")(request)  # type: ignore[operator]
        return self._respond("request_response", request)

    def request_stream(self, request: Request) -> Any:
        if self._unrouted(request):
            return self._no_route("request_stream")(request)  # type: ignore[operator]
        return self._respond("request_stream", request)

    def request_channel(self, request: Request, inbound: Any) -> Any:
        if self._unrouted(request):
            return self._no_route("request_channel")(request, inbound)  # type: ignore[operator]
        return self._respond("request_channel", request, inbound)


    # -- the requests nobody answers (.router_fnf) -------------------------------
    _fire = router_fnf.fire
    _fire_later = router_fnf.fire_later
    _fire_routed = router_fnf.fire_routed
    fire_and_forget = router_fnf.fire_and_forget
    fire_and_forget_many = router_fnf.fire_and_forget_many
    metadata_push = router_fnf.metadata_push

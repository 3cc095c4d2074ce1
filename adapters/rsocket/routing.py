"""A request router: handlers registered per route and interaction model,
as Spring's ``@MessageMapping`` and rsocket-py's ``RequestRouter`` do, with
authentication (docs/extensions.md).

    router = Router(authenticate=check_password)

    @router.response("users.{id}.get")   # also .stream, .channel, .fnf, .push, .setup
    def get_user(request: RoutedRequest) -> bytes:
        return load(request.variables["id"], request.principal)

    serve("tcp://127.0.0.1:7000", router)      # or aio.serve(...)

A :class:`Router` is a handler: ``serve(url, router)`` and ``aio.serve``
take it as they take any handler. At each SETUP it makes a
:class:`RouterConnection` for that connection (the SETUP's credentials
checked once, its data MIME type remembered, a ``fallback_factory``
handler made), through the engine's ``accept_setup`` hook.

A request is routed when the connection's SETUP declared composite metadata
(``message/x.rsocket.composite-metadata.v0``) and the request's metadata
carries a routing entry; the first tag is the route. Otherwise it goes to
the ``fallback`` handler (any handler of the usual shape), if there is one
(with a principal, when the router requires authentication). Answers:

- malformed composite metadata: ERROR[INVALID];
- credentials the ``authenticate`` hook refuses, or none where the route
  needs them: ERROR[REJECTED] (the handler never runs); at SETUP:
  ERROR[REJECTED_SETUP] and the connection closes;
- no handler for the route: ERROR[APPLICATION_ERROR] ``no handler for route
  'x'``; a route without a handler for this interaction model likewise,
  naming the models it has.

Routes whose handler answers in a data MIME type the requester did not ask
for (``produces=``) declare it in each answer's composite metadata, as the
per-stream data MIME spec requires.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
)
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import (
    COMPOSITE_METADATA,
    Authentication,
    CompositeMetadata,
    MetadataDecodeError,
    compose,
    decode_metadata,
    effective_data_mime,
    needs_response_mime,
)
from sansrs.streams import MapProcessor

from .errors import ApplicationError, RSocketError
from .fast import as_payload, new_routed_request
from .peer import check_prefetch
from .responder import CHANNEL_PREFETCH
from .routes import NO_VARIABLES, RouteTable
from .types import Payload, Request, RoutedRequest, is_single_value

__all__ = ["KINDS", "Route", "Router", "RouterConnection"]

log = logging.getLogger("sansrs.adapters.rsocket")
F = TypeVar("F", bound=Callable[..., Any])

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
_DASHED = {k: k.replace("_", "-") for k in KINDS}
OCTET_STREAM = "application/octet-stream"


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


@dataclass(frozen=True, slots=True)
class _Lookup:
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


class Router:
    """Routes requests to handlers by the route in their composite metadata.

    ``authenticate(auth) -> principal``: checks credentials (a
    :class:`~sansrs.rsocket.extensions.SimpleAuth`, ``BearerAuth`` or
    ``CustomAuth``) from SETUP or a request; raising (an ``RSocketError``'s
    message is sent, any other exception is logged and answered "authentication
    failed") or returning None refuses them. It runs on the connection's
    thread (or event loop): keep it quick. It may be ``async def`` under
    the asyncio server, which awaits it (a SETUP waits for its verdict; a
    request's answer too); such a router is :attr:`asyncio_only`, refused
    by the synchronous servers. ``require_auth`` (default: True
    when ``authenticate`` is given): every route needs a principal unless
    registered with ``authenticated=False``.
    ``fallback`` / ``fallback_factory(peer)``: the handler for requests
    without a route (today's handler style). ``cache_size``: decoded
    metadata kept per interaction model (requests to the same route repeat
    the same bytes; entries with credentials are never kept).
    ``channel_prefetch`` / ``channel_batch``: a channel's inbound window
    (per route: ``channel(route, prefetch=, batch=)``).
    """

    def __init__(
        self,
        *,
        authenticate: Callable[[Authentication], Any] | None = None,
        require_auth: bool | None = None,
        fallback: object = None,
        fallback_factory: Callable[[Any], object] | None = None,
        cache_size: int = 1024,
        channel_prefetch: int = CHANNEL_PREFETCH,
        channel_batch: int | None = None,
    ) -> None:
        if fallback is not None and fallback_factory is not None:
            raise TypeError("pass fallback or fallback_factory, not both")
        if cache_size < 0:
            raise ValueError("cache_size must be >= 0")
        self.authenticate = authenticate
        #: ``async def authenticate``: awaited (asyncio servers only).
        self._async_auth = _is_async(authenticate)
        self._async_setup = False
        self.require_auth = authenticate is not None if require_auth is None else require_auth
        self._fallback = fallback
        self._fallback_factory = fallback_factory
        self.cache_size = cache_size
        self.channel_prefetch = channel_prefetch
        self.channel_batch = channel_batch
        self._tables: dict[str, RouteTable[Route]] = {k: RouteTable() for k in KINDS}
        self._caches: dict[str, dict[bytes, _Lookup]] = {k: {} for k in KINDS}
        self._default: RouterConnection | None = None

    # -- registration ----------------------------------------------------------
    def add(
        self,
        kind: str,
        route: str,
        handler: Callable[..., Any],
        *,
        produces: str | None = None,
        authenticated: bool | None = None,
        prefetch: int | None = None,
        batch: int | None = None,
    ) -> None:
        """Register ``handler`` for ``route`` (a template) and ``kind`` (one of
        :data:`KINDS`). ``produces``: the data MIME type it answers in.
        ``authenticated``: whether it needs a principal (default: the
        router's ``require_auth``). ``prefetch`` / ``batch``: a channel
        route's inbound window (REQUEST_N with the request, then ``batch``
        more each time that many were consumed; default: the router's
        ``channel_prefetch`` / ``channel_batch``)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if (prefetch is not None or batch is not None) and kind != "request_channel":
            raise ValueError("prefetch and batch are a channel route's inbound window")
        if prefetch is not None:
            check_prefetch(prefetch)
        if batch is not None and batch < 1:
            raise ValueError("batch must be >= 1")
        if not callable(handler):
            raise TypeError(f"handler for {route!r} is not callable")
        needs = self.require_auth if authenticated is None else authenticated
        if needs and self.authenticate is None:
            raise ValueError(f"route {route!r} needs authentication: pass authenticate=")
        entry = Route(kind, route, handler, produces, needs, prefetch, batch)
        self._tables[kind].add(route, entry)
        if kind == "setup" and _is_async(handler):
            self._async_setup = True
        for cache in self._caches.values():
            cache.clear()

    def _decorator(
        self, kind: str, route: str, produces: str | None, authenticated: bool | None
    ) -> Callable[[F], F]:
        def register(handler: F) -> F:
            self.add(kind, route, handler, produces=produces, authenticated=authenticated)
            return handler

        return register

    def response(
        self, route: str, *, produces: str | None = None, authenticated: bool | None = None
    ) -> Callable[[F], F]:
        """Decorator: ``handler(request)`` answers request-response on ``route``."""
        return self._decorator("request_response", route, produces, authenticated)

    def stream(
        self, route: str, *, produces: str | None = None, authenticated: bool | None = None
    ) -> Callable[[F], F]:
        """Decorator: ``handler(request)`` returns the stream for ``route``."""
        return self._decorator("request_stream", route, produces, authenticated)

    def channel(
        self,
        route: str,
        *,
        produces: str | None = None,
        authenticated: bool | None = None,
        prefetch: int | None = None,
        batch: int | None = None,
    ) -> Callable[[F], F]:
        """Decorator: ``handler(request, inbound)`` returns the outbound stream;
        ``prefetch`` / ``batch``: this route's inbound window (see :meth:`add`)."""

        def register(handler: F) -> F:
            self.add(
                "request_channel",
                route,
                handler,
                produces=produces,
                authenticated=authenticated,
                prefetch=prefetch,
                batch=batch,
            )
            return handler

        return register

    def fnf(self, route: str, *, authenticated: bool | None = None) -> Callable[[F], F]:
        """Decorator: ``handler(request)`` takes fire-and-forgets on ``route``."""
        return self._decorator("fire_and_forget", route, None, authenticated)

    def push(self, route: str, *, authenticated: bool | None = None) -> Callable[[F], F]:
        """Decorator: ``handler(request)`` for a METADATA_PUSH whose composite
        metadata carries ``route`` (as rsocket-py routes them)."""
        return self._decorator("metadata_push", route, None, authenticated)

    def setup(self, route: str, *, authenticated: bool | None = None) -> Callable[[F], F]:
        """Decorator: ``handler(request)`` runs at a SETUP whose metadata
        carries ``route`` (``request.data``: the SETUP's data); raising
        rejects the connection (ERROR[REJECTED_SETUP])."""
        return self._decorator("setup", route, None, authenticated)

    def routes(self) -> dict[str, list[str]]:
        """Registered routes per interaction model."""
        return {k: t.routes() for k, t in self._tables.items() if t}

    @property
    def asyncio_only(self) -> bool:
        """An ``async def authenticate`` or ``setup`` route handler: only the
        asyncio server can await them (the synchronous ``serve`` and
        ``connect`` refuse this router with ``TypeError``)."""
        return self._async_auth or self._async_setup

    # -- connections ------------------------------------------------------------
    def accept_setup(self, setup: Any, peer: object) -> object:
        """The engine's SETUP hook: this connection's router, or an exception
        that rejects the SETUP (see :func:`~.errors.setup_rejection`). With
        async hooks (:attr:`asyncio_only`): a coroutine the asyncio server
        awaits before it accepts the SETUP."""
        if self.asyncio_only:
            return self._accept_setup_later(setup, peer)
        connection, meta = self._new_connection(setup, peer)
        if meta is None:
            return connection
        assert isinstance(connection, RouterConnection)
        if meta.auth is not None and self.authenticate is not None:
            connection.principal = self._authenticate(meta.auth, ErrorCode.REJECTED_SETUP)
        outcome = self._setup_route(connection, setup, meta)
        if inspect.isawaitable(outcome):  # an async handler registered some other way
            return _then(outcome, connection)
        return connection

    async def _accept_setup_later(self, setup: Any, peer: object) -> object:
        connection, meta = self._new_connection(setup, peer)
        if meta is None:
            return connection
        assert isinstance(connection, RouterConnection)
        if meta.auth is not None and self.authenticate is not None:
            auth = meta.auth
            connection.principal = await self._authenticate_later(auth, ErrorCode.REJECTED_SETUP)
        outcome = self._setup_route(connection, setup, meta)
        if inspect.isawaitable(outcome):
            await outcome
        return connection

    def _new_connection(
        self, setup: Any, peer: object
    ) -> tuple[object, CompositeMetadata | None]:
        """This connection's handler, and the SETUP's metadata when there are
        credentials or a route to look at (None: the handler is final)."""
        composite = setup.metadata_mime_type == COMPOSITE_METADATA
        connection = RouterConnection(self, peer, setup.data_mime_type, composite)
        if not composite and not self.require_auth:
            # Nothing to route on this connection: the fallback answers
            # directly, at no cost to today's handlers.
            fallback = connection.fallback()
            return (connection if fallback is None else fallback), None
        if not composite or not setup.metadata:
            return connection, None
        try:
            meta = decode_metadata(setup.metadata)
        except MetadataDecodeError as exc:
            raise RSocketError(ErrorCode.INVALID_SETUP, f"malformed metadata: {exc}") from None
        return connection, meta

    def _setup_route(
        self, connection: RouterConnection, setup: Any, meta: CompositeMetadata
    ) -> Any:
        """The SETUP's route handler, if any; its result (an awaitable to await)."""
        if meta.route is None:
            return None
        found = self._tables["setup"].match(meta.route)
        if found is None:
            return None
        route, variables = found
        if route.authenticated and connection.principal is None:
            raise RSocketError(ErrorCode.REJECTED_SETUP, "authentication required")
        request = Request(setup.data, setup.metadata, connection.peer)
        return route.handler(
            new_routed_request(
                request,
                meta.route,
                variables,
                connection.principal,
                effective_data_mime(meta, setup.data_mime_type),
                meta,
            )
        )

    def _connection(self) -> RouterConnection:
        """The state of a connection that had no SETUP hook (a client's own
        router, answering the server's requests)."""
        if self._default is None:
            self._default = RouterConnection(self, None, OCTET_STREAM, True)
        return self._default

    def _authenticate(self, auth: Authentication, code: int) -> Any:
        """The principal for ``auth`` (a plain ``authenticate``), or the
        refusal (``RSocketError`` with ``code``)."""
        assert self.authenticate is not None
        try:
            principal = self.authenticate(auth)
        except Exception as exc:
            raise _refusal(exc, code) from None
        if inspect.isawaitable(principal):  # never a principal: refuse, loudly
            getattr(principal, "close", lambda: None)()
            log.error("authenticate returned an awaitable; declare it async def")
            raise RSocketError(code, "authentication failed")
        return _principal(principal, code)

    async def _authenticate_later(self, auth: Authentication, code: int) -> Any:
        """:meth:`_authenticate` for an ``async def authenticate``: awaited."""
        assert self.authenticate is not None
        try:
            principal = await self.authenticate(auth)
        except Exception as exc:
            raise _refusal(exc, code) from None
        return _principal(principal, code)

    def _lookup(self, kind: str, metadata: bytes) -> _Lookup:
        """Decode and resolve (cached unless the metadata carries credentials)."""
        cache = self._caches[kind]
        hit = cache.get(metadata)
        if hit is not None:
            return hit
        try:
            meta = decode_metadata(metadata)
        except MetadataDecodeError as exc:
            raise RSocketError(ErrorCode.INVALID, f"malformed metadata: {exc}") from None
        route = meta.route
        found = None if route is None else self._tables[kind].match(route)
        hit = _Lookup(meta, route, *(found or (None, NO_VARIABLES)))
        if meta.auth is None and self.cache_size:
            if len(cache) >= self.cache_size:
                cache.clear()  # bounded; hot routes come back at once
            cache[metadata] = hit
        return hit

    def _unknown(self, kind: str, route: str) -> RSocketError:
        others = [_DASHED[k] for k in KINDS if k != kind and self._tables[k].match(route)]
        if others:
            return ApplicationError(
                f"route {route!r} has no {_DASHED[kind]} handler (it has {', '.join(others)})"
            )
        return ApplicationError(f"no handler for route {route!r}")

    # -- a Router is a handler too (a client's, or without SETUP hook) ---------
    def request_response(self, request: Request) -> Any:
        return self._connection().request_response(request)

    def request_stream(self, request: Request) -> Any:
        return self._connection().request_stream(request)

    def request_channel(self, request: Request, inbound: Any) -> Any:
        return self._connection().request_channel(request, inbound)

    def channel_window(self, metadata: bytes | None) -> tuple[int, int | None]:
        return self._connection().channel_window(metadata)

    def fire_and_forget(self, request: Request) -> Any:
        return self._connection().fire_and_forget(request)

    def metadata_push(self, metadata: bytes) -> Any:
        return self._connection().metadata_push(metadata)


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
        self, router: Router, peer: object, setup_data_mime: str, composite: bool
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
        self, kind: str, request: Request, hit: _Lookup, auth: Authentication
    ) -> tuple[Route, RoutedRequest] | None:
        principal = await self.router._authenticate_later(auth, ErrorCode.REJECTED)
        return self._resolve(kind, request, hit, principal)

    def _resolve(
        self, kind: str, request: Request, hit: _Lookup, principal: Any
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
                return _single_later(later, answer)
            return _items_later(later, answer)
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

    def _fire(self, kind: str, request: Request, fallback_argument: object) -> Any:
        """A request nobody answers: refusals are logged here."""
        try:
            routed = self._routed(kind, request)
        except RSocketError as exc:
            log.warning("%s dropped: %s", _DASHED[kind], exc)
            return None
        if isinstance(routed, Coroutine):  # an async authenticate: a task runs it
            return self._fire_later(kind, routed, fallback_argument)
        return self._fire_routed(kind, routed, fallback_argument)

    async def _fire_later(
        self,
        kind: str,
        later: Coroutine[Any, Any, tuple[Route, RoutedRequest] | None],
        fallback_argument: object,
    ) -> None:
        try:
            routed = await later
        except RSocketError as exc:
            log.warning("%s dropped: %s", _DASHED[kind], exc)
            return
        result = self._fire_routed(kind, routed, fallback_argument)
        if inspect.isawaitable(result):
            await result

    def _fire_routed(
        self, kind: str, routed: tuple[Route, RoutedRequest] | None, fallback_argument: object
    ) -> Any:
        if routed is None:
            method = getattr(self.fallback(), kind, None)
            return method(fallback_argument) if callable(method) else None
        route, req = routed
        return route.handler(req)

    def fire_and_forget(self, request: Request) -> Any:
        if not request.metadata and (self.principal is not None or not self.router.require_auth):
            # self._unrouted(request), inlined: fire-and-forgets are the
            # cheapest requests, the call would be a sixth of the cost.
            fire = self._fire_direct
            if fire is None:
                method = getattr(self.fallback(), "fire_and_forget", None)
                fire = self._fire_direct = method if callable(method) else _ignore
            return fire(request)
        return self._fire("fire_and_forget", request, request)

    def metadata_push(self, metadata: bytes) -> Any:
        return self._fire("metadata_push", Request(b"", metadata, self.peer), metadata)


# -- refusals and answers that wait for an async authenticate -------------------------


def _ignore(request: Request) -> None:
    """A fire-and-forget the fallback does not take: nobody answers it."""


def _is_async(fn: object) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (the method itself is examined)
    )


def _refusal(exc: Exception, code: int) -> RSocketError:
    """The error an ``authenticate`` that raised becomes: an ``RSocketError``'s
    message is sent (with ``code``), anything else is logged."""
    if isinstance(exc, RSocketError):
        return RSocketError(code, exc.message)
    log.warning("authentication hook failed", exc_info=exc)
    return RSocketError(code, "authentication failed")


def _principal(principal: Any, code: int) -> Any:
    if principal is None:
        raise RSocketError(code, "authentication failed")
    return principal


async def _then(outcome: Awaitable[Any], connection: object) -> object:
    await outcome
    return connection


async def _single_later(later: Awaitable[Any], answer: Callable[[Any], Any]) -> Any:
    """A request-response answered once ``later`` (the awaited check) says
    who asks: the handler's value (awaited if it is a coroutine, the first
    item if it is a Publisher)."""
    result = answer(await later)
    if inspect.isawaitable(result):
        return await result
    if result is not None and callable(getattr(result, "subscribe", None)):
        async for item in _publisher_items(result):
            return item
        return None
    return result


async def _items_later(later: Awaitable[Any], answer: Callable[[Any], Any]) -> AsyncIterator[Any]:
    """A stream or channel whose handler runs once ``later`` (the awaited
    check) said who asks: its items, whatever shape they come in."""
    result = answer(await later)
    if inspect.isawaitable(result):  # as an async def stream handler: one item
        value = await result
        if value is not None:
            yield value
    elif is_single_value(result):
        yield result
    elif callable(getattr(result, "subscribe", None)):
        async for item in _publisher_items(result):
            yield item
    elif isinstance(result, AsyncIterable):
        async for item in result:
            yield item
    elif result is not None:
        for item in result:
            yield item


async def _publisher_items(publisher: Any) -> AsyncIterator[Any]:
    """A Reactive Streams Publisher's items, one requested at a time; its
    signals (from any thread) cross to the event loop."""
    loop = asyncio.get_running_loop()
    signals: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def signal(kind: str, value: Any = None) -> None:
        loop.call_soon_threadsafe(signals.put_nowait, (kind, value))

    class Subscriber:
        def on_subscribe(self, subscription: Any) -> None:
            signal("subscribe", subscription)

        def on_next(self, item: Any) -> None:
            signal("next", item)

        def on_error(self, error: BaseException) -> None:
            signal("error", error)

        def on_complete(self) -> None:
            signal("complete")

    publisher.subscribe(Subscriber())
    subscription: Any = None
    ended = False
    try:
        while True:
            kind, value = await signals.get()
            if kind == "subscribe":
                subscription = value
                subscription.request(1)
            elif kind == "next":
                yield value
                subscription.request(1)
            elif kind == "error":
                ended = True
                raise value
            else:
                ended = True
                return
    finally:
        if not ended and subscription is not None:
            subscription.cancel()


# -- declaring the response data MIME type ------------------------------------------


def declare_mime(result: Any, entry: bytes) -> Any:
    """``result`` (a value, an iterable, a Publisher, a coroutine or an async
    iterable) with ``entry`` (composite metadata declaring the data MIME type)
    appended to each payload's metadata."""

    def add(item: object) -> Payload:
        p = as_payload(item)
        return Payload(p.data, entry if p.metadata is None else p.metadata + entry)

    if result is None:
        return None
    if isinstance(result, bytes | str | bytearray | memoryview | tuple):
        return add(result)
    if isinstance(result, Coroutine):
        return _declare_awaited(result, add)
    if callable(getattr(result, "subscribe", None)):
        mapped: MapProcessor[object, Payload] = MapProcessor(add)
        result.subscribe(mapped)
        return mapped
    if isinstance(result, AsyncIterable):
        return _declare_async(result, add)
    if isinstance(result, Iterable):
        return map(add, result)
    return result


async def _declare_awaited(
    result: Coroutine[Any, Any, Any], add: Callable[[object], Payload]
) -> Any:
    value = await result
    return None if value is None else add(value)


async def _declare_async(items: AsyncIterable[Any], add: Callable[[object], Payload]) -> Any:
    async for item in items:
        yield add(item)

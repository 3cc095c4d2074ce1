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

This module holds the :class:`Router` (registration, the SETUP hook, route
lookup); its concerns apart: :mod:`.router_connection` (one connection's
requests), :mod:`.router_fnf` (fire-and-forget and METADATA_PUSH),
:mod:`.router_auth` (credentials), :mod:`.router_answers` (answers that wait
for an async ``authenticate``; the declared data MIME type),
:mod:`.router_state` (routes, lookups, the router as they see it) and
:mod:`.routes` (templates and their matching).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import (
    COMPOSITE_METADATA,
    Authentication,
    CompositeMetadata,
    MetadataDecodeError,
    decode_metadata,
    effective_data_mime,
)

from . import router_auth
from .errors import ApplicationError, RSocketError
from .fast import new_routed_request
from .peer import check_prefetch
from .responder import CHANNEL_PREFETCH
from .router_answers import declare_mime, then
from .router_auth import is_async
from .router_connection import RouterConnection
from .router_state import DASHED, KINDS, Lookup, Route
from .routes import NO_VARIABLES, RouteTable
from .types import Request

__all__ = ["KINDS", "Route", "Router", "RouterConnection", "declare_mime"]

F = TypeVar("F", bound=Callable[..., Any])
OCTET_STREAM = "application/octet-stream"


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
        self._async_auth = is_async(authenticate)
        self._async_setup = False
        self.require_auth = authenticate is not None if require_auth is None else require_auth
        self._fallback = fallback
        self._fallback_factory = fallback_factory
        self.cache_size = cache_size
        self.channel_prefetch = channel_prefetch
        self.channel_batch = channel_batch
        self._tables: dict[str, RouteTable[Route]] = {k: RouteTable() for k in KINDS}
        self._caches: dict[str, dict[bytes, Lookup]] = {k: {} for k in KINDS}
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
        many: bool = False,
    ) -> None:
        """Register ``handler`` for ``route`` (a template) and ``kind`` (one of
        :data:`KINDS`). ``produces``: the data MIME type it answers in.
        ``authenticated``: whether it needs a principal (default: the
        router's ``require_auth``). ``prefetch`` / ``batch``: a channel
        route's inbound window (REQUEST_N with the request, then ``batch``
        more each time that many were consumed; default: the router's
        ``channel_prefetch`` / ``channel_batch``). ``many``: a
        fire-and-forget route whose handler takes a list of requests (see
        :meth:`fnf`)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if (prefetch is not None or batch is not None) and kind != "request_channel":
            raise ValueError("prefetch and batch are a channel route's inbound window")
        if many and kind != "fire_and_forget":
            raise ValueError("many=True is for fire-and-forget routes")
        if prefetch is not None:
            check_prefetch(prefetch)
        if batch is not None and batch < 1:
            raise ValueError("batch must be >= 1")
        if not callable(handler):
            raise TypeError(f"handler for {route!r} is not callable")
        needs = self.require_auth if authenticated is None else authenticated
        if needs and self.authenticate is None:
            raise ValueError(f"route {route!r} needs authentication: pass authenticate=")
        entry = Route(kind, route, handler, produces, needs, prefetch, batch, many)
        self._tables[kind].add(route, entry)
        if kind == "setup" and is_async(handler):
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

    def fnf(
        self, route: str, *, authenticated: bool | None = None, many: bool = False
    ) -> Callable[[F], F]:
        """Decorator: ``handler(request)`` takes fire-and-forgets on ``route``;
        with ``many=True``, ``handler(requests)`` takes a list of them: a run
        that arrived together whose requests all carry the same metadata
        (without credentials), else a list of one."""

        def register(handler: F) -> F:
            self.add("fire_and_forget", route, handler, authenticated=authenticated, many=many)
            return handler

        return register

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
            return then(outcome, connection)
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

    # -- credentials (.router_auth) ---------------------------------------------
    _authenticate = router_auth.authenticate
    _authenticate_later = router_auth.authenticate_later

    def _lookup(self, kind: str, metadata: bytes) -> Lookup:
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
        hit = Lookup(meta, route, *(found or (None, NO_VARIABLES)))
        if meta.auth is None and self.cache_size:
            if len(cache) >= self.cache_size:
                cache.clear()  # bounded; hot routes come back at once
            cache[metadata] = hit
        return hit

    def _unknown(self, kind: str, route: str) -> RSocketError:
        others = [DASHED[k] for k in KINDS if k != kind and self._tables[k].match(route)]
        if others:
            return ApplicationError(
                f"route {route!r} has no {DASHED[kind]} handler (it has {', '.join(others)})"
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

    def fire_and_forget_many(self, requests: list[Request]) -> Any:
        return self._connection().fire_and_forget_many(requests)

    def metadata_push(self, metadata: bytes) -> Any:
        return self._connection().metadata_push(metadata)


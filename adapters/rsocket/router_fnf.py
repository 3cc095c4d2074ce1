"""A :class:`~.router_connection.RouterConnection`'s requests nobody
answers (its methods, bound in its class): fire-and-forget, one at a time
or a run of them at once (``fire_and_forget_many``), and METADATA_PUSH;
refusals are logged, as there is no one to tell."""

from __future__ import annotations

import inspect
import logging
import operator
from collections.abc import Coroutine
from typing import Any

from .errors import RSocketError
from .fast import new_routed_request
from .router_state import DASHED, ConnectionState, Route
from .types import Request, RoutedRequest

__all__ = [
    "fire",
    "fire_and_forget",
    "fire_and_forget_many",
    "fire_later",
    "fire_routed",
    "metadata_push",
]

log = logging.getLogger("sansrs.adapters.rsocket")


def fire(self: ConnectionState, kind: str, request: Request, fallback_argument: object) -> Any:
    """A request nobody answers: refusals are logged here."""
    try:
        routed = self._routed(kind, request)
    except RSocketError as exc:
        log.warning("%s dropped: %s", DASHED[kind], exc)
        return None
    if isinstance(routed, Coroutine):  # an async authenticate: a task runs it
        return self._fire_later(kind, routed, fallback_argument)
    return self._fire_routed(kind, routed, fallback_argument)


async def fire_later(
    self: ConnectionState,
    kind: str,
    later: Coroutine[Any, Any, tuple[Route, RoutedRequest] | None],
    fallback_argument: object,
) -> None:
    try:
        routed = await later
    except RSocketError as exc:
        log.warning("%s dropped: %s", DASHED[kind], exc)
        return
    result = self._fire_routed(kind, routed, fallback_argument)
    if inspect.isawaitable(result):
        await result


def fire_routed(
    self: ConnectionState,
    kind: str,
    routed: tuple[Route, RoutedRequest] | None,
    fallback_argument: object,
) -> Any:
    if routed is None:
        fallback = self.fallback()
        method = getattr(fallback, kind, None)
        if callable(method):
            return method(fallback_argument)
        many = getattr(fallback, "fire_and_forget_many", None)  # (a list of one)
        if kind == "fire_and_forget" and callable(many):
            return many([fallback_argument])
        return None
    route, req = routed
    return route.handler([req]) if route.many else route.handler(req)


def fire_and_forget(self: ConnectionState, request: Request) -> Any:
    if not request.metadata and (self.principal is not None or not self.router.require_auth):
        # self._unrouted(request), inlined: fire-and-forgets are the
        # cheapest requests, the call would be a sixth of the cost.
        fire = self._fire_direct
        if fire is None:
            method = getattr(self.fallback(), "fire_and_forget", None)
            fire = self._fire_direct = method if callable(method) else _ignore
        return fire(request)
    return self._fire("fire_and_forget", request, request)


def fire_and_forget_many(self: ConnectionState, requests: list[Request]) -> Any:
    """A run of fire-and-forgets (the engine's; docs/extensions.md),
    taken at once where all of it goes to one place that takes many:
    none carries routing (the fallback's ``fire_and_forget_many``), or
    all carry the same metadata, without credentials, resolving to a
    route registered with ``many=True`` (its handler gets the list).
    Anything else: ``NotImplemented``; the engine then offers each span
    of consecutive requests with the same metadata, and hands what is
    declined again to :meth:`fire_and_forget` one by one, in order
    (each routed, checked, refused and logged as one)."""
    metadata = set(map(_REQUEST_METADATA, requests))
    if len(metadata) != 1:
        return NotImplemented
    md = metadata.pop()
    router = self.router
    if not self.composite or not md:
        if self.principal is None and router.require_auth:
            return NotImplemented  # each refused (and logged) as one
        many = getattr(self.fallback(), "fire_and_forget_many", None)
        return many(requests) if callable(many) else NotImplemented
    kind = "fire_and_forget"
    try:
        hit = router._caches[kind].get(md) or router._lookup(kind, md)
        if hit.composite.auth is not None or hit.found is None or not hit.found.many:
            return NotImplemented
        routed = self._resolve(kind, requests[0], hit, self.principal)
    except RSocketError:
        return NotImplemented
    assert routed is not None  # (a route was found)
    route, first = routed
    variables, principal, data_mime, meta = (
        first.variables, first.principal, first.data_mime, first.composite
    )
    batch = [first] + [
        new_routed_request(r, first.route, variables, principal, data_mime, meta)
        for r in requests[1:]
    ]
    return route.handler(batch)


def metadata_push(self: ConnectionState, metadata: bytes) -> Any:
    return self._fire("metadata_push", Request(b"", metadata, self.peer), metadata)


_REQUEST_METADATA = operator.attrgetter("metadata")


def _ignore(request: Request) -> None:
    """A fire-and-forget the fallback does not take: nobody answers it."""

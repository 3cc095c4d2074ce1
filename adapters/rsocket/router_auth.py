"""A :class:`~.routing.Router`'s credential checks (its methods, bound in
its class): the ``authenticate`` hook run on a SETUP's or a request's
credentials, plain or awaited, and what its refusal becomes."""

from __future__ import annotations

import inspect
import logging
from typing import Any

from sansrs.rsocket.extensions import Authentication

from .errors import RSocketError
from .router_state import RouterState

__all__ = ["authenticate", "authenticate_later", "is_async"]

log = logging.getLogger("sansrs.adapters.rsocket")


def authenticate(self: RouterState, auth: Authentication, code: int) -> Any:
    """The principal for ``auth`` (a plain ``authenticate``), or the
    refusal (``RSocketError`` with ``code``)."""
    assert self.authenticate is not None
    try:
        principal = self.authenticate(auth)
    except Exception as exc:
        raise refusal(exc, code) from None
    if inspect.isawaitable(principal):  # never a principal: refuse, loudly
        getattr(principal, "close", lambda: None)()
        log.error("authenticate returned an awaitable; declare it async def")
        raise RSocketError(code, "authentication failed")
    return principal_of(principal, code)


async def authenticate_later(self: RouterState, auth: Authentication, code: int) -> Any:
    """:func:`authenticate` for an ``async def authenticate``: awaited."""
    assert self.authenticate is not None
    try:
        principal = await self.authenticate(auth)
    except Exception as exc:
        raise refusal(exc, code) from None
    return principal_of(principal, code)


def is_async(fn: object) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (the method itself is examined)
    )


def refusal(exc: Exception, code: int) -> RSocketError:
    """The error an ``authenticate`` that raised becomes: an ``RSocketError``'s
    message is sent (with ``code``), anything else is logged."""
    if isinstance(exc, RSocketError):
        return RSocketError(code, exc.message)
    log.warning("authentication hook failed", exc_info=exc)
    return RSocketError(code, "authentication failed")


def principal_of(principal: Any, code: int) -> Any:
    if principal is None:
        raise RSocketError(code, "authentication failed")
    return principal

"""The :class:`~.engine.RSocketEngine`'s connection-level signals (its
methods, bound in the engine's class): the server's acceptance of a SETUP
(the handler's ``accept_setup`` hook, deferred or not, and leases), a
LEASE received, and the connection's end: the peer's CONNECTION_CLOSE and
the grace its open streams get, a close, a lost transport."""

from __future__ import annotations

import contextlib
import inspect
import logging
from typing import Any

from sansrs.rsocket import ErrorCode

from ..drive.errors import ConnectionClosed, seconds
from ..transport.websocket import messages as ws
from . import core
from .engine_state import EngineState
from .errors import RSocketError, setup_rejection

log = logging.getLogger("sansrs.adapters.rsocket")


#: The REJECTED_SETUP message when an ``async def accept_setup`` reaches a
#: synchronous driver (the servers refuse such handlers up front when they can).
ASYNC_HOOK_REFUSED = (
    "an async accept_setup (or a Router's async authenticate) can only be awaited"
    " by the asyncio server: use sansrs.adapters.rsocket.aio.serve"
)


def refuse_async_hooks(handler: object) -> None:
    """A synchronous server or client: ``TypeError`` up front for a handler
    whose hooks must be awaited (an ``async def accept_setup``, or one that
    says ``asyncio_only``: a Router with an async ``authenticate``), rather
    than rejecting every SETUP later."""
    hook = getattr(handler, "accept_setup", None)
    if inspect.iscoroutinefunction(hook) or getattr(handler, "asyncio_only", False) is True:
        raise TypeError(f"{handler!r}: {ASYNC_HOOK_REFUSED}")


def on_setup(self: EngineState, ev: Any) -> None:
    """Server: accept the SETUP. If the client asked for leases, grant
    them (the first LEASE is mandatory) and renew at half the TTL; a
    server started with ``lease=True`` refuses clients that did not ask."""
    if self.options.lease and not ev.lease:
        self.conn.reject_setup(
            ErrorCode.UNSUPPORTED_SETUP, "this server requires leases (SETUP L flag)"
        )
        return
    if self._accept_setup_hook(ev):
        self.leases.accept_setup(ev.lease, self._now)


def accept_setup_hook(self: EngineState, ev: Any) -> bool:
    """The handler's optional ``accept_setup(setup, peer)`` (e.g. a
    :class:`~.routing.Router` checking credentials): it may return the
    handler for this connection, or raise to reject the SETUP. It may
    also return a future (``add_done_callback``; the asyncio adapter
    makes an ``async def`` hook's coroutine a task): the SETUP waits
    for its outcome (:meth:`_setup_decided`), its early frames held by
    the core. A bare awaitable nothing here can run is never taken for
    a yes: the SETUP is rejected."""
    hook = getattr(self.responder.handler, "accept_setup", None)
    if not callable(hook):
        return True
    try:
        handler = hook(ev, self.peer)
    except Exception as exc:
        code, message = setup_rejection(exc)
        self.conn.reject_setup(code, message)
        return False
    if callable(getattr(handler, "add_done_callback", None)):
        self._setup_pending = handler
        handler.add_done_callback(  # any thread: decided on ours
            lambda done: self._call_soon(lambda: self._setup_decided(ev, done))
        )
        return False
    if inspect.isawaitable(handler):
        getattr(handler, "close", lambda: None)()  # never run: no "never awaited" noise
        log.error("accept_setup returned an awaitable: async hooks need the asyncio server")
        self.conn.reject_setup(ErrorCode.REJECTED_SETUP, ASYNC_HOOK_REFUSED)
        return False
    if handler is not None:
        self.responder.bind(handler, self.peer)
    return True


def setup_decided(self: EngineState, ev: Any, done: Any) -> None:
    """Owning thread: a deferred ``accept_setup`` ended; its result is the
    handler (accept), its exception the rejection."""
    self._setup_pending = None
    if self.conn.state is not core.ConnectionState.SETUP_RECEIVED:
        return  # the connection ended meanwhile
    try:
        handler = done.result()
    except BaseException as exc:  # a cancelled task too: never a yes
        code, message = setup_rejection(exc)
        self.conn.reject_setup(code, message)
    else:
        if handler is not None:
            self.responder.bind(handler, self.peer)
        self.leases.accept_setup(ev.lease, self._now)
    self._dispatch_events()  # the early frames the core held, now requests


def on_lease(self: EngineState, ttl_ms: int, requests: int) -> None:
    self.leases.release()


def on_closing(self: EngineState, message: str) -> None:
    """The peer sent CONNECTION_CLOSE while streams are open: they may
    finish (spec: Error Codes, CONNECTION_CLOSE), within the driver's
    ``close_timeout``: a peer that closes and then answers nothing must
    not hold a request for ever (docs/adapters.md, "When the peer
    misbehaves")."""
    log.debug("peer is closing: %s", message)
    config = getattr(self.thread, "config", None)
    grace = config.close_timeout if config is not None else 2.0
    self._drain_by = self._now + grace
    self._peer_close = (message, grace)


def drain_expired(self: EngineState) -> None:
    """The streams a peer's CONNECTION_CLOSE left open did not finish in
    time: our requests are cancelled (CANCEL: they terminate, so the
    close completes as the spec's "MUST wait for outstanding streams to
    terminate" has it), each failing with the peer's reason; streams of
    the peer's still open then end with the connection
    (ERROR[CONNECTION_ERROR])."""
    self._drain_by = None
    message, grace = self._peer_close or ("", 0.0)
    said = RSocketError(ErrorCode.CONNECTION_CLOSE, message)
    reason = ConnectionClosed(
        f"connection closed by peer: {said}; its open streams unfinished"
        f" {seconds(grace)} later (close_timeout)"
    )
    conn = self.conn
    for sid, handle in list(self._requests.items()):
        del self._requests[sid]
        handle.cancelled = True
        if handle.outbound is not None:
            self._outbounds.cancel(sid)
        with contextlib.suppress(core.LocalProtocolError):  # (ended in the core)
            conn.cancel(sid)
        handle.sink.finish(reason)
    if conn.state is not core.ConnectionState.CLOSED:
        with contextlib.suppress(core.LocalProtocolError):
            conn.close(
                f"streams unfinished {seconds(grace)} after CONNECTION_CLOSE",
                error_code=ErrorCode.CONNECTION_ERROR,
            )
    self._dispatch_events()
    self._closing = reason


def on_closed(self: EngineState, code: int, message: str, by_peer: bool) -> None:
    who = "peer" if by_peer else "this end"
    # The first reason stays (a protocol error of the peer's, said as such).
    self._closing = self._closing or ConnectionClosed(
        f"connection closed by {who}: {RSocketError(code, message)}"
    )


def on_lost(self: EngineState, reason: str, timed_out: bool) -> None:
    if timed_out:
        reason = f"peer silent beyond max lifetime (keepalive timeout): {reason}"
        self._ws_close = (ws.CloseCode.GOING_AWAY, "keepalive timeout")
    unexpected = self.unexpected_input()
    if unexpected:  # e.g. another protocol's server that answered and left
        reason = f"{reason}; {unexpected}"
    elif self._peer_close is not None:  # what the peer said first
        said = RSocketError(ErrorCode.CONNECTION_CLOSE, self._peer_close[0])
        reason = f"{reason}, after {said}"
    self._closing = self._closing or ConnectionClosed(f"connection lost: {reason}")

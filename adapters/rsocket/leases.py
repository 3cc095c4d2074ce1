"""Leases as the engine lives them (spec: Lease Semantics), one part of
:class:`~.engine.RSocketEngine`, on the connection's owning thread.

* **Honouring the peer's lease**: while the peer leases and no request is
  left in the lease, requests wait in order (:class:`Leases.wait`) instead
  of failing; each LEASE received lets out as many as it allows
  (:meth:`Leases.release`). When the connection ends, those still waiting
  fail with its reason.
* **Granting ours**: a server whose client asked for leases (SETUP L flag)
  grants ``lease_requests`` for ``lease_ttl`` seconds on accepting it and
  renews at half the TTL, so a lease never runs out while the client is
  working (:meth:`Leases.accept_setup`, :meth:`Leases.renew`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from . import core
from .options import EngineOptions

__all__ = ["Leases"]

H = TypeVar("H")


class Leases(Generic[H]):
    """The requests waiting for the peer's lease (each with its handle, if
    it has one: fire-and-forgets have none) and the renewal of ours."""

    __slots__ = ("_conn", "_options", "_releasing", "renew_at", "waiters")

    def __init__(self, conn: core.Connection, options: EngineOptions) -> None:
        self._conn = conn
        self._options = options
        #: (start it, its handle), in the order the application asked.
        self.waiters: deque[tuple[Callable[[], None], H | None]] = deque()
        self._releasing = False
        #: When to grant the next lease (None: we do not grant any).
        self.renew_at: float | None = None

    def in_force(self) -> bool:
        """A lease governs requests now (some wait, or the peer leases):
        the batch paths take the one-by-one path then."""
        return bool(self.waiters) or self._conn.lease_available() is not None

    def must_wait(self) -> bool:
        """A new request waits (in order) for the peer's lease instead of failing."""
        if self.waiters and not self._releasing:
            return True
        available = self._conn.lease_available()
        return available is not None and available <= 0

    def wait(self, start: Callable[[], None], handle: H | None) -> None:
        self.waiters.append((start, handle))

    def waiting_requests(self) -> int:
        """Waiting requests that expect an answer (not fire-and-forgets)."""
        return sum(1 for _, handle in self.waiters if handle is not None)

    def release(self) -> None:
        """A LEASE arrived: start the waiting requests it has room for, in order."""
        waiters = self.waiters
        conn = self._conn
        while waiters:
            available = conn.lease_available()
            if available is not None and available <= 0:
                return
            start, _ = waiters.popleft()
            # The released request must not queue itself again behind the
            # waiters still in line (that looped forever with two or more).
            self._releasing = True
            try:
                start()
            finally:
                self._releasing = False

    def abandon(self) -> list[H]:
        """The connection ended: forget every waiter; returns the handles
        whose requests must fail."""
        handles = [handle for _, handle in self.waiters if handle is not None]
        self.waiters.clear()
        return handles

    def accept_setup(self, client_asked: bool, now: float) -> None:
        """Server: accept the SETUP; with the first lease (mandatory once
        the client asked) when it did."""
        if not client_asked:
            self._conn.accept_setup()
            return
        ttl = self._options.lease_ttl
        self._conn.accept_setup(
            lease_ttl=core.milliseconds(ttl), lease_number=self._options.lease_requests
        )
        self.renew_at = now + ttl / 2

    def renew(self, now: float) -> None:
        """Grant the next lease if it is time (see :attr:`renew_at`)."""
        if self.renew_at is None or now < self.renew_at:
            return
        ttl = self._options.lease_ttl
        with contextlib.suppress(core.LocalProtocolError):
            self._conn.send_lease(core.milliseconds(ttl), self._options.lease_requests)
        self.renew_at = now + ttl / 2  # renew well before it runs out

"""Lease bookkeeping, both directions (spec: Lease Semantics).

A ``Lease`` is a number of requests valid until a deadline (seconds on the
caller's monotonic clock). The requester side counts the lease the peer
granted; the responder side counts the lease it granted, to reject requests
beyond it with ERROR[REJECTED]. Before any LEASE, the lease is empty.
``Leases`` is the part of ``Connection`` that holds both.
"""

from __future__ import annotations

__all__ = ["Lease", "Leases"]


class Lease:
    __slots__ = ("expires", "remaining")

    def __init__(self) -> None:
        self.expires = float("-inf")
        self.remaining = 0

    def grant(self, now: float, ttl_ms: int, number: int) -> None:
        """A new LEASE overrides the previous one (spec: LEASE Frame)."""
        self.expires = now + ttl_ms / 1000.0
        self.remaining = number

    def available(self, now: float) -> int:
        """Requests still allowed at ``now``; an expired lease allows none."""
        return self.remaining if now < self.expires else 0

    def use(self, now: float) -> bool:
        """Count one request; False (and nothing counted) when not allowed."""
        if now >= self.expires or self.remaining <= 0:
            return False
        self.remaining -= 1
        return True

    def deadline(self) -> float | None:
        """When the lease expires (None once there is nothing left to expire)."""
        return self.expires if self.remaining > 0 else None

    def expire(self, now: float) -> None:
        if now >= self.expires:
            self.remaining = 0


class Leases:
    """Both leases of one connection (a part of ``Connection``).

    ``enabled``: SETUP negotiated leases; ``peer``: what the peer's
    responder granted us; ``ours``: what our responder granted the peer;
    ``last_grant``: our last LEASE, sent again after a resumption.
    """

    __slots__ = ("enabled", "last_grant", "ours", "peer")

    def __init__(self) -> None:
        self.enabled = False
        self.peer = Lease()
        self.ours = Lease()
        self.last_grant: tuple[int, int, bytes | None] | None = None

    def anchor(self, now: float) -> None:
        """The clock became known: leases granted before count from ``now``."""
        for lease in (self.peer, self.ours):
            if lease.remaining:
                lease.expires += now

    def restart(self) -> None:
        """The transport was lost: both leases are forgotten (spec: lease
        semantics restart with a new LEASE after resumption)."""
        self.peer = Lease()
        self.ours = Lease()

    def deadline(self) -> float | None:
        """When the peer's lease expires (None: nothing to expire)."""
        if not self.enabled:
            return None
        deadline = self.peer.deadline()
        return None if deadline == float("inf") else deadline

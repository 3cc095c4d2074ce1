"""Lease bookkeeping, both directions (spec: Lease Semantics).

A ``Lease`` is a number of requests valid until a deadline (seconds on the
caller's monotonic clock). The requester side counts the lease the peer
granted; the responder side counts the lease it granted, to reject requests
beyond it with ERROR[REJECTED]. Before any LEASE, the lease is empty.
"""

from __future__ import annotations

__all__ = ["Lease"]


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

"""Limits and timeouts of the drivers, one typed object for every driver."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LoopConfig"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopConfig:
    """Limits of a driver loop (bytes, seconds).

    ``high_water``: queued output above which engines are not pumped (512 KiB).
    ``pause_reading_at``: queued output above which the loop stops reading
    from that peer until it drains (4 MiB; ``None``: never pause). Output
    pumped within credit stops at ``high_water``, so only output a peer
    causes without reading it (e.g. a flood of requests whose answers it
    never reads) reaches this. Both peers pausing at once needs single items
    larger than the gap, which ``fragment_size`` prevents.
    ``recv_size``: bytes read per readable event (256 KiB).
    ``max_idle_wait``: longest ``select`` without a timer (1 s; only bounds
    how late a lost wake-up could be noticed).
    ``inbox_capacity``: calls pending per connection before producers wait (4096).
    ``accept_batch``: connections accepted per listener per turn (64).
    ``handshake_timeout``: a connection whose transport handshake (TLS or a
    WebSocket upgrade on an accepted connection: ``transport.handshaken`` is
    False) or protocol setup (a server waiting for RSocket SETUP or the rsio
    hello: ``engine.handshaken`` is False) has not
    completed it within this many seconds is aborted (30 s; ``None``: wait
    forever), so half-open clients cannot pile up.
    ``idle_timeout``: a connection with no byte read or written for this many
    seconds is closed gracefully (the protocol's goodbye), its error saying
    so (``None``, the default: never; RSocket's keepalive already bounds how
    long a silent peer is kept, rsio and Ditto have none).
    ``close_timeout``: after a local graceful close has flushed, how long to
    keep reading for an engine that waits for the peer's answer to its
    goodbye (``wants_close()`` still False; rsio's goodbyeAck) before
    closing anyway (2 s). Engines that need no answer close at once.
    """

    high_water: int = 512 * 1024
    pause_reading_at: int | None = 4 * 1024 * 1024
    recv_size: int = 256 * 1024
    max_idle_wait: float = 1.0
    inbox_capacity: int = 4096
    accept_batch: int = 64
    handshake_timeout: float | None = 30.0
    idle_timeout: float | None = None
    close_timeout: float = 2.0

    def __post_init__(self) -> None:
        if self.high_water <= 0 or self.recv_size <= 0 or self.inbox_capacity <= 0:
            raise ValueError("high_water, recv_size and inbox_capacity must be positive")
        if self.pause_reading_at is not None and self.pause_reading_at < self.high_water:
            raise ValueError("pause_reading_at must be >= high_water (or None)")
        if self.max_idle_wait <= 0 or self.accept_batch <= 0:
            raise ValueError("max_idle_wait and accept_batch must be positive")
        if self.handshake_timeout is not None and self.handshake_timeout <= 0:
            raise ValueError("handshake_timeout must be positive (or None)")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive (or None)")
        if self.close_timeout <= 0:
            raise ValueError("close_timeout must be positive")

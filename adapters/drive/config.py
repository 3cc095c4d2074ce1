"""Limits and timeouts of the drivers, one typed object for every driver."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LoopConfig"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopConfig:
    """Limits of a driver loop (bytes, seconds).

    ``high_water``: queued output above which engines are not pumped (512 KiB);
    also the bytes of a stream's items one turn queues at most before
    writing them (``Outbounds``), so a large credit window is written as it
    is made rather than made whole first.
    ``pause_reading_at``: queued output above which the loop stops reading
    from that peer until it drains (4 MiB; ``None``: never pause). Output
    pumped within credit stops at ``high_water``, so only output a peer
    causes without reading it (e.g. a flood of requests whose answers it
    never reads) reaches this. Both peers pausing at once needs single items
    larger than the gap, which ``fragment_size`` prevents.
    ``recv_size``: bytes read per readable event at most (256 KiB, see
    ``transport.tcp.RECV_SIZE``).
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
    ``source_budget``: bytes of items the outbound streams of one connection
    may have asked their Publishers and worker threads for ahead of sending
    them, all streams together (4 MiB). A stream asks its source for more
    only when it is pumped, and the pump stops at ``high_water``: a peer
    that does not read stops the production of every stream, whatever
    demand it signalled. One item is always allowed, so a single item larger
    than the budget still flows.
    ``max_connections``: live connections per server (1024; ``None``: no
    limit). Beyond it a new connection is accepted and closed at once
    (refused, not queued: the client learns it now rather than after a
    timeout), and a warning is logged at most every ``log_interval``.
    Under the thread driver each connection is one thread, so this is also
    the server's thread limit.
    ``accept_pause``: seconds a server stops accepting after the process or
    the system ran out of file descriptors or memory for a socket (EMFILE,
    ENFILE, ENOBUFS, ENOMEM) (0.25 s): established connections keep being
    served, and the listener is not polled in a busy loop.
    ``shed_batch``: under descriptor pressure a server makes room by
    aborting connections still in their handshake (transport or protocol
    opening not done), oldest first: up to this many each time ``accept``
    fails for want of descriptors or memory while a client waits (the
    listener polled readable, not the failure that follows the accept of
    the last descriptor; accepting resumes as soon as they are gone,
    before ``accept_pause``), and one per new connection at
    ``max_connections`` (the new one is then served instead of refused, and
    nothing more is accepted until the shed one is gone).
    Logged at most once per ``log_interval`` (32; 0: never shed). Why: a
    flood of connections that never finish their opening would otherwise
    hold every descriptor until ``handshake_timeout`` and lock good clients
    out.
    ``log_interval``: a repeated warning of a server (accept failures,
    refused connections) is logged at most once per this many seconds, with
    the count of those not logged (10 s).
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
    source_budget: int = 4 * 1024 * 1024
    max_connections: int | None = 1024
    accept_pause: float = 0.25
    shed_batch: int = 32
    log_interval: float = 10.0

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
        if self.source_budget <= 0:
            raise ValueError("source_budget must be positive")
        if self.max_connections is not None and self.max_connections <= 0:
            raise ValueError("max_connections must be positive (or None)")
        if self.shed_batch < 0:
            raise ValueError("shed_batch must be >= 0")
        if self.accept_pause <= 0 or self.log_interval < 0:
            raise ValueError("accept_pause must be positive and log_interval >= 0")

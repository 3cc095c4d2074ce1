"""The options one RSocket connection is set up with: what ``connect`` and
``serve`` take as keyword arguments (SETUP fields, leases, fragmentation and
the core's limits)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["EngineOptions"]


@dataclass(kw_only=True)
class EngineOptions:
    """Per-connection options (seconds for times)."""

    keepalive_interval: float = 20.0
    max_lifetime: float = 90.0
    lease: bool = False
    lease_ttl: float = 30.0
    lease_requests: int = 0x7FFFFFFF
    data_mime_type: str = "application/octet-stream"
    metadata_mime_type: str = "application/octet-stream"
    setup_data: bytes = b""
    setup_metadata: bytes | None = None
    fragment_size: int | None = None
    max_frame_size: int | None = None
    max_concurrent_streams: int | None = None
    #: Server: ``authenticate(setup)`` (a :class:`~.types.Setup`) runs before
    #: a SETUP is accepted; an exception rejects it (REJECTED_SETUP with
    #: the exception's text) and the connection closes.
    authenticate: Callable[[Any], object] | None = None

    def __post_init__(self) -> None:
        if self.keepalive_interval <= 0 or self.max_lifetime <= 0:
            raise ValueError("keepalive_interval and max_lifetime must be positive")

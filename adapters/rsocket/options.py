"""The options one RSocket connection is set up with: what ``connect`` and
``serve`` take as keyword arguments (SETUP fields, leases, fragmentation and
the core's limits)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sansrs.rsocket.extensions import COMPOSITE_METADATA, Authentication, compose

from ..drive.keywords import check_keywords
from .interceptors import Interceptors

__all__ = ["EngineOptions", "options_for"]

OCTET_STREAM = "application/octet-stream"


@dataclass(kw_only=True)
class EngineOptions:
    """Per-connection options (seconds for times)."""

    keepalive_interval: float = 20.0
    max_lifetime: float = 90.0
    lease: bool = False
    lease_ttl: float = 30.0
    lease_requests: int = 0x7FFFFFFF
    data_mime_type: str = OCTET_STREAM
    #: What a client's SETUP declares for all metadata on the connection.
    #: Composite metadata by default: what routing peers expect (Spring's
    #: default, rsocket-py's router) and what ``client.route(...)`` sends; a
    #: plain request without metadata is unaffected. Metadata a client passes
    #: must then be composite (raw bytes raise ValueError at the call:
    #: ``routed.CompositeCheck``); for raw bytes declare another MIME type,
    #: e.g. ``"application/octet-stream"`` (docs/rsocket.md, Metadata).
    metadata_mime_type: str = COMPOSITE_METADATA
    setup_data: bytes = b""
    setup_metadata: bytes | None = None
    fragment_size: int | None = None
    max_frame_size: int | None = None
    max_concurrent_streams: int | None = None
    min_mean_fragment_size: int | None = None
    #: Client: credentials and a route sent in SETUP as composite metadata
    #: (docs/extensions.md); either makes the metadata MIME type composite
    #: and puts ``setup_metadata`` (composite bytes, if given) after them.
    auth: Authentication | None = None
    setup_route: str | None = None
    #: Connection and request interceptors (docs/interceptors.md); None: none,
    #: at no cost.
    interceptors: Interceptors | None = None

    def __post_init__(self) -> None:
        if self.keepalive_interval <= 0 or self.max_lifetime <= 0:
            raise ValueError("keepalive_interval and max_lifetime must be positive")
        if self.auth is not None or self.setup_route is not None:
            if self.metadata_mime_type not in (OCTET_STREAM, COMPOSITE_METADATA):
                raise ValueError(
                    f"auth= and setup_route= travel as {COMPOSITE_METADATA},"
                    f" not {self.metadata_mime_type}"
                )
            self.metadata_mime_type = COMPOSITE_METADATA
            ours = compose(self.setup_route, auth=self.auth)
            self.setup_metadata = ours + (self.setup_metadata or b"")


#: What a connect's ``timeout=`` most likely meant.
TIMEOUT_HINT = {
    "timeout": "the connect's own bound is connect_timeout=, and each request takes "
    "timeout= (client.request_response(data, timeout=5))"
}


def options_for(function: Callable[..., Any], keywords: Mapping[str, Any]) -> EngineOptions:
    """:class:`EngineOptions` from the ``**keywords`` a public ``function``
    (``connect``, ``serve``) took: a keyword neither takes is a TypeError that
    names ``function`` and its nearest public parameter, never this class."""
    takes_timeout = "connect_timeout" in inspect.signature(function).parameters
    check_keywords(function, keywords, EngineOptions, hint=TIMEOUT_HINT if takes_timeout else None)
    return EngineOptions(**keywords)

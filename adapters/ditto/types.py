"""Values Ditto applications use with the adapters: HTTP authentication
header values and checks, and the WebSocket endpoints Ditto speaks on."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping

from ..transport.urls import Endpoint, parse_url

__all__ = ["Authorize", "basic_auth", "bearer_auth", "ws_endpoint"]

Authorize = Callable[[Mapping[str, str]], bool]


def basic_auth(user: str, password: str) -> str:
    """The ``Authorization`` header value for HTTP Basic authentication."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def bearer_auth(token: str) -> str:
    """The ``Authorization`` header value for a Bearer token (e.g. a JWT)."""
    return f"Bearer {token}"


def ws_endpoint(url: str | Endpoint) -> Endpoint:
    """Ditto speaks over WebSocket only: ``ws://`` or ``wss://``."""
    endpoint = url if isinstance(url, Endpoint) else parse_url(url)
    if endpoint.scheme not in ("ws", "wss"):
        raise ValueError(f"Ditto runs over WebSocket: expected ws:// or wss://, not {endpoint.url}")
    return endpoint

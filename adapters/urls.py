"""Endpoint URLs, parsed in one place for every transport.

``tcp://host:port`` is served today; ``unix://``, ``tls://``, ``ws://`` and
``wss://`` are reserved for the transports that will plug in later, so that a
caller gets a clear "not supported yet" instead of a confusing parse error.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

SUPPORTED_SCHEMES = frozenset({"tcp"})
RESERVED_SCHEMES = frozenset({"unix", "tls", "ws", "wss"})


class UnsupportedScheme(ValueError):
    """The URL names a transport this build does not provide (yet)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where to connect or listen: ``scheme``, ``host``, ``port`` and ``path``."""

    scheme: str
    host: str
    port: int
    path: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    def with_port(self, port: int) -> Endpoint:
        """The same endpoint on another port (a server bound to port 0 learns its real one)."""
        return Endpoint(self.scheme, self.host, port, self.path)

    def __str__(self) -> str:
        return self.url


def parse_url(url: str) -> Endpoint:
    """Parse ``tcp://host:port`` (IPv6 hosts in brackets). Port 0 means "any free port"."""
    if not isinstance(url, str):
        raise TypeError(f"URL must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in RESERVED_SCHEMES:
        raise UnsupportedScheme(f"{scheme}:// is reserved but not implemented yet: {url!r}")
    if scheme not in SUPPORTED_SCHEMES:
        raise UnsupportedScheme(
            f"unknown URL scheme {parts.scheme!r} in {url!r}; expected tcp://host:port"
        )
    if parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValueError(f"tcp:// URLs take no path, query or fragment: {url!r}")
    if not parts.hostname:
        raise ValueError(f"missing host in {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"invalid port in {url!r}") from exc
    if port is None:
        raise ValueError(f"missing port in {url!r} (use :0 for any free port)")
    return Endpoint(scheme, parts.hostname, port)

"""Endpoint URLs, parsed in one place for every transport.

``tcp://host:port``, ``tls://host:port``, ``unix:///absolute/path`` and
``ws://host:port/path`` / ``wss://host:port/path`` (WebSocket; the path, and
a client's query, travel in the upgrade request) are served; schemes in
``RESERVED_SCHEMES`` give a clear "not supported yet" instead of a confusing
parse error.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

SUPPORTED_SCHEMES = frozenset({"tcp", "tls", "unix", "ws", "wss"})
RESERVED_SCHEMES: frozenset[str] = frozenset()
#: Schemes whose URLs carry a path (and, for a client, a query).
PATH_SCHEMES = frozenset({"ws", "wss"})


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
        if self.scheme == "unix":
            return f"unix://{self.path}"
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
            f"unknown URL scheme {parts.scheme!r} in {url!r}; expected one of "
            "tcp://host:port, tls://host:port, unix:///path, ws://host:port/path, "
            "wss://host:port/path"
        )
    if scheme == "unix":
        return _parse_unix(url, parts.netloc, parts.path, parts.query or parts.fragment)
    if scheme in PATH_SCHEMES:
        if parts.fragment:
            raise ValueError(f"{scheme}:// URLs take no fragment: {url!r}")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    elif parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValueError(f"{scheme}:// URLs take no path, query or fragment: {url!r}")
    else:
        path = ""
    if not parts.hostname:
        raise ValueError(f"missing host in {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"invalid port in {url!r}") from exc
    if port is None and scheme in PATH_SCHEMES:
        port = 443 if scheme == "wss" else 80  # the WebSocket defaults (RFC 6455, 3)
    if port is None:
        raise ValueError(f"missing port in {url!r} (use :0 for any free port)")
    return Endpoint(scheme, parts.hostname, port, path)


def _parse_unix(url: str, netloc: str, path: str, extra: str) -> Endpoint:
    """``unix:///absolute/path``: the socket file's path, no host or port."""
    if netloc:
        raise ValueError(f"unix:// URLs take an absolute path and no host: {url!r}")
    if extra:
        raise ValueError(f"unix:// URLs take no query or fragment: {url!r}")
    if not path.startswith("/") or path == "/":
        raise ValueError(f"unix:// URLs need an absolute socket path (unix:///path): {url!r}")
    return Endpoint("unix", "", 0, path)

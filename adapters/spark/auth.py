"""Who may talk to a Spark service, and how a client proves it
(docs/security.md).

A service (:func:`~.service.serve`) requires its *secret* by default: a
client sends it in the SETUP frame's data, in the RSocket Authentication
Extension's bearer form (one byte ``0x81``: well-known type 1, bearer, with
the high bit set; then the token in UTF-8), and a SETUP without it is
rejected (REJECTED_SETUP). The server's URL carries the secret as the
URL's password (``tcp://sansrs:SECRET@host:port``), so writers, readers and
data-source options made from ``server.url`` carry it to the tasks; a
client also takes it from ``secret=`` or ``$SANSRS_SPARK_SECRET``.

:class:`ClientTls` is TLS for writers, readers and the data source as a
picklable value (an ``ssl.SSLContext`` does not travel to Spark tasks): the
CA to trust and an optional client certificate, as PEM text or file paths.
:class:`Access` is what a client needs to reach one service: the secret and
the TLS settings.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

__all__ = [
    "SECRET_ENV",
    "USER",
    "Access",
    "ClientTls",
    "authenticator",
    "bearer",
    "new_secret",
    "split_secret",
    "with_secret",
]

#: Environment variable a client takes the service secret from when neither
#: ``secret=`` nor the URL carries one (set it on the executors of a cluster).
SECRET_ENV = "SANSRS_SPARK_SECRET"
#: The user name of a service URL's credentials (only the password matters).
USER = "sansrs"
#: Authentication Extension: well-known type 0x01 (bearer), high bit set.
_BEARER = bytes([0x81])


def new_secret() -> str:
    """A fresh service secret: 256 random bits, URL-safe text."""
    return secrets.token_urlsafe(32)


def bearer(secret: str) -> bytes:
    """The SETUP data that proves ``secret`` (bearer token form)."""
    return _BEARER + secret.encode("utf-8")


def authenticator(secret: str) -> Callable[[Any], None]:
    """``check(setup)`` for ``secret`` (``setup``: the core's
    ``SetupReceived``): raises ``PermissionError`` unless the SETUP's data
    is :func:`bearer` of it (the service's ``accept_setup`` hook calls it)."""
    if not secret:
        raise ValueError("a service secret must not be empty")
    expected = bearer(secret)

    def authenticate(setup: Any) -> None:
        # Constant time: the comparison must not tell how much was right.
        if not hmac.compare_digest(bytes(setup.data), expected):
            raise PermissionError(
                "this sansrs Spark service needs its secret (see docs/security.md)"
            )

    return authenticate


def split_secret(url: str) -> tuple[str, str | None]:
    """``url`` without credentials, and the secret it carried (its password)."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    clean = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return clean, unquote(parts.password) if parts.password else None


def with_secret(url: str, secret: str) -> str:
    """``url`` carrying ``secret`` as its password (user :data:`USER`)."""
    parts = urlsplit(split_secret(url)[0])
    netloc = f"{USER}:{quote(secret, safe='')}@{parts.netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientTls:
    """TLS settings of a client, picklable so they travel to Spark tasks.

    ``ca``: the CA certificate(s) to trust, PEM text or a file path
    (default: the system's). ``cert`` / ``key``: a client certificate and
    its key for services that require one (PEM text or file paths).
    ``check_hostname``: verify the certificate names the URL's host (on by
    default; off only for a certificate without the address the tasks use).
    ``server_hostname``: the name to check instead of the URL's host."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    check_hostname: bool = True
    server_hostname: str | None = None

    def __post_init__(self) -> None:
        if self.key is not None and self.cert is None:
            raise ValueError("ClientTls: key without cert")

    def context(self) -> ssl.SSLContext:
        """A client context (TLS >= 1.2, the certificate always verified)."""
        ca = self.ca
        if ca is not None and _is_pem(ca):
            ctx = ssl.create_default_context(cadata=ca)
        else:
            ctx = ssl.create_default_context(cafile=ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if not self.check_hostname:
            ctx.check_hostname = False
        if self.cert is not None:
            with _as_file(self.cert) as certfile, _as_file(self.key) as keyfile:
                assert certfile is not None
                ctx.load_cert_chain(certfile, keyfile)
        return ctx

    def connect_options(self) -> dict[str, Any]:
        """``connect()`` keyword arguments of a TLS client (RSocket over
        ``tls://``, Ditto over ``wss://``): the context, the name to check."""
        options: dict[str, Any] = {"ssl_context": self.context()}
        if self.server_hostname is not None:
            options["server_hostname"] = self.server_hostname
        return options


def _is_pem(text: str) -> bool:
    return "-----BEGIN " in text


@contextlib.contextmanager
def _as_file(value: str | None) -> Iterator[str | None]:
    """PEM text as a private temporary file (``load_cert_chain`` reads files
    only), a path as itself."""
    if value is None or not _is_pem(value):
        yield value
        return
    fd, path = tempfile.mkstemp(suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(value)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """What a client needs to reach a service: its ``secret`` (None: send
    none) and ``tls`` (None: the system's CAs for ``tls://`` URLs)."""

    secret: str | None = field(default=None, repr=False)
    tls: ClientTls | None = None

    @classmethod
    def resolve(
        cls, url: str, secret: str | None = None, tls: ClientTls | None = None
    ) -> tuple[str, Access]:
        """The URL to connect to and the access for it: ``secret`` if given,
        else the one ``url`` carries, else ``$SANSRS_SPARK_SECRET``."""
        clean, carried = split_secret(url)
        chosen = secret if secret is not None else carried
        if chosen is None:
            chosen = os.environ.get(SECRET_ENV) or None
        return clean, cls(secret=chosen, tls=tls)

    def connect_options(self, url: str) -> dict[str, Any]:
        """``connect()`` keyword arguments for ``url`` (SETUP data, TLS)."""
        options: dict[str, Any] = {}
        if self.secret is not None:
            options["setup_data"] = bearer(self.secret)
        if url.startswith(("tls://", "wss://")) and self.tls is not None:
            options.update(self.tls.connect_options())
        return options

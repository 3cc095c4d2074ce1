"""Throwaway certificates for the TLS tests (trustme, a pinned test dependency).

Imported by the tests in this folder (pytest puts it on ``sys.path``)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import cache

import trustme


@dataclass(frozen=True)
class Certs:
    """A CA, a server certificate for ``localhost`` / ``127.0.0.1`` / ``::1``,
    a client certificate, and a second CA nobody trusts."""

    ca: trustme.CA
    server: trustme.LeafCert
    client: trustme.LeafCert
    stranger_ca: trustme.CA

    def server_context(self, *, require_client_cert: bool = False) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server.configure_cert(ctx)
        if require_client_cert:
            self.ca.configure_trust(ctx)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def client_context(self, *, with_cert: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self.ca.configure_trust(ctx)
        if with_cert:
            self.client.configure_cert(ctx)
        return ctx

    def untrusting_client_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self.stranger_ca.configure_trust(ctx)
        return ctx


@cache
def certs() -> Certs:
    ca = trustme.CA()
    return Certs(
        ca=ca,
        server=ca.issue_cert("localhost", "127.0.0.1", "::1"),
        client=ca.issue_cert("client.example"),
        stranger_ca=trustme.CA(),
    )

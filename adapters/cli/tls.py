"""The TLS options of every client command (``sansrs request``, ``subscribe``,
``ditto ...``) for ``tls://`` and ``wss://`` URLs: the CAs to trust
(``--cafile``, instead of the system's), the name the server's certificate
must carry (``--server-name``, also sent as SNI; the host name check is
always on), a client certificate (``--certfile`` / ``--keyfile``), and what
a certificate that fails the check is reported as (:func:`untrusted`)."""

from __future__ import annotations

import argparse
import ssl
from typing import Any

__all__ = ["add_client_options", "client_options", "untrusted"]

_SECURE = ("tls", "wss")
#: OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH: the certificate is not for this name.
_HOSTNAME_MISMATCH = 62


def add_client_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "TLS (tls:// and wss://; the server's certificate and host name are always checked)"
    )
    group.add_argument(
        "--cafile", metavar="PEM", help="CA certificates to trust instead of the system's"
    )
    group.add_argument(
        "--server-name",
        metavar="NAME",
        help="the name the server's certificate must carry, sent as SNI (default: the URL's host)",
    )
    group.add_argument("--certfile", metavar="PEM", help="a client certificate chain to present")
    group.add_argument("--keyfile", metavar="PEM", help="its private key, if not in --certfile")


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """``connect`` keywords for the TLS options given: ``ssl_context`` and
    ``server_hostname`` (none without options: the system's CAs). ``ValueError``
    (a usage error) for options a plain URL cannot use, a key without its
    certificate, or a file that is not what it should be."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("cafile", "server_name", "certfile", "keyfile")
        if getattr(args, name) is not None
    ]
    if not given:
        return {}
    scheme = args.url.split("://", 1)[0].lower()
    if scheme not in _SECURE:
        raise ValueError(f"{', '.join(given)}: only for tls:// and wss:// URLs, not {scheme}://")
    if args.keyfile is not None and args.certfile is None:
        raise ValueError("--keyfile needs --certfile (the certificate the key is for)")
    options: dict[str, Any] = {}
    if args.server_name is not None:
        options["server_hostname"] = args.server_name
    if args.cafile is not None or args.certfile is not None:
        from ..transport.tls import client_context

        try:
            options["ssl_context"] = client_context(
                cafile=args.cafile, certfile=args.certfile, keyfile=args.keyfile
            )
        except (OSError, ssl.SSLError) as exc:  # missing, unreadable or not PEM
            which = "--cafile" if args.certfile is None else "--cafile/--certfile/--keyfile"
            raise ValueError(f"{which}: cannot load: {exc}") from None
    return options


def untrusted(exc: ssl.SSLCertVerificationError) -> str:
    """The message for a server certificate the client refused: what failed,
    and the option that fixes it when the server is the right one."""
    reason = exc.verify_message or exc.reason or str(exc)
    if exc.verify_code == _HOSTNAME_MISMATCH:
        return (
            f"TLS: the server's certificate does not name this host ({reason}); "
            "--server-name checks it against the name it was issued to"
        )
    return (
        f"TLS: the server's certificate is not trusted ({reason}); "
        "--cafile trusts the CA that issued it"
    )

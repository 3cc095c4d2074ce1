"""``sansrs serve URL``: the demo responder (RSocket) or the demo publishers
(``--protocol rsio``); and the server loop every ``serve`` subcommand shares
(``sansrs ditto serve`` too): start the server, print ``READY <url>`` once it
listens (port 0 shows the real port), run until it closes, SIGTERM or Ctrl-C.

Every option is honoured by every protocol it is offered for; one that a
protocol cannot honour (``--lease`` with rsio) is refused with a message."""

from __future__ import annotations

import argparse
import signal
import ssl
import sys
from collections.abc import Callable
from types import FrameType
from typing import Protocol

from ..transport import MissingExtraError
from .exits import URL_HELP, USAGE

__all__ = ["add_parsers", "run_serve", "serve_until_closed"]


class CliServer(Protocol):
    @property
    def url(self) -> str: ...

    def wait_closed(self, timeout: float | None = None) -> bool: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *exc: object) -> None: ...


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve_until_closed(start: Callable[[], CliServer]) -> int:
    """Exit status: 0 after a clean stop, 1 (``error: ...`` on stderr) when
    ``start`` raises ``ValueError`` (a bad URL or option) or ``OSError``."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server = start()
    except (ValueError, OSError, MissingExtraError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    with server:
        print(f"READY {server.url}", flush=True)
        try:
            while not server.wait_closed(1.0):
                pass
        except KeyboardInterrupt:
            pass
    return 0


def _tls(args: argparse.Namespace) -> Callable[[], ssl.SSLContext | None]:
    """What makes the server's TLS context from ``--certfile`` / ``--keyfile``
    (called inside ``start``: a missing file is an ``OSError`` there)."""
    if args.certfile is None:
        return lambda: None

    def context() -> ssl.SSLContext:
        from ..transport.tls import server_context

        return server_context(args.certfile, args.keyfile)

    return context


def run_serve(args: argparse.Namespace) -> int:
    """Exit status as :func:`serve_until_closed`; 1 for an option the protocol
    does not have."""
    secure = args.url.split("://", 1)[0].lower() in ("tls", "wss")
    if secure and args.certfile is None:
        print("error: a tls:// or wss:// server needs --certfile (and --keyfile unless the "
              "key is in it)", file=sys.stderr)
        return 1
    tls = _tls(args)
    if args.protocol == "rsio":
        if args.auth_simple or args.auth_bearer:
            print("error: --auth-simple / --auth-bearer apply to --protocol rsocket",
                  file=sys.stderr)
            return 1
        if args.lease:
            print("error: --lease applies to --protocol rsocket (rsio has no leases)",
                  file=sys.stderr)
            return 1
        if args.resumable:
            print("error: --resumable applies to --protocol rsocket", file=sys.stderr)
            return 1
        from ..rsio import serve as rsio_serve
        from ..rsio.demo import demo_publishers

        return serve_until_closed(
            lambda: rsio_serve(args.url, demo_publishers, loop=args.loop, ssl_context=tls())
        )
    from ..rsocket import BearerAuth, SimpleAuth
    from ..rsocket import serve as rsocket_serve
    from ..rsocket.demo_routes import demo_router_factory

    credentials: list[SimpleAuth | BearerAuth] = [BearerAuth(t) for t in args.auth_bearer]
    for pair in args.auth_simple:
        user, sep, password = pair.partition(":")
        if not sep:
            print("error: --auth-simple takes USER:PASSWORD", file=sys.stderr)
            return 1
        credentials.append(SimpleAuth(user, password))
    factory = demo_router_factory(credentials)
    if args.resumable:
        from ..rsocket.resume import serve_resumable

        return serve_until_closed(
            lambda: serve_resumable(
                args.url,
                handler_factory=factory,
                lease=args.lease,
                loop=args.loop,
                ssl_context=tls(),
            )
        )
    return serve_until_closed(
        lambda: rsocket_serve(
            args.url, handler_factory=factory, lease=args.lease, loop=args.loop,
            ssl_context=tls(),
        )
    )


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the demo responder",
        description="Run the demo responder (docs/adapters.md describes its exact behaviour; "
        "requests with routing metadata go to its routes, docs/extensions.md). "
        "Prints 'READY <url>' once listening; port 0 picks a free port.",
    )
    serve.add_argument("url", help=URL_HELP)
    serve.add_argument(
        "--lease",
        action="store_true",
        help="refuse clients that do not ask for leases (leases are granted to every "
        "client that asks, with or without this flag)",
    )
    serve.add_argument(
        "--loop",
        choices=("thread", "selector"),
        default="thread",
        help="thread (default): a thread per connection; selector: one thread drives "
        "every connection (docs/adapters.md, Driver loops)",
    )
    serve.add_argument(
        "--protocol",
        choices=("rsocket", "rsio"),
        default="rsocket",
        help="rsocket (default): the demo responder; rsio: reactive-streams-io demo "
        "publishers counter, counter/N, blobs, blobs/N (docs/protocols/rsio.md)",
    )
    serve.add_argument(
        "--auth-simple",
        metavar="USER:PASS",
        action="append",
        default=[],
        help="accept these credentials (repeatable); with any --auth-* option every "
        "request needs credentials, in SETUP or in its composite metadata "
        "(docs/extensions.md)",
    )
    serve.add_argument(
        "--auth-bearer", metavar="TOKEN", action="append", default=[], help="accept this token"
    )
    serve.add_argument(
        "--resumable",
        action="store_true",
        help="RSocket: accept resumable sessions too (a client that drops its connection "
        "resumes the session: docs/resumption.md; default: sessions are kept 60 s)",
    )
    serve.add_argument("--certfile", help="tls:// and wss://: the server's certificate chain (PEM)")
    serve.add_argument("--keyfile", help="tls:// and wss://: its private key (PEM), if not in "
                       "certfile")
    serve.set_defaults(run=run_serve)

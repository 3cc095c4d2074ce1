"""``sansrs request URL ...``: one RSocket request from the command line, its
answers printed one per line (metadata after a tab). Exit codes
(:mod:`.exits`): 2 means the peer answered with an ERROR."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from ..rsocket import (
    COMPOSITE_METADATA,
    BearerAuth,
    Payload,
    RSocketError,
    SimpleAuth,
    compose,
    connect,
)
from ..rsocket.routed import RoutedRequester
from .exits import URL_HELP, run_client
from .tls import add_client_options, client_options

__all__ = ["add_parsers", "run_request"]


def show(payload: Payload, out: TextIO) -> None:
    """One payload on one line: data, then its metadata after a tab."""
    line = payload.data.decode("utf-8", "backslashreplace")
    if payload.metadata is not None:
        line += "\t[metadata " + payload.metadata.decode("utf-8", "backslashreplace") + "]"
    print(line, file=out, flush=True)



def _routing(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``connect`` options and ``route`` arguments for --route, --auth-*,
    --data-mime (None: a plain request). Credentials go in SETUP and in the
    request (Spring checks either, rsocket-py the request's)."""
    auth: SimpleAuth | BearerAuth | None = None
    if args.auth_simple is not None:
        user, sep, password = args.auth_simple.partition(":")
        if not sep:
            raise ValueError("--auth-simple takes USER:PASSWORD")
        auth = SimpleAuth(user, password)
    elif args.auth_bearer is not None:
        auth = BearerAuth(args.auth_bearer)
    if args.route is None and auth is None and args.data_mime is None:
        return None
    if args.metadata is not None:
        raise ValueError("--metadata cannot be combined with --route / --auth-* / --data-mime")
    options: dict[str, Any] = {"auth": auth} if auth is not None else {}
    if "auth" not in options:
        options["metadata_mime_type"] = COMPOSITE_METADATA
    if args.data_mime is not None:
        options["data_mime_type"] = args.data_mime
    return options, {"auth": auth, "data_mime": args.data_mime}


def run_request(args: argparse.Namespace) -> int:
    metadata = args.metadata

    def body() -> None:
        routing = _routing(args)
        options = routing[0] if routing else {}
        if routing is None and (metadata is not None or args.metadata_push is not None):
            # Raw metadata text, declared as such (connect's default is composite).
            options = {"metadata_mime_type": "application/octet-stream"}
        options = {**options, **client_options(args)}
        with connect(args.url, **options) as plain:
            client: Any = plain
            if routing is not None:
                # Without --route the credentials and data MIME type still
                # travel as composite metadata, on the fallback's requests.
                client = (
                    plain.route(args.route, **routing[1])
                    if args.route is not None
                    else RoutedRequester(plain, compose(**routing[1]))
                )
            if args.rr is not None:
                reply = client.request_response(args.rr, metadata, timeout=args.timeout)
                if reply is not None:
                    show(reply, sys.stdout)
            elif args.fnf is not None:
                client.fire_and_forget(args.fnf, metadata, timeout=args.timeout)
            elif args.metadata_push is not None:
                if routing is not None:  # a routed push: the text as a text/plain entry
                    extra = [("text/plain", args.metadata_push.encode())]
                    client.metadata_push(extra, timeout=args.timeout)
                else:
                    client.metadata_push(args.metadata_push, timeout=args.timeout)
            else:
                if args.stream is not None:
                    items = client.request_stream(
                        args.stream, metadata, prefetch=args.prefetch, timeout=args.timeout
                    )
                else:
                    items = client.request_channel(
                        args.channel, metadata, prefetch=args.prefetch, timeout=args.timeout
                    )
                with items:
                    for item in items:
                        show(item, sys.stdout)

    return run_client(body, (RSocketError,))


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    request = sub.add_parser(
        "request",
        help="make one RSocket request and print the results",
        description="Make one request; each payload received is printed on one line "
        "(metadata after a tab).",
    )
    request.add_argument("url", help=URL_HELP)
    kind = request.add_mutually_exclusive_group(required=True)
    kind.add_argument("--rr", metavar="DATA", help="request-response")
    kind.add_argument("--fnf", metavar="DATA", help="fire-and-forget")
    kind.add_argument("--stream", metavar="DATA", help="request-stream")
    kind.add_argument(
        "--channel", metavar="DATA", nargs="+", help="request-channel, one payload per argument"
    )
    kind.add_argument("--metadata-push", metavar="METADATA", help="metadata push")
    request.add_argument("--metadata", "-m", help="metadata for the (first) payload")
    routed = request.add_argument_group(
        "routing (composite metadata in SETUP and the request, docs/extensions.md)"
    )
    routed.add_argument("--route", metavar="ROUTE", help="the route (e.g. a Spring destination)")
    auth = routed.add_mutually_exclusive_group()
    auth.add_argument("--auth-simple", metavar="USER:PASS", help="simple authentication")
    auth.add_argument("--auth-bearer", metavar="TOKEN", help="bearer token authentication")
    routed.add_argument(
        "--data-mime", metavar="MIME", help="the data MIME type (SETUP and request)"
    )
    request.add_argument("--prefetch", type=int, default=256, help="stream window (256)")
    request.add_argument("--timeout", type=float, default=30.0, help="seconds (30)")
    add_client_options(request)
    request.set_defaults(run=run_request)

"""``sansrs request URL ...``: one RSocket request from the command line, its
answers printed one per line (metadata after a tab). Exit codes
(:mod:`.exits`): 2 means the peer answered with an ERROR."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..rsocket import Payload, RSocketError, connect
from .exits import run_client

__all__ = ["add_parsers", "run_request"]


def show(payload: Payload, out: TextIO) -> None:
    """One payload on one line: data, then its metadata after a tab."""
    line = payload.data.decode("utf-8", "backslashreplace")
    if payload.metadata is not None:
        line += "\t[metadata " + payload.metadata.decode("utf-8", "backslashreplace") + "]"
    print(line, file=out, flush=True)



def run_request(args: argparse.Namespace) -> int:
    metadata = args.metadata

    def body() -> None:
        with connect(args.url) as client:
            if args.rr is not None:
                reply = client.request_response(args.rr, metadata, timeout=args.timeout)
                if reply is not None:
                    show(reply, sys.stdout)
            elif args.fnf is not None:
                client.fire_and_forget(args.fnf, metadata, timeout=args.timeout)
            elif args.metadata_push is not None:
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
    request.add_argument("url", help="tcp://HOST:PORT")
    kind = request.add_mutually_exclusive_group(required=True)
    kind.add_argument("--rr", metavar="DATA", help="request-response")
    kind.add_argument("--fnf", metavar="DATA", help="fire-and-forget")
    kind.add_argument("--stream", metavar="DATA", help="request-stream")
    kind.add_argument(
        "--channel", metavar="DATA", nargs="+", help="request-channel, one payload per argument"
    )
    kind.add_argument("--metadata-push", metavar="METADATA", help="metadata push")
    request.add_argument("--metadata", "-m", help="metadata for the (first) payload")
    request.add_argument("--prefetch", type=int, default=256, help="stream window (256)")
    request.add_argument("--timeout", type=float, default=30.0, help="seconds (30)")
    request.set_defaults(run=run_request)

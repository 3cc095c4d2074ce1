"""``sansrs request URL ...``: one RSocket request from the command line, its
answers printed one per line (metadata after a tab). Exit codes: 0 ok, 1 bad
arguments, 2 the peer answered with an ERROR, 3 connection problem."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..drive.errors import ConnectionClosed
from ..rsocket.client import connect
from ..rsocket.errors import RSocketError
from ..rsocket.types import Payload

__all__ = ["add_parsers", "run_request"]


def show(payload: Payload, out: TextIO) -> None:
    """One payload on one line: data, then its metadata after a tab."""
    line = payload.data.decode("utf-8", "backslashreplace")
    if payload.metadata is not None:
        line += "\t[metadata " + payload.metadata.decode("utf-8", "backslashreplace") + "]"
    print(line, file=out, flush=True)



def run_request(args: argparse.Namespace) -> int:
    metadata = args.metadata
    try:
        with connect(args.url) as client:
            if args.rr is not None:
                reply = client.request_response(args.rr, metadata, timeout=args.timeout)
                if reply is not None:
                    show(reply, sys.stdout)
            elif args.fnf is not None:
                client.fire_and_forget(args.fnf, metadata, timeout=args.timeout)
            elif args.stream is not None:
                with client.request_stream(
                    args.stream, metadata, prefetch=args.prefetch, timeout=args.timeout
                ) as items:
                    for item in items:
                        show(item, sys.stdout)
            elif args.metadata_push is not None:
                client.metadata_push(args.metadata_push, timeout=args.timeout)
            else:
                with client.request_channel(
                    args.channel, metadata, prefetch=args.prefetch, timeout=args.timeout
                ) as items:
                    for item in items:
                        show(item, sys.stdout)
    except RSocketError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ConnectionClosed, OSError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except ValueError as exc:  # a malformed URL or argument
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0



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

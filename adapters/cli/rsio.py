"""``sansrs subscribe URL NAME``: print the elements of a remote
reactive-streams-io publisher. Exit codes (:mod:`.exits`): 2 means the
publisher signalled an error."""

from __future__ import annotations

import argparse

from ..rsio import DEFAULT_PREFETCH, RsioError, connect
from ..rsio.demo import COUNTER_SIZE
from .exits import URL_HELP, run_client
from .tls import add_client_options, client_options

__all__ = ["add_parsers", "run_subscribe"]


def _show(element: bytes) -> str:
    if len(element) == COUNTER_SIZE:
        return str(int.from_bytes(element, "big"))
    if len(element) > 64:
        return f"<{len(element)} bytes {element[:8].hex()}...>"
    return element.decode("utf-8", "backslashreplace")


def run_subscribe(args: argparse.Namespace) -> int:
    """Print each element of the remote publisher on one line (8-byte
    elements as integers, large ones as a size and a prefix)."""

    def body() -> None:
        with (
            connect(args.url, **client_options(args)) as client,
            client.subscribe(args.name, prefetch=args.prefetch, timeout=args.timeout) as elements,
        ):
            for i, element in enumerate(elements):
                if args.limit is not None and i >= args.limit:
                    break  # leaving the block cancels the subscription
                print(_show(element), flush=True)

    return run_client(body, (RsioError,))


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "subscribe",
        help="subscribe to a reactive-streams-io publisher and print its elements",
        description="Subscribe to NAME on an rsio server (e.g. `sansrs serve --protocol rsio`: "
        "counter, counter/N, blobs, blobs/N) and print one element per line.",
    )
    parser.add_argument("url", help=URL_HELP)
    parser.add_argument("name", help="publisher name")
    parser.add_argument("--limit", type=int, help="cancel after this many elements")
    parser.add_argument(
        "--prefetch", type=int, default=DEFAULT_PREFETCH, help=f"demand window ({DEFAULT_PREFETCH})"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per element (30)")
    add_client_options(parser)
    parser.set_defaults(run=run_subscribe)

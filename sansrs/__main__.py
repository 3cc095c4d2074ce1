"""``python -m sansrs`` / ``sansrs``: serve the demo responder or make requests.

    sansrs serve tcp://127.0.0.1:0            # prints READY <url>, Ctrl-C stops
    sansrs request tcp://127.0.0.1:7878 --rr hello
    sansrs request URL --stream '{"n": 5, "size": 4}'
    sansrs request URL --channel a b c
    sansrs request URL --fnf ping
    sansrs request URL --metadata-push m
    sansrs serve --protocol rsio tcp://127.0.0.1:0     # reactive-streams-io demo publishers
    sansrs subscribe URL counter/10                   # docs/protocols/rsio.md
    sansrs ditto serve|history|search ...     # Ditto over WebSocket, docs/protocols/ditto.md

The network code lives in ``sansrs.adapters``; this module only parses
arguments and prints.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence


def _show(payload: object, out: object) -> None:
    data = getattr(payload, "data", b"")
    metadata = getattr(payload, "metadata", None)
    line = data.decode("utf-8", "backslashreplace")
    if metadata is not None:
        line += "\t[metadata " + metadata.decode("utf-8", "backslashreplace") + "]"
    print(line, file=out, flush=True)  # type: ignore[call-overload]


def _serve(args: argparse.Namespace) -> int:
    if args.protocol == "rsio":
        return int(importlib.import_module("sansrs.adapters.cli.rsio").run_serve(args))
    demo = importlib.import_module("sansrs.adapters.rsocket.demo")
    serve = importlib.import_module("sansrs.adapters.rsocket.client").serve

    serve_until_closed = importlib.import_module("sansrs.adapters.cli.serve").serve_until_closed
    options: dict[str, object] = {}
    if args.lease:
        options["lease"] = True
    if getattr(args, "loop", "thread") != "thread":
        options["loop"] = args.loop
    return int(
        serve_until_closed(lambda: serve(args.url, handler_factory=demo.DemoHandler, **options))
    )


def _request(args: argparse.Namespace) -> int:
    # importlib: mypy cannot follow the adapters/ -> sansrs.adapters mapping.
    connect = importlib.import_module("sansrs.adapters.rsocket.client").connect
    RSocketError = importlib.import_module("sansrs.adapters.rsocket.types").RSocketError
    ConnectionClosed = importlib.import_module("sansrs.adapters.drive").ConnectionClosed

    metadata = args.metadata
    try:
        with connect(args.url) as client:
            if args.rr is not None:
                reply = client.request_response(args.rr, metadata, timeout=args.timeout)
                if reply is not None:
                    _show(reply, sys.stdout)
            elif args.fnf is not None:
                client.fire_and_forget(args.fnf, metadata, timeout=args.timeout)
            elif args.stream is not None:
                with client.request_stream(
                    args.stream, metadata, prefetch=args.prefetch, timeout=args.timeout
                ) as items:
                    for item in items:
                        _show(item, sys.stdout)
            elif args.metadata_push is not None:
                client.metadata_push(args.metadata_push, timeout=args.timeout)
            else:
                with client.request_channel(
                    args.channel, metadata, prefetch=args.prefetch, timeout=args.timeout
                ) as items:
                    for item in items:
                        _show(item, sys.stdout)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sansrs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="run the demo responder",
        description="Run the demo responder (docs/adapters.md describes its exact behaviour). "
        "Prints 'READY <url>' once listening; port 0 picks a free port.",
    )
    serve.add_argument("url", help="tcp://HOST:PORT")
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
    serve.set_defaults(run=_serve)
    request = sub.add_parser(
        "request", help="make one request and print the results",
        description="Make one request; each payload received is printed on one line "
        "(metadata after a tab).",
    )
    request.add_argument("url", help="tcp://HOST:PORT")
    kind = request.add_mutually_exclusive_group(required=True)
    kind.add_argument("--rr", metavar="DATA", help="request-response")
    kind.add_argument("--fnf", metavar="DATA", help="fire-and-forget")
    kind.add_argument("--stream", metavar="DATA", help="request-stream")
    kind.add_argument("--channel", metavar="DATA", nargs="+", help="request-channel, one "
                      "payload per argument")
    kind.add_argument("--metadata-push", metavar="METADATA", help="metadata push")
    request.add_argument("--metadata", "-m", help="metadata for the (first) payload")
    request.add_argument("--prefetch", type=int, default=256, help="stream window (256)")
    request.add_argument("--timeout", type=float, default=30.0, help="seconds (30)")
    request.set_defaults(run=_request)
    # `sansrs subscribe URL NAME` (reactive-streams-io): lives with the adapter.
    importlib.import_module("sansrs.adapters.cli.rsio").add_parsers(sub)
    # `sansrs ditto serve|history|search`: parsers and commands live with the adapter.
    importlib.import_module("sansrs.adapters.cli.ditto").add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())

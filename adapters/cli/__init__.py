"""The ``sansrs`` command (also ``python -m sansrs``): serve the demos, make
requests, subscribe, talk to Ditto.

    sansrs serve tcp://127.0.0.1:0            # prints READY <url>, Ctrl-C stops
    sansrs request tcp://127.0.0.1:7878 --rr hello
    sansrs request URL --stream '{"n": 5, "size": 4}'
    sansrs request URL --channel a b c
    sansrs request URL --fnf ping
    sansrs request URL --metadata-push m
    sansrs serve --protocol rsio tcp://127.0.0.1:0     # reactive-streams-io demo publishers
    sansrs subscribe URL counter/10                   # docs/protocols/rsio.md
    sansrs ditto serve|history|search ...     # Ditto over WebSocket, docs/protocols/ditto.md

One module per subcommand group: :mod:`.serve` (``serve`` and the server
loop every ``serve`` shares), :mod:`.rsocket` (``request``), :mod:`.rsio`
(``subscribe``), :mod:`.ditto` (``ditto ...``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import ditto, rsio, rsocket, serve

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sansrs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parsers(sub)
    rsocket.add_parsers(sub)
    rsio.add_parsers(sub)
    ditto.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())

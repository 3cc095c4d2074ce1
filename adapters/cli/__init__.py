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

The help text is :data:`DESCRIPTION` (plain text; this docstring is for
readers of the code). One module per subcommand group: :mod:`.serve` (``serve`` and the server
loop every ``serve`` shares), :mod:`.rsocket` (``request``), :mod:`.rsio`
(``subscribe``), :mod:`.ditto` (``ditto ...``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from sansrs import __version__

from . import ditto, rsio, rsocket, serve
from .exits import EXIT_CODES, USAGE

__all__ = ["build_parser", "main"]

DESCRIPTION = """\
Serve the demos, make RSocket requests, subscribe to reactive-streams-io
publishers, read Ditto history. Every command takes a URL: tcp://HOST:PORT,
tls://HOST:PORT, unix:///PATH, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH
(ws:// and wss:// need the 'ws' extra: pip install 'sansrs[ws]').

  sansrs serve tcp://127.0.0.1:0                 # prints READY <url>; Ctrl-C stops
  sansrs request tcp://127.0.0.1:PORT --rr hello
  sansrs request URL --stream '{"n": 5, "size": 4}'
  sansrs request URL --channel a b c
  sansrs serve --protocol rsio tcp://127.0.0.1:0  # reactive-streams-io demo publishers
  sansrs subscribe URL counter/10
  sansrs ditto serve|history|search ...          # Ditto over WebSocket

'sansrs COMMAND --help' shows a command's options."""


class Parser(argparse.ArgumentParser):
    """Bad usage exits with the documented usage status (argparse's own 2
    is the peer's error here), after the usage line and the message."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(
        prog="sansrs",
        description=DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sansrs {__version__}")
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

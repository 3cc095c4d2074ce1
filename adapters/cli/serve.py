"""The command line's server loop, shared by every ``sansrs ... serve``
subcommand (RSocket, rsio, Ditto): start the server, print ``READY <url>``
once it listens (port 0 shows the real port), run until it closes, SIGTERM
or Ctrl-C."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Protocol

__all__ = ["serve_until_closed"]


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
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with server:
        print(f"READY {server.url}", flush=True)
        try:
            while not server.wait_closed(1.0):
                pass
        except KeyboardInterrupt:
            pass
    return 0

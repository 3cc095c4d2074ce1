"""Exit codes of the client commands (``request``, ``subscribe``, ``ditto
history`` / ``search``), the same for every protocol: 0 ok, 1 bad arguments,
2 the peer answered with an error, 3 connection problem (refused, lost,
timed out), 130 interrupted. A reader that goes away (``... | head``) ends
the command quietly with 0, as line tools do."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..drive.errors import ConnectionClosed

__all__ = ["CONNECTION", "INTERRUPTED", "OK", "REMOTE", "USAGE", "run_client"]

OK = 0
USAGE = 1
REMOTE = 2
CONNECTION = 3
INTERRUPTED = 130


def run_client(
    body: Callable[[], int | None],
    remote: tuple[type[BaseException], ...],
    *,
    describe: Callable[[BaseException], str] = str,
    usage: tuple[type[BaseException], ...] = (),
) -> int:
    """Run ``body`` and map what it raises to an exit code, with ``error: ...``
    on stderr: ``remote`` errors (the peer's answer, shown by ``describe``),
    connection errors, ``ValueError`` and ``usage`` errors (bad arguments)."""
    bad_arguments: tuple[type[BaseException], ...] = (ValueError, *usage)
    try:
        return int(body() or OK)
    except BrokenPipeError:
        # Leaving the with-blocks cancelled what was running; silence the
        # interpreter's own flush of the closed stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except KeyboardInterrupt:
        return INTERRUPTED
    except remote as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return REMOTE
    except (ConnectionClosed, OSError, TimeoutError) as exc:
        status = getattr(exc, "status", None)  # a refused WebSocket upgrade
        prefix = f"HTTP {status}: " if status is not None else ""
        print(f"error: {prefix}{exc}", file=sys.stderr)
        return CONNECTION
    except bad_arguments as exc:  # a malformed URL or argument
        print(f"error: {exc}", file=sys.stderr)
        return USAGE

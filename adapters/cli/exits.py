"""Exit codes of every ``sansrs`` command, the same for every protocol
(:data:`EXIT_CODES`, shown by ``sansrs --help``): 0 ok, 1 usage (bad
arguments, an option the protocol does not take, a missing extra, a server
that cannot listen), 2 the peer answered with an error, 3 connection problem
(refused, lost, timed out), 130 interrupted. A reader that goes away
(``... | head``) ends the command quietly with 0, as line tools do."""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Callable

from ..drive.errors import ConnectionClosed
from ..transport import MissingExtraError
from .tls import untrusted

__all__ = ["CONNECTION", "EXIT_CODES", "INTERRUPTED", "OK", "REMOTE", "URL_HELP", "USAGE",
           "run_client"]

OK = 0
USAGE = 1
REMOTE = 2
CONNECTION = 3
INTERRUPTED = 130

URL_HELP = "tcp://HOST:PORT, tls://HOST:PORT, unix:///PATH, ws://HOST:PORT/PATH or wss://..."

EXIT_CODES = f"""\
exit status:
  {OK}    ok
  {USAGE}    usage: bad arguments, an option the protocol does not take, a missing
       extra ('pip install sansrs[ws]'), a server that cannot listen
  {REMOTE}    the peer answered with an error (RSocket ERROR, rsio onError, Ditto failed)
  {CONNECTION}    connection problem: refused, lost, timed out, HTTP upgrade refused
  {INTERRUPTED}  interrupted (Ctrl-C)"""


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
    bad_arguments: tuple[type[BaseException], ...] = (ValueError, MissingExtraError, *usage)
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
    except ssl.SSLCertVerificationError as exc:  # the cause named, not OpenSSL's code
        print(f"error: {untrusted(exc)}", file=sys.stderr)
        return CONNECTION
    except (ConnectionClosed, OSError, TimeoutError) as exc:
        status = getattr(exc, "status", None)  # a refused WebSocket upgrade
        prefix = f"HTTP {status}: " if status is not None else ""
        print(f"error: {prefix}{exc}", file=sys.stderr)
        return CONNECTION
    except bad_arguments as exc:  # a malformed URL or argument
        print(f"error: {exc}", file=sys.stderr)
        return USAGE

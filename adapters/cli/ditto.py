"""``sansrs ditto ...``: the Ditto commands of the ``sansrs`` program.

    sansrs ditto serve ws://127.0.0.1:0/ws/2 --history examples/ditto_history.jsonl
    sansrs ditto history ws://HOST:PORT/ws/2 org.eclipse.ditto:thing-1 --from-revision 2
    sansrs ditto search ws://HOST:PORT/ws/2 --filter 'eq(attributes/location,"kitchen")'

``history`` and ``search`` print one JSON line per event (per thing) on
stdout and a progress line on stderr. Exit codes: :mod:`.exits` (2: Ditto
answered ``failed``). The help text is :data:`DESCRIPTION`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from .exits import EXIT_CODES, run_client
from .tls import add_client_options, client_options

__all__ = ["add_parsers"]

DESCRIPTION = """\
Eclipse Ditto's streaming subscriptions over WebSocket (needs the 'ws' extra:
pip install 'sansrs[ws]').

  sansrs ditto serve ws://127.0.0.1:0/ws/2 --history examples/ditto_history.jsonl
  sansrs ditto history ws://HOST:PORT/ws/2 org.eclipse.ditto:thing-1 --from-revision 2
  sansrs ditto search ws://HOST:PORT/ws/2 --filter 'eq(attributes/location,"kitchen")'

history and search print one JSON line per event (per thing) on stdout and a
progress line on stderr."""

#: Progress goes to stderr every this many items (and once at the end).
PROGRESS_EVERY = 1000


class _Progress:
    """One progress line on stderr: rewritten in place on a terminal, else a
    line every ``PROGRESS_EVERY`` items and a last one at the end."""

    def __init__(self, what: str, out: TextIO) -> None:
        self.what = what
        self.count = 0
        self._out = out
        self._tty = out.isatty()

    def step(self) -> None:
        self.count += 1
        if self.count % PROGRESS_EVERY == 0:
            self._show("")

    def _show(self, state: str) -> None:
        line = f"{self.what}: {self.count}{state}"
        if self._tty:
            print("\r" + line, end="", file=self._out, flush=True)
        else:
            print(line, file=self._out, flush=True)

    def finish(self, state: str) -> None:
        self._show(f" ({state})")
        if self._tty:
            print(file=self._out, flush=True)


def _credentials(args: argparse.Namespace) -> dict[str, Any]:
    """``--user``/``--password`` or ``--token``; the secrets may also come from
    ``SANSRS_DITTO_PASSWORD`` / ``SANSRS_DITTO_TOKEN`` (kept out of ``ps``)."""
    password = args.password or os.environ.get("SANSRS_DITTO_PASSWORD")
    token = args.token or os.environ.get("SANSRS_DITTO_TOKEN")
    if args.user is not None:
        if password is None:
            raise ValueError("--user needs --password (or SANSRS_DITTO_PASSWORD)")
        if args.token:
            raise ValueError("pass --user/--password or --token, not both")
        return {"user": args.user, "password": password}
    if args.password:
        raise ValueError("--password needs --user")
    if token:
        return {"token": token}
    return {}


def _ended(exc: BaseException) -> str:
    if isinstance(exc, BrokenPipeError):
        return "stopped: output closed"
    return "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"


def _print_json(item: Any, out: TextIO) -> None:
    out.write(json.dumps(item, separators=(",", ":"), ensure_ascii=False) + "\n")


def _describe(exc: BaseException) -> str:
    from sansrs.ditto import DittoRemoteError

    assert isinstance(exc, DittoRemoteError)
    detail = f" ({exc.description})" if exc.description else ""
    return f"Ditto answered {exc.status} {exc.code}: {exc.error.message}{detail}"


def token_command(command: str, timeout: float) -> Callable[[], str]:
    """A token provider that runs ``command`` (split as a shell would, run
    without one) and takes its stdout, stripped: asked for the upgrade, before
    each expiry and on every reconnect (``--token-command``)."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("--token-command is empty")

    def provide() -> str:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        token = done.stdout.strip()
        if done.returncode != 0 or not token:
            why = done.stderr.strip()[:200] or f"exit status {done.returncode}, no token"
            raise OSError(f"--token-command failed: {why}")
        return token

    return provide


def _token_options(args: argparse.Namespace, credentials: dict[str, Any]) -> None:
    """``--token-command`` and ``--token-lifetime`` / ``--refresh-margin``."""
    if args.token_command is not None:
        if credentials:
            raise ValueError("pass --token-command or --user/--password/--token, not both")
        credentials["token"] = token_command(args.token_command, args.timeout)
    if args.token_lifetime is not None or args.refresh_margin is not None:
        from ..ditto.tokens import TokenPolicy

        margin = 60.0 if args.refresh_margin is None else args.refresh_margin
        credentials["token_policy"] = TokenPolicy(lifetime=args.token_lifetime,
                                                  refresh_margin=margin)


def _run_client(args: argparse.Namespace, body: Any, *, resume: bool = False) -> int:
    """Run ``body(conn)`` on a connection; ``resume``: on a
    :class:`~..ditto.session.DittoSession` that reconnects (``--max-outage``)."""
    from sansrs.ditto import DittoRemoteError, LocalProtocolError

    from ..ditto import connect

    def run() -> int:
        credentials = _credentials(args)
        _token_options(args, credentials)
        credentials.update(client_options(args))
        if resume:
            from ..ditto.resume import ReconnectPolicy
            from ..ditto.session import DittoSession

            policy = ReconnectPolicy(max_outage=args.max_outage)
            with DittoSession(args.url, reconnect=policy, connect_timeout=args.timeout,
                              **credentials) as session:
                return int(body(session))
        with connect(args.url, connect_timeout=args.timeout, **credentials) as conn:
            return int(body(conn))

    return run_client(run, (DittoRemoteError,), describe=_describe, usage=(LocalProtocolError,))


def _print_all(
    what: str, stream: Any, items: Callable[[Any], Iterable[Any]], *, flush: bool = False
) -> int:
    """Print every item of ``stream`` (a context manager that cancels on exit)
    as a JSON line on stdout, with a progress line on stderr; ``flush``:
    each line at once (a followed thing's live events appear as they happen)."""
    progress = _Progress(what, sys.stderr)
    out = sys.stdout
    with stream as entered:
        try:
            for element in entered:
                for item in items(element):
                    _print_json(item, out)
                    progress.step()
                if flush:
                    out.flush()
        except BaseException as exc:
            progress.finish(_ended(exc))
            raise
    out.flush()
    progress.finish("complete")
    return 0


def _history(args: argparse.Namespace) -> int:
    if args.follow and (args.to_revision is not None or args.to_timestamp is not None):
        print("error: --follow has no end: no --to-revision / --to-timestamp", file=sys.stderr)
        return 1
    if args.follow and args.policy:
        print("error: --follow follows a thing's live events, not a policy's", file=sys.stderr)
        return 1

    def body(conn: Any) -> int:
        query: dict[str, Any] = {
            "from_revision": args.from_revision,
            "from_timestamp": args.from_timestamp,
            "filter": args.filter,
            "prefetch": args.prefetch,
        }
        if args.follow:  # waits for live events as long as it takes
            events = conn.follow(args.thing_id, **query)
        else:
            events = conn.subscribe_for_persisted_events(
                args.thing_id,
                group="policies" if args.policy else "things",
                to_revision=args.to_revision,
                to_timestamp=args.to_timestamp,
                timeout=args.timeout,
                **query,
            )
        return _print_all(f"history of {args.thing_id}: events", events, lambda e: (e,),
                          flush=args.follow)

    return _run_client(args, body, resume=args.follow or args.reconnect)


def _search(args: argparse.Namespace) -> int:
    def body(conn: Any) -> int:
        pages = conn.search(
            filter=args.filter,
            options=args.options,
            namespaces=args.namespaces,
            fields=args.fields,
            timeout=args.timeout,
        )
        return _print_all("search: things", pages, lambda page: page)

    return _run_client(args, body, resume=args.reconnect)


def _serve(args: argparse.Namespace) -> int:
    from sansrs.ditto import DittoServerConfig

    from ..ditto import DittoHistoryServer, require_basic, require_bearer, serve
    from ..ditto.history import JsonLinesHistory
    from .serve import serve_until_closed

    def start() -> DittoHistoryServer:
        credentials = _credentials(args)
        authenticate = None
        if "user" in credentials:
            authenticate = require_basic(credentials["user"], credentials["password"])
        elif "token" in credentials:
            authenticate = require_bearer(credentials["token"])
        history = JsonLinesHistory(args.history)
        config = DittoServerConfig(idle_timeout=args.idle_timeout)
        ssl_context = None
        if args.certfile is not None:
            from ..transport.tls import server_context

            ssl_context = server_context(args.certfile, args.keyfile)
        return serve(
            args.url, history, authenticate=authenticate, config=config, ssl_context=ssl_context
        )

    return serve_until_closed(start)


def _auth_options(parser: argparse.ArgumentParser, *, server: bool) -> None:
    if server:
        parser.add_argument("--certfile", help="wss://: the server's certificate chain (PEM)")
        parser.add_argument("--keyfile", help="wss://: its private key (PEM), if not in certfile")
    else:
        add_client_options(parser)
    who = "required from clients" if server else "sent"
    parser.add_argument("--user", help=f"HTTP Basic user name ({who})")
    parser.add_argument("--password", help="HTTP Basic password (or SANSRS_DITTO_PASSWORD)")
    parser.add_argument("--token", help=f"Bearer token ({who}; or SANSRS_DITTO_TOKEN)")
    if not server:
        parser.add_argument("--token-command", metavar="CMD",
                            help="a command that prints a Bearer token: run for the upgrade, "
                            "before the token expires (sent as JWT-TOKEN) and on reconnects")
        parser.add_argument("--token-lifetime", type=float, metavar="S",
                            help="life of a token that is not a JWT with 'exp' (seconds)")
        parser.add_argument("--refresh-margin", type=float, metavar="S",
                            help="refresh the token this long before it expires (60)")


def _client_options(
    parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]
) -> None:
    """What every client subcommand takes last: the wait timeout and the
    credentials; ``run`` runs it."""
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per wait (30)")
    _auth_options(parser, server=False)
    parser.set_defaults(run=run)


def add_parsers(sub: Any) -> None:
    """Add ``ditto`` and its commands to the ``sansrs`` sub-parsers ``sub``."""
    ditto = sub.add_parser(
        "ditto",
        help="Eclipse Ditto streaming subscriptions (history, search) over WebSocket",
        description=DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = ditto.add_subparsers(dest="ditto_command", required=True, metavar="COMMAND")

    history = commands.add_parser(
        "history",
        help="print a thing's persisted events as JSON lines",
        description="Subscribe for the persisted events of THING_ID and print each event "
        "(a Ditto Protocol message) as one JSON line; progress on stderr.",
    )
    history.add_argument("url", help="ws://HOST:PORT/ws/2 or wss://...")
    history.add_argument("thing_id", metavar="THING_ID", help="<namespace>:<name>")
    history.add_argument("--from-revision", type=int, help="first revision (negative: last n)")
    history.add_argument("--to-revision", type=int, help="last revision (<= 0: from the latest)")
    history.add_argument("--from-timestamp", help="ISO-8601 instant, e.g. 2022-10-25T14:00:00Z")
    history.add_argument("--to-timestamp", help="ISO-8601 instant")
    history.add_argument("--filter", help="RQL filter over the events, e.g. exists(attributes)")
    history.add_argument("--policy", action="store_true", help="THING_ID names a policy")
    history.add_argument("--prefetch", type=int, default=64, help="events requested ahead (64)")
    history.add_argument("--follow", action="store_true",
                         help="after the history, print the thing's live events as they happen "
                         "(no gap, no duplicate; reconnects and resumes; until interrupted)")
    history.add_argument("--reconnect", action="store_true",
                         help="on a lost connection reconnect and resume after the last revision")
    history.add_argument("--max-outage", type=float, default=60.0, metavar="S",
                         help="--reconnect/--follow: give up after an outage this long (60)")
    _client_options(history, _history)

    search = commands.add_parser(
        "search",
        help="print the things a search finds as JSON lines",
        description="Run a search subscription (Ditto's older search protocol) and print "
        "each thing as one JSON line; progress on stderr.",
    )
    search.add_argument("url", help="ws://HOST:PORT/ws/2 or wss://...")
    search.add_argument("--filter", help="RQL filter")
    search.add_argument("--options", help='e.g. "size(10),sort(+thingId)"')
    search.add_argument("--namespaces", nargs="+", help="namespaces to search")
    search.add_argument("--fields", help="field selector, e.g. thingId,attributes")
    search.add_argument("--reconnect", action="store_true",
                        help="on a lost connection reconnect and go on after the last thingId "
                        "(searches ordered by thingId)")
    search.add_argument("--max-outage", type=float, default=60.0, metavar="S",
                        help="--reconnect: give up after an outage this long (60)")
    _client_options(search, _search)

    serve = commands.add_parser(
        "serve",
        help="serve the Ditto protocol from a JSON-lines history file",
        description="Serve streaming and search subscriptions over WebSocket from FILE "
        "(one Ditto event message a line). Prints 'READY <url>' once listening; port 0 "
        "picks a free port.",
    )
    serve.add_argument("url", help="ws://HOST:PORT/ws/2")
    serve.add_argument("--history", required=True, metavar="FILE", help="JSON-lines events")
    serve.add_argument("--idle-timeout", type=float, default=60.0,
                       help="seconds without interaction before a subscription fails (60)")
    _auth_options(serve, server=True)
    serve.set_defaults(run=_serve)

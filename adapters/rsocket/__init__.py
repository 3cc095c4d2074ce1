"""RSocket over sockets, threads and loops: the public API.

    from sansrs.adapters.rsocket import connect, serve, Payload, ApplicationError

    with serve("tcp://127.0.0.1:0", handler) as server:
        with connect(server.url) as client:
            client.request_response(b"hello", timeout=5)

- :func:`connect` / :class:`Client`, :func:`serve` / :class:`Server`: the
  synchronous API (a thread per connection, or ``loop="selector"``); every
  call is thread-safe. :class:`RSocketPeer` is one connection (a client, or
  ``server.peers`` for server-initiated requests).
- :func:`connect_resumable` / :func:`serve_resumable`: sessions that survive
  dropped connections (``docs/resumption.md``).
- :mod:`sansrs.adapters.rsocket.aio`: the same under asyncio.
- Values and errors: :class:`Payload`, :class:`Request` (what a handler
  receives), :class:`Handler` (its optional methods), :class:`Setup` (what
  a server's ``authenticate`` hook sees), :class:`RSocketError`
  (an ERROR frame; :class:`ApplicationError` is the one to raise), and
  :class:`~sansrs.adapters.drive.ConnectionClosed` (the connection is gone).
"""

from ..drive.errors import ConnectionClosed
from .client import Client, connect
from .errors import ApplicationError, RSocketError
from .fast import as_payload
from .options import EngineOptions
from .peer import DEFAULT_PREFETCH, RemotePublisher, RSocketPeer
from .resume import ResumableClient, ResumeOptions, connect_resumable, serve_resumable
from .server import Server, serve
from .types import Handler, Payload, Request, Setup

__all__ = [
    "DEFAULT_PREFETCH",
    "ApplicationError",
    "Client",
    "ConnectionClosed",
    "EngineOptions",
    "Handler",
    "Payload",
    "RSocketError",
    "RSocketPeer",
    "RemotePublisher",
    "Request",
    "ResumableClient",
    "ResumeOptions",
    "Server",
    "Setup",
    "as_payload",
    "connect",
    "connect_resumable",
    "serve",
    "serve_resumable",
]

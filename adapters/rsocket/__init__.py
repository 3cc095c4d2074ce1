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
- Routing and authentication (``docs/extensions.md``): :class:`Router`
  (handlers per route and interaction model, ``{var}`` templates,
  an ``authenticate`` hook), ``client.route("users.{id}", 42, auth=...)``
  (:class:`RoutedRequester`), ``connect(url, auth=..., setup_route=...)``;
  credentials :class:`SimpleAuth`, :class:`BearerAuth`, :class:`CustomAuth`;
  :class:`LoadBalancedClient` over N servers (round robin or weighted).
- Values and errors: :class:`Payload`, :class:`Request` (what a handler
  receives), :class:`Handler` (its optional methods), :class:`RSocketError`
  (an ERROR frame; :class:`ApplicationError` is the one to raise), and
  :class:`~sansrs.adapters.drive.ConnectionClosed` (the connection is gone).
"""

from sansrs.rsocket.extensions import (
    COMPOSITE_METADATA,
    BearerAuth,
    CustomAuth,
    SimpleAuth,
    ZipkinTrace,
    compose,
)

from ..drive.errors import ConnectionClosed
from .balancer import LoadBalancedClient, NoTargetAvailable
from .balancer_strategy import BalancerConfig, RoundRobinStrategy, WeightedStrategy
from .client import Client, connect
from .errors import ApplicationError, RSocketError
from .fast import as_payload
from .options import EngineOptions
from .peer import DEFAULT_PREFETCH, RemoteBatchPublisher, RemotePublisher, RSocketPeer
from .resume import (
    ResumableClient,
    ResumableServer,
    ResumeOptions,
    SessionLoss,
    SessionLost,
    connect_resumable,
    serve_resumable,
)
from .routed import AsyncRoutedRequester, RoutedRequester
from .routing import Router, RouterConnection
from .server import Server, serve
from .types import Handler, Payload, Request, RoutedRequest

__all__ = [
    "COMPOSITE_METADATA",
    "DEFAULT_PREFETCH",
    "ApplicationError",
    "AsyncRoutedRequester",
    "BalancerConfig",
    "BearerAuth",
    "Client",
    "ConnectionClosed",
    "CustomAuth",
    "EngineOptions",
    "Handler",
    "LoadBalancedClient",
    "NoTargetAvailable",
    "Payload",
    "RSocketError",
    "RSocketPeer",
    "RemoteBatchPublisher",
    "RemotePublisher",
    "Request",
    "ResumableClient",
    "ResumableServer",
    "ResumeOptions",
    "RoundRobinStrategy",
    "RoutedRequest",
    "RoutedRequester",
    "Router",
    "RouterConnection",
    "Server",
    "SessionLoss",
    "SessionLost",
    "SimpleAuth",
    "WeightedStrategy",
    "ZipkinTrace",
    "as_payload",
    "compose",
    "connect",
    "connect_resumable",
    "serve",
    "serve_resumable",
]

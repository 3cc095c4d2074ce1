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
- Interceptors (``docs/interceptors.md``): ``connect(url,
  interceptors=Interceptors(connection=[...], requests=[...]))`` and the same
  for ``serve``; :class:`RSocketMetrics` (Prometheus, the ``metrics`` extra)
  and :class:`RSocketTracing` (OpenTelemetry spans, the ``tracing`` extra)
  are imported on first use, so this module never loads their libraries.
- Values and errors: :class:`Payload`, :class:`PayloadBatch` (what
  ``request_stream_batches`` hands out), :class:`Request` (what a handler
  receives), :class:`Handler` (its optional methods), :class:`RSocketError`
  (an ERROR frame; :class:`ApplicationError` is the one to raise), and
  :class:`~sansrs.adapters.drive.ConnectionClosed` (the connection is gone).
"""

from typing import TYPE_CHECKING

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
from .batch import PayloadBatch
from .client import Client, connect
from .errors import ApplicationError, RSocketError
from .fast import as_payload
from .interceptors import ConnectionInfo, Interceptors, Outcome, RequestInfo
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

if TYPE_CHECKING:  # imported on first use (below): optional extras
    from .metrics import RSocketMetrics
    from .tracing import RSocketTracing

__all__ = [
    "COMPOSITE_METADATA",
    "DEFAULT_PREFETCH",
    "ApplicationError",
    "AsyncRoutedRequester",
    "BalancerConfig",
    "BearerAuth",
    "Client",
    "ConnectionClosed",
    "ConnectionInfo",
    "CustomAuth",
    "EngineOptions",
    "Handler",
    "Interceptors",
    "LoadBalancedClient",
    "NoTargetAvailable",
    "Outcome",
    "Payload",
    "PayloadBatch",
    "RSocketError",
    "RSocketMetrics",
    "RSocketPeer",
    "RSocketTracing",
    "RemoteBatchPublisher",
    "RemotePublisher",
    "Request",
    "RequestInfo",
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


#: Names imported on first use: their modules need an optional extra.
_LAZY = {
    "RSocketMetrics": ".metrics",
    "RSocketTracing": ".tracing",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

"""Eclipse Ditto's streaming subscriptions over WebSocket: the public API.

    from sansrs.adapters.ditto import connect

    with connect("wss://ditto.example.com/ws/2", token="eyJ...") as ditto:
        for event in ditto.subscribe_for_persisted_events("org.acme:thing-1"): ...

- :func:`connect` / :class:`DittoConnection`: a client (history of persisted
  events, search) as blocking iterators or Publishers.
- :func:`serve` / :class:`DittoHistoryServer`: the protocol served from a
  :class:`HistorySource` (:class:`InMemoryHistory`, :class:`JsonLinesHistory`),
  with ``authenticate`` checks (:func:`require_basic`, :func:`require_bearer`);
  a source of your own builds on :func:`select_events`, :func:`search_pages`
  and :func:`thing_not_found` (what the shipped sources use).
- :mod:`sansrs.adapters.ditto.aio`: the same under asyncio.
- Errors: :class:`~sansrs.ditto.DittoRemoteError` (Ditto answered with an
  error, e.g. 404: an application error, not a protocol violation),
  :class:`~sansrs.adapters.drive.ConnectionClosed` (the connection is gone),
  ``WebSocketHandshakeError`` (the upgrade was refused, e.g. 401).
"""

from .batches import EventBatches
from .client import connect
from .errors import ConnectionClosed, DittoRemoteError, WebSocketHandshakeError
from .history import (
    HistoryRequest,
    HistorySource,
    InMemoryHistory,
    JsonLinesHistory,
    search_pages,
    select_events,
    thing_not_found,
)
from .peer import DEFAULT_PREFETCH, DittoConnection, DittoServerPeer
from .server import DittoHistoryServer, require_basic, require_bearer, serve
from .types import Authorize, basic_auth, bearer_auth

__all__ = [
    "DEFAULT_PREFETCH",
    "Authorize",
    "ConnectionClosed",
    "DittoConnection",
    "DittoHistoryServer",
    "DittoRemoteError",
    "DittoServerPeer",
    "EventBatches",
    "HistoryRequest",
    "HistorySource",
    "InMemoryHistory",
    "JsonLinesHistory",
    "WebSocketHandshakeError",
    "basic_auth",
    "bearer_auth",
    "connect",
    "require_basic",
    "require_bearer",
    "search_pages",
    "select_events",
    "serve",
    "thing_not_found",
]

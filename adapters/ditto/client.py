"""``connect(url)``: a client connection to a Ditto WebSocket endpoint
(``ws://host/ws/2``, ``wss://``), a :class:`~.peer.DittoConnection`. The
options (authentication, headers, correlation ids) are shared with the
asyncio API (:mod:`.aio`)."""

from __future__ import annotations

import dataclasses
import itertools
import ssl
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sansrs.ditto import DittoClientConfig

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, open_connection
from ..drive.keywords import check_keywords
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .engine import DittoClientEngine
from .peer import DittoConnection
from .types import basic_auth, bearer_auth, ws_endpoint

__all__ = ["DittoConnection", "client_config", "connect", "correlation_ids", "websocket_options"]


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
def connect(
    url: str | Endpoint,
    *,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    headers: Iterable[tuple[str, str]] = (),
    config: DittoClientConfig | None = None,
    connect_timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    **websocket: Any,
) -> DittoConnection:
    """Connect to Ditto's WebSocket endpoint (``ws://host:port/ws/2``, ``wss://``).

    ``user``/``password`` send HTTP Basic authentication, ``token`` a Bearer
    token, in the upgrade request; ``headers`` adds any other request headers.
    ``wss://``: ``ssl_context`` (default: system CAs, host name checked) and
    ``server_hostname`` (the name to check instead of the URL's host).
    ``websocket``: further ``WebSocketOptions`` (``max_message_size``, ...).
    ``loop``: ``"thread"`` (default: a thread of its own), ``"selector"`` (the
    process-wide selector loop) or a :class:`~.selector.Loop` (one thread for
    many connections); ``loop_config``: the thread driver's limits and
    timeouts. A refused upgrade raises ``WebSocketHandshakeError`` (a
    ``ConnectionError``) with its ``status``. Each subscribe carries a fresh
    ``correlation-id`` (:func:`correlation_ids`, unless ``config`` brings
    its own factory), so Ditto's
    answers are matched to it even for the same entity or an error response.
    """
    options = websocket_options(user, password, token, headers, websocket)
    config = client_config(config)

    return open_connection(
        ws_endpoint(url),
        lambda transport: DittoClientEngine(config),
        DittoConnection,
        name="sansrs-ditto",
        loop=loop,
        config=loop_config,
        connect_timeout=connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=options,
    )


#: What a connect's ``timeout=`` most likely meant.
TIMEOUT_HINT = {
    "timeout": "the connect's own bound is connect_timeout=, and each subscription takes "
    "timeout= (conn.subscribe_for_persisted_events(thing_id, timeout=5))"
}


def websocket_options(
    user: str | None,
    password: str | None,
    token: str | None,
    headers: Iterable[tuple[str, str]],
    websocket: Mapping[str, Any],
) -> WebSocketOptions:
    """The upgrade request's options: authentication and extra headers.
    ``websocket``: the rest of ``connect``'s keywords (sync or asyncio: the
    same parameters), each a ``WebSocketOptions`` field, else a TypeError
    naming ``connect`` and the parameter meant."""
    check_keywords(connect, websocket, WebSocketOptions, hint=TIMEOUT_HINT)
    if token is not None and (user is not None or password is not None):
        raise ValueError("pass user/password or token, not both")
    if (user is None) != (password is None):
        raise ValueError("user and password go together")
    extra = list(headers)
    if user is not None and password is not None:
        extra.append(("Authorization", basic_auth(user, password)))
    elif token is not None:
        extra.append(("Authorization", bearer_auth(token)))
    # The engine reads text runs as lines (one split, docs/performance.md).
    return WebSocketOptions(extra_headers=tuple(extra), **{"text_lines": True, **websocket})


def client_config(config: DittoClientConfig | None) -> DittoClientConfig:
    """Each subscribe carries a fresh correlation-id unless ``config`` has a factory."""
    config = config or DittoClientConfig()
    if config.correlation_ids is None:
        config = dataclasses.replace(config, correlation_ids=correlation_ids())
    return config


def correlation_ids() -> Callable[[], str]:
    """Fresh correlation-ids ``<UUID>-0``, ``<UUID>-1``, ...: one random UUID
    for the connection, then a counter, each from a C call (a UUID per
    subscribe cost 160 bytecode instructions, a sixth of a subscribe's:
    docs/performance.md, "a thing's control path")."""
    return map(f"{uuid.uuid4()}-{{}}".format, itertools.count()).__next__

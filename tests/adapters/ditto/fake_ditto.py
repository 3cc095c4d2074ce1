"""A fake Eclipse Ditto WebSocket endpoint (``/ws/2``) for the client's tests.

Written from Ditto's documented messages (the protocol specification, the
streaming-subscription and search pages, their examples and schemas) and
from what the project has seen a real Ditto do, never from sansrs's own
server: it plays Ditto where the library-to-library tests cannot show how
Ditto differs. It uses ``wsproto`` directly on plain sockets, a thread per
connection, and is meant to be imported by any test::

    with FakeDitto({"ns:thing-1": events}) as ditto:
        with connect(ditto.url) as conn: ...

What it does as Ditto does:

- persisted-events and search subscriptions are numbered by **two counters
  per connection, each from "0"** (Ditto's ``StreamingSubscriptionManager``
  and the search ``SubscriptionManager``), so a history and a search on one
  WebSocket carry the same IDs;
- ``created`` at once, echoing the subscribe's headers; ``next`` only
  within the demand; nothing terminal before the first ``request``
  (``lazify``): an unknown thing gets ``created`` and, at the first
  request, ``failed`` 404 ``things:thing.notfound``;
- bad input is answered with Ditto's topics, codes and statuses: text that
  is not JSON gets ``json.invalid`` (400) on ``unknown/unknown/things/twin/errors``;
  a topic Ditto's adapter does not take (``live``, a ``things`` streaming
  topic without a channel, an unknown action) ``protocoladapter:unknown.topicpath``
  (400) there, with the command's correlation-id; a timestamp Ditto cannot
  parse (``'yesterday'``, ``'2022-13-45'``) ``gateway:internalerror`` (500)
  **without** a correlation-id and no ``created``; a request for an unknown
  ID ``failed`` 404 ``...not.found``; demand <= 0 ``failed`` 400 (rule 3.9);
  a request after the end ``failed`` 400 "considered cancelled"; an invalid
  search option ``thing-search:search.option.invalid`` on
  ``_/_/things/search/errors``; ``cancel`` is never answered;
- ``START-SEND-EVENTS`` is answered ``START-SEND-EVENTS:ACK``, after which
  :meth:`FakeDitto.publish` sends live events to the connection
  (``STOP-SEND-EVENTS`` likewise);
- a bearer token (``Authorization: Bearer`` or ``?access_token=`` in the
  upgrade) expires after ``token_lifetime`` seconds, and the WebSocket is
  then closed (Ditto closes the socket when the JWT expires); a text message
  ``JWT-TOKEN?jwtToken=<token>`` extends it by presenting a new token;
- WebSocket pings when the connection has sent nothing for ``ping_interval``.

Knobs for tests (constructor): ``token`` / ``valid_tokens`` (require a
token at the upgrade, else HTTP 401), ``token_lifetime``,
``expiry_close_code``, ``ping_interval``, ``drop_after`` (close the TCP
connection abruptly, no close frame, after sending that many text
messages; a sequence gives each connection in turn its own, e.g. ``[5,
None]``: the first is cut, the one after a reconnect is not),
``page_size`` (search default), ``broken`` (things whose subscribe gets
the uncorrelated 500 a bad timestamp gets). Commands (any thread):
:meth:`FakeDitto.drop_all` / :meth:`FakeConnection.drop`,
:meth:`FakeConnection.expire_token`, :meth:`FakeDitto.publish`,
:meth:`FakeDitto.append`. What each connection received and sent is
recorded (``received``, ``sent``) and :meth:`FakeDitto.wait_for` waits for
a condition on them without sleeping.

What it leaves out: RQL ``filter`` is not evaluated (histories and search
return every event / thing in range), search ``fields`` and ``sort`` are
ignored (things come sorted by ID), and there is no idle timeout.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    RejectConnection,
    Request,
    TextMessage,
)

__all__ = ["UNKNOWN_ERRORS_TOPIC", "FakeConnection", "FakeDitto", "RawClient"]

MAX_LONG = 2**63 - 1
#: Where Ditto answers what it cannot attribute to an entity.
UNKNOWN_ERRORS_TOPIC = "unknown/unknown/things/twin/errors"
SEARCH_ERRORS_TOPIC = "_/_/things/search/errors"
CONTENT_TYPE = {"content-type": "application/json"}
RULE_3_9 = (
    "The number of requested elements must be > 0 (see reactive-streams specification, rule 3.9)"
)
CONSIDERED_CANCELLED = "This subscription is considered cancelled. No more messages are processed."
#: Java's ``Instant.parse``: ISO-8601 in UTC with ``Z``, up to 9 fraction digits.
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z")
_SIZE = re.compile(r"size\((\d+)\)")
_OPTION = re.compile(r"size\(\d+\)|sort\([+-][\w/]+(,[+-][\w/]+)*\)|cursor\([\w-]*\)")


def compact(value: Any) -> str:
    """Ditto's compact JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def error_json(status: int, error: str, message: str, description: str | None = None) -> Any:
    out: dict[str, Any] = {"status": status, "error": error, "message": message}
    if description is not None:
        out["description"] = description
    return out


def error_response(topic: str, headers: Mapping[str, Any], error: Mapping[str, Any]) -> str:
    return compact({"topic": topic, "headers": dict(headers), "path": "/", "value": dict(error),
                    "status": error["status"]})


def internal_error() -> Any:
    return error_json(500, "gateway:internalerror",
                      "There was a rare case of an unexpected internal error.",
                      "Please contact the service team or your administrator.")


def unknown_topic_path(topic: Any) -> Any:
    return error_json(400, "protocoladapter:unknown.topicpath",
                      f"The topic path '{topic}' is not supported.")


def instant(text: Any) -> datetime | None:
    """The instant ``text`` names as Java's ``Instant.parse`` reads it, or None."""
    if not isinstance(text, str) or not _INSTANT.fullmatch(text):
        return None
    try:
        return datetime.fromisoformat(text[:19] + "+00:00")
    except ValueError:  # month 13, day 45, ...
        return None


@dataclass
class _Sub:
    kind: str  # "streaming" | "search"
    sid: str
    base: str  # topic text before the action
    headers: dict[str, Any]
    items: Iterator[Any] | None  # None: fails at the first request with ``failure``
    failure: Any = None
    demand: int = 0
    requested: bool = False
    ended: bool = False


@dataclass
class FakeConnection:
    """One accepted WebSocket, driven by its own thread."""

    ditto: FakeDitto
    sock: socket.socket
    index: int = 0  # the n'th connection the fake accepted
    received: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    pings_sent: int = 0
    pongs: int = 0
    refreshed_tokens: list[str] = field(default_factory=list)
    closed: bool = False
    close_reason: str = ""
    live: bool = False  # START-SEND-EVENTS received
    token_deadline: float | None = None

    def __post_init__(self) -> None:
        self._ws = WSConnection(ConnectionType.SERVER)
        self._commands: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._counters = {"streaming": itertools.count(), "search": itertools.count()}
        self._subs: dict[tuple[str, str], _Sub] = {}
        self._open = False
        self._last_sent = time.monotonic()
        self._text: list[str] = []
        self.thread = threading.Thread(target=self._run, name="fake-ditto-conn", daemon=True)

    # -- commands (any thread) --------------------------------------------------

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the connection's thread."""
        with self._lock:
            self._commands.append(fn)
        with contextlib.suppress(OSError):  # the connection ended meanwhile
            self._wake_w.send(b"x")

    def drop(self) -> None:
        """Close the TCP connection now, without a close frame (a lost connection)."""
        self.call(lambda: self._close("dropped", graceful=False))

    def expire_token(self) -> None:
        """The token expires now: Ditto closes the WebSocket."""
        self.call(self._expire)

    def send_text(self, text: str) -> None:
        """Send ``text`` as it is (a scripted message)."""
        self.call(lambda: self._send(text))

    # -- the connection's thread -------------------------------------------------

    def _run(self) -> None:
        try:
            while not self.closed:
                timeout = self._timeout()
                readable, _, _ = select.select([self.sock, self._wake_r], [], [], timeout)
                if self._wake_r in readable:
                    self._wake_r.recv(4096)
                self._run_commands()
                if self.closed:
                    break
                if self.sock in readable:
                    data = self.sock.recv(65536)
                    if not data:
                        self._close("peer closed the TCP connection", graceful=False)
                        break
                    self._ws.receive_data(data)
                    self._handle_events()
                self._timers()
        except OSError as exc:
            self._close(f"socket error: {exc}", graceful=False)
        finally:
            self._wake_r.close()
            self._wake_w.close()
            self.ditto._changed()

    def _timeout(self) -> float | None:
        deadlines = []
        if self._open and self.ditto.ping_interval is not None:
            deadlines.append(self._last_sent + self.ditto.ping_interval)
        if self.token_deadline is not None:
            deadlines.append(self.token_deadline)
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - time.monotonic())

    def _timers(self) -> None:
        now = time.monotonic()
        if self.token_deadline is not None and now >= self.token_deadline:
            self._expire()
            return
        interval = self.ditto.ping_interval
        if self._open and interval is not None and now - self._last_sent >= interval:
            self.pings_sent += 1
            self._write(self._ws.send(Ping(payload=b"fake-ditto")))
            self.ditto._changed()

    def _run_commands(self) -> None:
        with self._lock:
            commands, self._commands = self._commands, []
        for command in commands:
            if not self.closed:
                command()

    def _expire(self) -> None:
        self._close("token expired", graceful=True, code=self.ditto.expiry_close_code)

    def _handle_events(self) -> None:
        for event in self._ws.events():
            if self.closed:
                return
            if isinstance(event, Request):
                self._upgrade(event)
            elif isinstance(event, TextMessage):
                self._text.append(event.data)
                if event.message_finished:
                    text, self._text = "".join(self._text), []
                    self.received.append(text)
                    self._message(text)
                    self.ditto._changed()
            elif isinstance(event, BytesMessage):
                self._close("binary message", graceful=True, code=1003)
            elif isinstance(event, Ping):
                self._write(self._ws.send(event.response()))
            elif isinstance(event, Pong):
                self.pongs += 1
                self.ditto._changed()
            elif isinstance(event, CloseConnection):
                self._write(self._ws.send(event.response()))
                self._close(f"client closed: {event.code}", graceful=False)

    def _upgrade(self, request: Request) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in request.extra_headers}
        token = None
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        query = parse_qs(urlsplit(request.target).query)
        if token is None and query.get("access_token"):
            token = query["access_token"][0]
        if self.ditto.requires_token and not self.ditto.token_ok(token):
            self._write(self._ws.send(RejectConnection(status_code=401)))
            self._close("upgrade refused: 401", graceful=False)
            return
        self._write(self._ws.send(AcceptConnection()))
        self._open = True
        if token is not None and self.ditto.token_lifetime is not None:
            self.token_deadline = time.monotonic() + self.ditto.token_lifetime
        self.ditto._changed()

    # -- Ditto's answers ----------------------------------------------------------

    def _message(self, text: str) -> None:
        if text.startswith("JWT-TOKEN?"):
            token = parse_qs(text[len("JWT-TOKEN?"):]).get("jwtToken", [""])[0]
            self.refreshed_tokens.append(token)
            if self.ditto.token_ok(token) and self.ditto.token_lifetime is not None:
                self.token_deadline = time.monotonic() + self.ditto.token_lifetime
            return
        if text.split("?")[0] in ("START-SEND-EVENTS", "STOP-SEND-EVENTS"):
            command = text.split("?")[0]
            self.live = command == "START-SEND-EVENTS"
            self._send(f"{command}:ACK")
            return
        try:
            message = json.loads(text)
        except ValueError:
            self._send(error_response(UNKNOWN_ERRORS_TOPIC, {}, error_json(
                400, "json.invalid", f"Failed to parse JSON string '{text[:100]}'!")))
            return
        if not isinstance(message, dict):
            self._send(error_response(UNKNOWN_ERRORS_TOPIC, {}, error_json(
                400, "json.invalid", "The JSON is not a JSON object.")))
            return
        headers = message.get("headers")
        headers = headers if isinstance(headers, dict) else {}
        correlation = {k: v for k, v in headers.items() if k.lower() == "correlation-id"}
        topic = message.get("topic")
        parsed = self._topic(topic)
        if parsed is None:
            self._send(error_response(UNKNOWN_ERRORS_TOPIC, correlation,
                                      unknown_topic_path(topic)))
            return
        kind, base, action, entity = parsed
        value = message.get("value")
        if action in ("subscribeForPersistedEvents", "subscribe"):
            self._subscribe(kind, base, entity, headers, correlation, value)
        elif action in ("request", "cancel"):
            self._command(kind, base, action, headers, correlation, value)
        else:  # an event sent to Ditto
            self._send(error_response(UNKNOWN_ERRORS_TOPIC, correlation, error_json(
                400, "protocoladapter:unknown.command",
                f"The topic path '{topic}' is not a command.")))

    def _topic(self, topic: Any) -> tuple[str, str, str, str] | None:
        """(kind, base, action, entity ID) of a subscription topic Ditto's
        adapter takes, else None (``protocoladapter:unknown.topicpath``)."""
        if not isinstance(topic, str):
            return None
        parts = topic.split("/")
        if parts[:4] == ["_", "_", "things", "twin"] and len(parts) == 6 and parts[4] == "search":
            if parts[5] in ("subscribe", "request", "cancel"):
                return "search", "_/_/things/twin/search/", parts[5], ""
            return None
        if len(parts) == 6 and parts[2:5] == ["things", "twin", "streaming"]:
            base = "/".join(parts[:5]) + "/"
        elif len(parts) == 5 and parts[2:4] == ["policies", "streaming"]:
            base = "/".join(parts[:4]) + "/"
        else:  # live, a things topic without its channel, anything else
            return None
        if not parts[0] or not parts[1]:
            return None
        if parts[-1] not in ("subscribeForPersistedEvents", "request", "cancel"):
            return None
        return "streaming", base, parts[-1], f"{parts[0]}:{parts[1]}"

    def _subscribe(self, kind: str, base: str, entity: str, headers: dict[str, Any],
                   correlation: dict[str, Any], value: Any) -> None:
        value = value if isinstance(value, dict) else {}
        if kind == "search":
            options = value.get("options") or ""
            if not isinstance(options, str) or any(
                    not _OPTION.fullmatch(o) for o in _split_options(options)):
                self._send(error_response(SEARCH_ERRORS_TOPIC, correlation, {
                    "status": 400, "error": "thing-search:search.option.invalid",
                    "description": "At least one provided option is invalid."}))
                return
            size = _SIZE.search(options)
            namespaces = value.get("namespaces")
            things = self.ditto.things_in(namespaces if isinstance(namespaces, list) else None)
            page = int(size.group(1)) if size else self.ditto.page_size
            items: Iterator[Any] = iter([things[i:i + page] for i in range(0, len(things), page)])
            self._created(kind, base, headers, items, None)
            return
        if entity in self.ditto.broken:
            self._send(error_response(UNKNOWN_ERRORS_TOPIC, {}, internal_error()))
            return
        bounds = []
        for key in ("fromHistoricalTimestamp", "toHistoricalTimestamp"):
            text = value.get(key)
            if text is not None and instant(text) is None:
                # Seen from Ditto: the answer loses the command's headers.
                self._send(error_response(UNKNOWN_ERRORS_TOPIC, {}, internal_error()))
                return
            bounds.append(instant(text))
        events = self.ditto.history(entity)
        if events is None:
            failure = error_json(
                404, "things:thing.notfound",
                f"The Thing with ID '{entity}' could not be found or requester had "
                "insufficient permissions to access it.",
                "Check if the ID of your requested Thing was correct and you have sufficient "
                "permissions.")
            self._created(kind, base, headers, None, failure)
            return
        self._created(kind, base, headers, iter(_in_range(events, value, bounds)), None)

    def _created(self, kind: str, base: str, headers: dict[str, Any],
                 items: Iterator[Any] | None, failure: Any) -> None:
        sid = str(next(self._counters[kind]))
        sub = _Sub(kind, sid, base, dict(headers), items, failure)
        self._subs[(kind, sid)] = sub
        self._event(sub, "created", {"subscriptionId": sid})

    def _command(self, kind: str, base: str, action: str, headers: dict[str, Any],
                 correlation: dict[str, Any], value: Any) -> None:
        sid = value.get("subscriptionId") if isinstance(value, dict) else None
        if not isinstance(sid, str):
            self._send(error_response(UNKNOWN_ERRORS_TOPIC, correlation, error_json(
                400, "json.field.missing",
                "JSON did not include required </subscriptionId> field!")))
            return
        prefix = "streaming." if kind == "streaming" else "thing-search:"
        sub = self._subs.get((kind, sid))
        if sub is None:
            probe = _Sub(kind, sid, base, dict(headers), None)
            self._event(probe, "failed", {"subscriptionId": sid, "error": error_json(
                404, f"{prefix}subscription.not.found",
                f"No subscription with ID '{sid}' exists.")})
            return
        sub.headers = dict(headers)  # later events carry the latest command's headers
        if action == "cancel":
            sub.ended = True
            return
        demand = value.get("demand")
        if sub.ended:
            self._event(sub, "failed", {"subscriptionId": sid, "error": error_json(
                400, f"{prefix}subscription.protocol.error", CONSIDERED_CANCELLED)})
            return
        if type(demand) is not int or demand <= 0:
            sub.ended = True
            self._event(sub, "failed", {"subscriptionId": sid, "error": error_json(
                400, f"{prefix}subscription.protocol.error", RULE_3_9)})
            return
        sub.requested = True
        sub.demand = min(MAX_LONG, sub.demand + demand)
        self._pump(sub)

    def _pump(self, sub: _Sub) -> None:
        if sub.items is None:
            sub.ended = True
            self._event(sub, "failed", {"subscriptionId": sub.sid, "error": sub.failure})
            return
        field_name = "item" if sub.kind == "streaming" else "items"
        while sub.demand > 0 and not sub.ended and not self.closed:
            item = next(sub.items, _END)
            if item is _END:
                sub.ended = True
                self._event(sub, "complete", {"subscriptionId": sub.sid})
                return
            sub.demand -= 1
            self._event(sub, "next", {"subscriptionId": sub.sid, field_name: item})

    def _event(self, sub: _Sub, action: str, value: Any) -> None:
        headers = {**sub.headers, **CONTENT_TYPE}
        self._send(compact({"topic": sub.base + action, "headers": headers, "path": "/",
                            "value": value}))

    # -- output -------------------------------------------------------------------

    def _send(self, text: str) -> None:
        if self.closed:
            return
        self._write(self._ws.send(TextMessage(data=text)))
        self.sent.append(text)
        self.ditto._changed()
        limit = self.ditto.drop_limit(self.index)
        if limit is not None and len(self.sent) >= limit:
            self._close(f"dropped after {limit} messages", graceful=False)

    def _write(self, data: bytes) -> None:
        if data and not self.closed:
            self.sock.sendall(data)
            self._last_sent = time.monotonic()

    def _close(self, reason: str, *, graceful: bool, code: int = 1000) -> None:
        if self.closed:
            return
        self.close_reason = reason
        if graceful and self._open:
            with contextlib.suppress(Exception):  # the socket may be gone already
                self._write(self._ws.send(CloseConnection(code=code, reason=reason)))
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.ditto._changed()


_END = object()


def _split_options(options: str) -> list[str]:
    """``size(2),sort(+a,-b)`` -> ``["size(2)", "sort(+a,-b)"]`` (commas inside brackets kept)."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(options):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            out.append(options[start:i])
            start = i + 1
    if options:
        out.append(options[start:])
    return out


def _in_range(events: Sequence[dict[str, Any]], value: Mapping[str, Any],
              bounds: list[datetime | None]) -> list[dict[str, Any]]:
    """The events within the subscribe's revisions and timestamps (Ditto's
    "last n" for a negative ``from``, "nth most recent" for ``to`` <= 0)."""
    latest = max((e.get("revision", 0) for e in events), default=0)
    lo = value.get("fromHistoricalRevision", 0)
    hi = value.get("toHistoricalRevision", MAX_LONG)
    lo = latest + lo + 1 if isinstance(lo, int) and lo < 0 else lo
    hi = latest + hi if isinstance(hi, int) and hi <= 0 else hi
    out = []
    for event in events:
        revision = event.get("revision", 0)
        if not lo <= revision <= hi:
            continue
        moment = instant(event.get("timestamp")) if any(bounds) else None
        if bounds[0] is not None and (moment is None or moment < bounds[0]):
            continue
        if bounds[1] is not None and (moment is None or moment > bounds[1]):
            continue
        out.append(event)
    return out


class FakeDitto:
    """The endpoint: listens on 127.0.0.1, a :class:`FakeConnection` per client."""

    def __init__(
        self,
        things: Mapping[str, Iterable[dict[str, Any]]] | None = None,
        *,
        token: str | None = None,
        valid_tokens: Collection[str] | None = None,
        token_lifetime: float | None = None,
        expiry_close_code: int = 1000,
        ping_interval: float | None = None,
        drop_after: int | Sequence[int | None] | None = None,
        page_size: int = 25,
        broken: Collection[str] = (),
    ) -> None:
        self._things: dict[str, list[dict[str, Any]]] = {
            thing: list(events) for thing, events in (things or {}).items()
        }
        tokens = set(valid_tokens or ())
        if token is not None:
            tokens.add(token)
        self.valid_tokens = tokens
        self.requires_token = bool(tokens)
        self.token_lifetime = token_lifetime
        self.expiry_close_code = expiry_close_code
        self.ping_interval = ping_interval
        self.drop_after = drop_after
        self.page_size = page_size
        #: entity IDs whose subscribe Ditto answers as it answers a timestamp
        #: it cannot parse: 500 without a correlation-id, no ``created``
        self.broken = frozenset(broken)
        self.connections: list[FakeConnection] = []
        self._cond = threading.Condition()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stopped = False
        self._accepter = threading.Thread(target=self._accept, name="fake-ditto", daemon=True)
        host, port = self._listener.getsockname()[:2]
        self.url = f"ws://{host}:{port}/ws/2"

    # -- life -----------------------------------------------------------------------

    def start(self) -> FakeDitto:
        self._accepter.start()
        return self

    def __enter__(self) -> FakeDitto:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        self._listener.close()
        for conn in list(self.connections):
            conn.call(lambda c=conn: c._close("fake Ditto stopped", graceful=True, code=1001))
        for conn in list(self.connections):
            conn.thread.join(5)
        self._accepter.join(5)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            conn = FakeConnection(self, sock, len(self.connections))
            with self._cond:
                self.connections.append(conn)
            conn.thread.start()

    # -- the data ---------------------------------------------------------------------

    def drop_limit(self, index: int) -> int | None:
        """After how many sent messages connection ``index`` is cut: ``drop_after``
        as given, or its ``index``'th entry (None, or past its end: never)."""
        limit = self.drop_after
        if limit is None or isinstance(limit, int):
            return limit
        return limit[index] if index < len(limit) else None

    def token_ok(self, token: str | None) -> bool:
        return bool(token) and (not self.valid_tokens or token in self.valid_tokens)

    def history(self, entity: str) -> list[dict[str, Any]] | None:
        with self._cond:
            events = self._things.get(entity)
            return None if events is None else list(events)

    def things_in(self, namespaces: list[str] | None) -> list[dict[str, Any]]:
        """The things a search finds, sorted by ID: ``{"thingId": ...}`` each."""
        with self._cond:
            ids = sorted(self._things)
        if namespaces is not None:
            ids = [i for i in ids if i.partition(":")[0] in namespaces]
        return [{"thingId": i} for i in ids]

    def append(self, entity: str, event: dict[str, Any]) -> None:
        """Add ``event`` to the history of ``entity`` (later subscriptions see it)."""
        with self._cond:
            self._things.setdefault(entity, []).append(event)

    def publish(self, event: dict[str, Any], *, entity: str | None = None) -> None:
        """Send ``event`` (a Ditto Protocol event message) to every connection
        that sent ``START-SEND-EVENTS``; with ``entity`` also append it to
        that thing's history, as Ditto persists the event it emits."""
        if entity is not None:
            self.append(entity, event)
        text = compact(event)
        for conn in list(self.connections):
            conn.call(lambda c=conn: c._send(text) if c.live else None)

    # -- commands -----------------------------------------------------------------------

    def drop_all(self) -> None:
        """Every connection is lost now (TCP closed, no close frame)."""
        for conn in list(self.connections):
            conn.drop()

    # -- waiting --------------------------------------------------------------------------

    def _changed(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` holds (checked whenever a connection
        changes); ``AssertionError`` after ``timeout``."""
        with self._cond:
            assert self._cond.wait_for(predicate, timeout), "fake Ditto: condition not reached"

    def connection(self, index: int = 0, timeout: float = 10.0) -> FakeConnection:
        """The ``index``'th connection (waits for it)."""
        self.wait_for(lambda: len(self.connections) > index, timeout)
        return self.connections[index]


class RawClient:
    """A scripted WebSocket client (wsproto on a plain socket) for talking to
    a :class:`FakeDitto` byte for byte: what a test sends is exactly what
    the fake sees."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        self.ws = WSConnection(ConnectionType.CLIENT)
        extra = [("Authorization", f"Bearer {token}")] if token is not None else []
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        self.sock.sendall(self.ws.send(Request(host=parts.netloc, target=target,
                                               extra_headers=extra)))
        self.pings = 0
        self.closed: CloseConnection | None = None
        self.rejected: int | None = None
        self._texts: list[str] = []
        self._partial: list[str] = []
        self.accepted = False
        while not self.accepted and self.rejected is None:
            self._read()

    def send(self, text: str) -> None:
        self.sock.sendall(self.ws.send(TextMessage(data=text)))

    def _read(self) -> bool:
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.ws.receive_data(None)
            return False
        self.ws.receive_data(data)
        for event in self.ws.events():
            if isinstance(event, AcceptConnection):
                self.accepted = True
            elif isinstance(event, RejectConnection):
                self.rejected = event.status_code
            elif isinstance(event, TextMessage):
                self._partial.append(event.data)
                if event.message_finished:
                    self._texts.append("".join(self._partial))
                    self._partial = []
            elif isinstance(event, Ping):
                self.pings += 1
                with contextlib.suppress(OSError):  # the peer may have gone already
                    self.sock.sendall(self.ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                self.closed = event
        return True

    def receive(self) -> str:
        """The next text message (``EOFError`` when the connection ends first)."""
        while not self._texts:
            if self.closed is not None or not self._read():
                raise EOFError("connection ended")
        return self._texts.pop(0)

    def receive_json(self) -> Any:
        return json.loads(self.receive())

    def wait_closed(self) -> CloseConnection | None:
        """Read until the connection ends; the close frame, or None if the TCP
        connection was cut without one."""
        while self.closed is None and self._read():
            pass
        return self.closed

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

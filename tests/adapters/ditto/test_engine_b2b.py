"""The Ditto engines back to back on the driver loop (no WebSocket): client and
server threads joined by a loopback TCP pair that carries message records."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from sansrs.adapters.ditto import DittoConnection
from sansrs.adapters.ditto.engine import DittoClientEngine
from sansrs.adapters.ditto.history import InMemoryHistory
from sansrs.adapters.drive import ConnectionClosed, ConnectionThread
from sansrs.adapters.transport.websocket.messages import (
    CloseCode,
    MessageKind,
    MessageReader,
    decode_close,
    encode_binary,
    encode_close,
    encode_text,
)

from sansrs.ditto import DittoRemoteError
from tests.adapters.ditto.helpers import (
    NS,
    RecordTransport,
    back_to_back,
    call_on,
    counter_history,
    default_source,
    events_of,
    tcp_pair,
)


def test_history_replay_exact_contents() -> None:
    with back_to_back(default_source()) as link:
        got = list(link.client.subscribe_for_persisted_events(f"{NS}:thing-1", timeout=10))
    assert got == events_of("thing-1")


def test_unknown_thing_fails_with_404() -> None:
    with back_to_back(default_source()) as link:
        events = link.client.subscribe_for_persisted_events(f"{NS}:nope", timeout=10)
        with pytest.raises(DittoRemoteError) as info:
            next(events)
    assert info.value.status == 404
    assert info.value.code == "things:thing.notfound"


def test_window_bounds_server_credit() -> None:
    source = InMemoryHistory(counter_history("big", 1000))
    with back_to_back(source) as link:
        events = link.client.subscribe_for_persisted_events(f"{NS}:big", prefetch=8, timeout=10)
        first = next(events)
        assert first["revision"] == 1
        credit = call_on(link.server_thread, lambda: link.server.credit_of("0"))
        assert 0 <= credit <= 8
        rest = list(events)
    assert [e["revision"] for e in rest] == list(range(2, 1001))


def _raw_client() -> tuple[DittoConnection, socket.socket]:
    """A client engine on its driver thread, facing a raw socket the test drives."""
    a, b = tcp_pair()
    engine = DittoClientEngine()
    thread = ConnectionThread(RecordTransport(a), engine, name="ditto-raw-client")
    thread.start()
    b.settimeout(10)
    return DittoConnection(thread, engine), b


def _read_records(sock: socket.socket, until: int) -> list[tuple[int, bytes]]:
    reader = MessageReader()
    records: list[tuple[int, bytes]] = []
    while not any(kind == until for kind, _ in records):
        data = sock.recv(65536)
        assert data, "connection ended before the expected record"
        records += reader.feed(data)
    return records


def test_client_closes_on_invalid_json_from_ditto() -> None:
    conn, peer = _raw_client()
    with peer:
        events = conn.subscribe_for_persisted_events(f"{NS}:t", timeout=10)
        (subscribe,) = _read_records(peer, MessageKind.TEXT)
        assert b"subscribeForPersistedEvents" in subscribe[1]
        peer.sendall(encode_text("this is not JSON"))
        records = _read_records(peer, MessageKind.CLOSE)
        code, reason = decode_close(records[-1][1])
        assert code == CloseCode.POLICY_VIOLATION and "Ditto protocol error" in reason
        with pytest.raises(ConnectionClosed, match="protocol error from Ditto"):
            next(events)
    assert conn.wait_closed(10)


def test_client_fails_subscriptions_when_ditto_closes() -> None:
    conn, peer = _raw_client()
    with peer:
        events = conn.subscribe_for_persisted_events(f"{NS}:t", timeout=10)
        _read_records(peer, MessageKind.TEXT)
        peer.sendall(encode_close(CloseCode.GOING_AWAY, "restarting"))
        with pytest.raises(ConnectionClosed, match="1001 restarting"):
            next(events)
    assert conn.wait_closed(10)


def test_client_rejects_binary_that_is_not_text() -> None:
    conn, peer = _raw_client()
    with peer:
        events = conn.subscribe_for_persisted_events(f"{NS}:t", timeout=10)
        _read_records(peer, MessageKind.TEXT)
        peer.sendall(encode_binary(b"\xff\xfe"))
        code, _ = decode_close(_read_records(peer, MessageKind.CLOSE)[-1][1])
        assert code == CloseCode.INVALID_DATA
        with pytest.raises(ConnectionClosed):
            next(events)


def test_server_answers_garbage_and_keeps_the_session() -> None:
    # The garbage goes out once the subscription has started: Ditto's answer
    # to it names no subscribe, so one still waiting for its created would
    # be failed by it (DittoClient._on_error_response).
    with back_to_back(default_source()) as link:
        events = link.client.subscribe_for_persisted_events(
            f"{NS}:thing-2", prefetch=1, timeout=10)
        got = [next(events)]
        link.client_thread.call_soon(
            lambda: link.client_engine._out.append(encode_text("{broken"))
        )
        got += list(events)
    assert [e["revision"] for e in got] == [1, 2]


EXAMPLES = Path(__file__).resolve().parents[3] / "tests" / "ditto" / "examples" / "streaming"


def _example_text(name: str) -> str:
    """A Ditto example message as Ditto sends it (verbatim content, compact)."""
    return json.dumps(json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8")))


def test_client_follows_dittos_documented_conversation() -> None:
    # Ditto's own documentation examples (docs-02/04/05, headers {}: no
    # correlation-id echoed, so `created` is matched by entity) replayed to
    # the client; a second subscription then fails with Ditto's 404 example.
    conn, peer = _raw_client()
    with peer:
        events = conn.subscribe_for_persisted_events(
            f"{NS}:thing-2", from_revision=1, to_revision=10, prefetch=25, timeout=10
        )
        (subscribe,) = _read_records(peer, MessageKind.TEXT)
        sent = json.loads(subscribe[1])
        assert sent["topic"] == f"{NS}/thing-2/things/twin/streaming/subscribeForPersistedEvents"
        assert sent["value"] == {"fromHistoricalRevision": 1, "toHistoricalRevision": 10}
        peer.sendall(encode_text(_example_text("docs-02-created")))
        (request,) = _read_records(peer, MessageKind.TEXT)
        assert json.loads(request[1])["value"] == {"subscriptionId": "0", "demand": 25}
        peer.sendall(encode_text(_example_text("docs-04-next-empty-item")))
        peer.sendall(encode_text(_example_text("docs-05-complete")))
        assert list(events) == [{}]

        failing = conn.subscribe_for_persisted_events(f"{NS}:thing-2", timeout=10)
        _read_records(peer, MessageKind.TEXT)
        created = json.loads(_example_text("docs-02-created"))
        created["value"]["subscriptionId"] = "1"
        peer.sendall(encode_text(json.dumps(created)))
        _read_records(peer, MessageKind.TEXT)  # the request
        failed = json.loads(_example_text("code-failed-thing-not-accessible"))
        failed["value"]["subscriptionId"] = "1"
        peer.sendall(encode_text(json.dumps(failed)))
        with pytest.raises(DittoRemoteError) as info:
            next(failing)
        assert info.value.status == 404
        assert info.value.description == failed["value"]["error"]["description"]
        conn.close()


class _OpenCounting:
    """A history source that counts the subscriptions it answered and the
    events pulled from them (on the server's connection thread)."""

    def __init__(self, inner: InMemoryHistory) -> None:
        self.inner = inner
        self.opened = 0
        self.pulled = 0

    def open(self, request: Any) -> Any:
        self.opened += 1
        return self._counted(self.inner.open(request))

    def _counted(self, items: Any) -> Any:
        for item in items:
            self.pulled += 1
            yield item


def test_ditto_paused_batches_subscribe_now_and_ask_for_events_at_the_first_next() -> None:
    source = _OpenCounting(InMemoryHistory(counter_history("paused", 20)))
    with back_to_back(source) as link:
        batches = link.client.persisted_event_batches(
            f"{NS}:paused", prefetch=8, timeout=10, paused=True
        )
        # A round trip on the link (a second subscription created and read)
        # orders after the paused one's subscribe and created.
        other = link.client.subscribe_for_persisted_events(f"{NS}:paused", timeout=10)
        assert len(list(other)) == 20
        assert call_on(link.server_thread, lambda: source.opened) == 2
        assert call_on(link.server_thread, lambda: source.pulled) == 20  # none of the paused one's
        handles = call_on(link.client_thread, lambda: list(link.client_engine._by_key.values()))
        # created, no demand asked
        assert [h.sid is not None and h.demand == 0 for h in handles] == [True]
        with batches:
            sizes_and_revisions = [(len(b), [e["revision"] for e in b]) for b in batches]
        assert [r for _, rs in sizes_and_revisions for r in rs] == list(range(1, 21))
        assert max(size for size, _ in sizes_and_revisions) <= 4  # half the window each


def test_ditto_paused_batches_with_a_head_start_ask_for_that_many_then_the_rest() -> None:
    source = _OpenCounting(InMemoryHistory(counter_history("head", 20)))
    with back_to_back(source) as link:
        batches = link.client.persisted_event_batches(
            f"{NS}:head", prefetch=8, timeout=10, paused=True, head_start=3
        )
        other = link.client.subscribe_for_persisted_events(f"{NS}:head", timeout=10)
        assert len(list(other)) == 20  # a round trip behind the paused one's
        # The head start's events are pulled (and queued) before the first
        # next, and one more that Outbound holds to learn whether it was the last.
        assert call_on(link.server_thread, lambda: source.pulled) == 20 + 3 + 1
        with batches:
            got = [e["revision"] for batch in batches for e in batch]
        assert got == list(range(1, 21))
        with pytest.raises(ValueError):
            link.client.persisted_event_batches(f"{NS}:head", paused=True, head_start=-1)

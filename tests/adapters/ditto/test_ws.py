"""The Ditto client and server adapters end to end over a real WebSocket on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sansrs.adapters.ditto import DittoHistoryServer, connect, require_basic, require_bearer, serve
from sansrs.adapters.ditto.history import (
    HistoryRequest,
    InMemoryHistory,
    JsonLinesHistory,
    thing_not_found,
)
from sansrs.adapters.ditto.types import basic_auth
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.transport.websocket import WebSocketHandshakeError

from sansrs.ditto import DittoError, DittoException, DittoRemoteError, DittoServerConfig
from sansrs.streams import IllegalArgumentError
from tests.adapters.ditto.helpers import (
    EXAMPLE_HISTORY,
    NS,
    WAIT,
    Recorder,
    counter_history,
    events_of,
)

URL = "ws://127.0.0.1:0/ws/2"


@pytest.fixture
def server() -> Iterator[DittoHistoryServer]:
    with serve(URL, JsonLinesHistory(EXAMPLE_HISTORY)) as srv:
        yield srv


def revisions(events: Iterable[dict[str, Any]]) -> list[int]:
    return [e["revision"] for e in events]


# -- history replay -----------------------------------------------------------------


def test_history_replay_exact_contents(server: DittoHistoryServer) -> None:
    with (
        connect(server.url) as conn,
        conn.subscribe_for_persisted_events(f"{NS}:thing-1", timeout=WAIT) as events,
    ):
        got = list(events)
    assert got == events_of("thing-1")  # every field, as in the file


def test_policy_history(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        got = list(
            conn.subscribe_for_persisted_events(f"{NS}:policy-1", group="policies", timeout=WAIT)
        )
    assert [e["topic"] for e in got] == [f"{NS}/policy-1/policies/events/created"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"from_revision": 3}, [3, 4, 5, 6, 7]),
        ({"to_revision": 2}, [1, 2]),
        ({"from_revision": 2, "to_revision": 4}, [2, 3, 4]),
        ({"from_revision": -3}, [5, 6, 7]),  # the last 3 revisions
        ({"to_revision": 0}, [1, 2, 3, 4, 5, 6, 7]),  # up to the latest
        ({"to_revision": -2}, [1, 2, 3, 4, 5]),  # up to the 2nd before the latest
        ({"from_revision": 9}, []),
        ({"from_timestamp": "2022-10-25T14:02:00Z", "to_timestamp": "2022-10-25T14:04:00Z"},
         [3, 4, 5]),
        ({"from_timestamp": datetime(2022, 10, 25, 14, 5, tzinfo=UTC)}, [6, 7]),
    ],
)
def test_revision_and_timestamp_ranges(
    server: DittoHistoryServer, options: dict[str, Any], expected: list[int]
) -> None:
    with connect(server.url) as conn:
        got = list(conn.subscribe_for_persisted_events(f"{NS}:thing-1", timeout=WAIT, **options))
    assert revisions(got) == expected


@pytest.mark.parametrize(
    ("rql", "expected"),
    [
        ("gt(attributes/counter,3)", [5, 6]),  # counter i is revision i + 1
        ("exists(features/temperature)", [7]),
        ('eq(attributes/location,"kitchen")', [1]),
        ("and(ge(_revision,2),lt(_revision,4))", [2, 3]),
        ('or(in(attributes/counter,1,5),like(thingId,"*:thing-1"))', [1, 2, 3, 4, 5, 6, 7]),
        ("not(exists(attributes))", [7]),
    ],
)
def test_filter(server: DittoHistoryServer, rql: str, expected: list[int]) -> None:
    with connect(server.url) as conn:
        got = list(conn.subscribe_for_persisted_events(f"{NS}:thing-1", filter=rql, timeout=WAIT))
    assert revisions(got) == expected


def test_invalid_filter_fails_with_400(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        events = conn.subscribe_for_persisted_events(f"{NS}:thing-1", filter="gt(", timeout=WAIT)
        with pytest.raises(DittoRemoteError) as info:
            next(events)
    assert info.value.status == 400
    assert info.value.code == "rql.expression.invalid"


# -- errors --------------------------------------------------------------------------


def test_unknown_thing_failed_carries_ditto_error(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        with pytest.raises(DittoRemoteError) as info:
            list(conn.subscribe_for_persisted_events(f"{NS}:missing", timeout=WAIT))
        # the session goes on after a failed subscription
        assert revisions(conn.subscribe_for_persisted_events(f"{NS}:thing-2", timeout=WAIT)) == [
            1,
            2,
        ]
    error = info.value
    expected = thing_not_found(f"{NS}:missing").error
    assert (error.status, error.code, error.description) == (
        404,
        "things:thing.notfound",
        expected.description,
    )
    assert error.error.message == expected.message


class FailingHistory:
    """``deny`` raises a given Ditto error; ``broken`` fails after two events."""

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        if request.topic.entity_name == "deny":
            raise DittoException(
                DittoError(status=403, error="things:thing.notallowed", message="no",
                           description="ask the owner", href="https://example.invalid/403")
            )
        return self._broken()

    def _broken(self) -> Iterator[Any]:
        yield from counter_history("broken", 2)
        raise RuntimeError("disk on fire")


def test_source_errors_surface_as_typed_failures() -> None:
    with serve(URL, FailingHistory()) as srv, connect(srv.url) as conn:
        with pytest.raises(DittoRemoteError) as denied:
            next(conn.subscribe_for_persisted_events(f"{NS}:deny", timeout=WAIT))
        got: list[Any] = []
        with pytest.raises(DittoRemoteError) as broken:
            for event in conn.subscribe_for_persisted_events(f"{NS}:broken", timeout=WAIT):
                got.append(event)
    assert (denied.value.status, denied.value.code, denied.value.description) == (
        403,
        "things:thing.notallowed",
        "ask the owner",
    )
    assert denied.value.href == "https://example.invalid/403"
    assert revisions(got) == [1, 2]  # the items before the failure arrive first
    assert (broken.value.status, broken.value.code) == (500, "internalerror")


def test_idle_timeout_runs_on_the_driver_timers() -> None:
    class Silent:
        """A Publisher that never signals anything after on_subscribe."""

        def subscribe(self, subscriber: Any) -> None:
            subscriber.on_subscribe(self)

        def request(self, n: int) -> None:
            pass

        def cancel(self) -> None:
            pass

    class SilentHistory:
        def open(self, request: HistoryRequest) -> Any:
            return Silent()

    config = DittoServerConfig(idle_timeout=0.3)
    with (
        serve(URL, SilentHistory(), config=config) as srv,
        connect(srv.url) as conn,
        pytest.raises(DittoRemoteError) as info,
    ):
        next(conn.subscribe_for_persisted_events(f"{NS}:idle", timeout=WAIT))
    assert (info.value.status, info.value.code) == (408, "streaming.subscription.timeout")


# -- authentication ----------------------------------------------------------------------


class RecordingHistory(InMemoryHistory):
    def __init__(self) -> None:
        super().__init__(counter_history("t", 3))
        self.authorization: list[str | None] = []

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        self.authorization.append(request.connection_headers.get("authorization"))
        return super().open(request)


def test_basic_auth_required_and_reaches_the_source() -> None:
    history = RecordingHistory()
    with serve(URL, history, authenticate=require_basic("ditto", "s3cret")) as srv:
        with pytest.raises(WebSocketHandshakeError) as missing:
            connect(srv.url)
        with pytest.raises(WebSocketHandshakeError) as wrong:
            connect(srv.url, user="ditto", password="nope")
        with connect(srv.url, user="ditto", password="s3cret") as conn:
            assert revisions(conn.subscribe_for_persisted_events(f"{NS}:t", timeout=WAIT)) == [
                1,
                2,
                3,
            ]
    assert missing.value.status == 401
    assert wrong.value.status == 401
    assert history.authorization == [basic_auth("ditto", "s3cret")]


def test_bearer_auth() -> None:
    history = RecordingHistory()
    with serve(URL, history, authenticate=require_bearer("jwt-1")) as srv:
        with pytest.raises(WebSocketHandshakeError) as wrong:
            connect(srv.url, token="jwt-2")
        with connect(srv.url, token="jwt-1") as conn:
            assert len(list(conn.subscribe_for_persisted_events(f"{NS}:t", timeout=WAIT))) == 3
    assert wrong.value.status == 401
    assert history.authorization == ["Bearer jwt-1"]


def test_connect_refuses_non_websocket_urls() -> None:
    with pytest.raises(ValueError, match="WebSocket"):
        connect("tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="both"):
        connect("ws://127.0.0.1:1/ws/2", user="u", password="p", token="t")


# -- flow control: slow consumers, cancel ------------------------------------------------


class CountingHistory:
    """An endless (or long) lazy history that counts what the server pulled."""

    def __init__(self, n: int | None = None) -> None:
        self.n = n
        self.pulled = 0
        self.closed = threading.Event()

    def open(self, request: HistoryRequest) -> Iterator[Any]:
        return self._events()

    def _events(self) -> Iterator[Any]:
        i = 0
        try:
            while self.n is None or i < self.n:
                i += 1
                self.pulled += 1
                yield {"topic": f"{NS}/c/things/twin/events/modified", "headers": {},
                       "path": "/attributes/i", "value": i, "revision": i}
        finally:
            self.closed.set()


def test_rs_1_1_slow_consumer_is_bounded_by_demand() -> None:
    history = CountingHistory(n=3000)
    prefetch = 16
    with serve(URL, history) as srv, connect(srv.url) as conn:
        events = conn.subscribe_for_persisted_events(f"{NS}:c", prefetch=prefetch, timeout=WAIT)
        (session,) = srv.peers
        consumed = 0
        for event in events:
            consumed += 1
            assert event["revision"] == consumed
            if consumed % 100 == 1:
                assert_within_window(history, session, consumed, len(events._queue), prefetch)
        assert consumed == 3000
        assert session.inspect(lambda e: e.open_subscriptions) == 0


def assert_within_window(
    history: CountingHistory, session: Any, consumed: int, queued: int, prefetch: int
) -> None:
    """Nothing runs ahead of the demand: the source was pulled at most the
    window (plus Outbound's one look-ahead) beyond what was consumed, the
    server holds no more credit than the window, the client's queue no more
    than the window."""
    assert history.pulled <= consumed + prefetch + 1
    assert 0 <= session.inspect(lambda e: e.credit_of("0")) <= prefetch
    assert queued <= prefetch


def test_cancel_mid_stream_releases_the_source() -> None:
    history = CountingHistory()  # endless
    with serve(URL, history) as srv, connect(srv.url) as conn:
        events = conn.subscribe_for_persisted_events(f"{NS}:c", prefetch=8, timeout=WAIT)
        got = [next(events) for _ in range(20)]
        assert revisions(got) == list(range(1, 21))
        events.close()  # cancel
        assert history.closed.wait(WAIT), "the server did not close the source on cancel"
        (session,) = srv.peers
        assert history.pulled <= 20 + 8 + 1
        assert session.inspect(lambda e: e.open_subscriptions) == 0
        with pytest.raises(StopIteration):
            next(events)
        # the connection is still good for more
        with conn.subscribe_for_persisted_events(f"{NS}:c", timeout=WAIT) as again:
            assert next(again)["revision"] == 1


def test_many_subscriptions_on_one_connection() -> None:
    history = InMemoryHistory(
        [e for k in range(40) for e in counter_history(f"thing-{k}", 25 + k)]
    )
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []
    with serve(URL, history) as srv, connect(srv.url) as conn:
        iterators = {
            k: conn.subscribe_for_persisted_events(f"{NS}:thing-{k}", prefetch=4, timeout=WAIT)
            for k in range(40)
        }

        def consume(k: int) -> None:
            try:
                results[k] = revisions(iterators[k])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=consume, args=(k,)) for k in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        assert len(srv.peers) == 1
    assert not errors
    assert results == {k: list(range(1, 26 + k)) for k in range(40)}


def test_closing_the_connection_fails_open_iterators() -> None:
    history = CountingHistory()
    with serve(URL, history) as srv:
        conn = connect(srv.url)
        events = conn.subscribe_for_persisted_events(f"{NS}:c", prefetch=4, timeout=WAIT)
        next(events)
        srv.close()
        with pytest.raises(ConnectionClosed):
            for _ in events:
                pass
        conn.close()


# -- batches (persisted_event_batches) ------------------------------------------------------


def test_history_batches_are_the_events_in_order(server: DittoHistoryServer) -> None:
    with (
        connect(server.url) as conn,
        conn.persisted_event_batches(f"{NS}:thing-1", prefetch=2, timeout=WAIT) as batches,
    ):
        got = list(batches)
    assert all(len(b) == 1 for b in got)  # at most prefetch // 2 each
    assert [e for b in got for e in b] == events_of("thing-1")


def test_rs_1_1_batches_are_bounded_by_demand() -> None:
    history = CountingHistory(n=3000)
    prefetch = 16
    with serve(URL, history) as srv, connect(srv.url) as conn:
        batches = conn.persisted_event_batches(f"{NS}:c", prefetch=prefetch, timeout=WAIT)
        (session,) = srv.peers
        consumed = 0
        for batch in batches:
            assert 1 <= len(batch) <= prefetch // 2
            first = consumed + 1
            consumed += len(batch)
            assert [e["revision"] for e in batch] == list(range(first, consumed + 1))
            assert_within_window(history, session, consumed, len(batches._queue), prefetch)
        assert consumed == 3000
        assert session.inspect(lambda e: e.open_subscriptions) == 0


def test_rs_3_13_closing_batches_mid_stream_cancels_the_subscription() -> None:
    history = CountingHistory()  # endless
    with serve(URL, history) as srv, connect(srv.url) as conn:
        batches = conn.persisted_event_batches(f"{NS}:c", prefetch=8, timeout=WAIT)
        first = next(batches)
        assert [e["revision"] for e in first] == list(range(1, len(first) + 1))
        batches.close()
        batches.close()  # idempotent
        assert history.closed.wait(WAIT), "the server did not close the source on cancel"
        (session,) = srv.peers
        assert session.inspect(lambda e: e.open_subscriptions) == 0
        with pytest.raises(StopIteration):
            next(batches)
        with conn.persisted_event_batches(f"{NS}:c", timeout=WAIT) as again:
            assert next(again)[0]["revision"] == 1  # the connection goes on


def test_batches_of_an_unknown_thing_raise_dittos_error(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        with pytest.raises(DittoRemoteError) as info:
            list(conn.persisted_event_batches(f"{NS}:missing", timeout=WAIT))
        with pytest.raises(ValueError, match="prefetch"):
            conn.persisted_event_batches(f"{NS}:thing-1", prefetch=0)
    assert info.value.status == 404


# -- Publishers -------------------------------------------------------------------------


def test_rs_1_1_and_1_3_history_as_publisher_follows_demand(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        publisher = conn.persisted_events_publisher(f"{NS}:thing-1")
        recorder = Recorder()
        publisher.subscribe(recorder)
        assert recorder.subscribed.wait(WAIT)
        recorder.subscription.request(2)
        recorder.wait_items(2)
        assert not recorder.done.is_set()  # no more than asked
        recorder.subscription.request(100)
        assert recorder.done.wait(WAIT)
    assert recorder.items == events_of("thing-1")
    assert recorder.completed and recorder.error is None
    assert all(name.startswith("sansrs-ditto") for name in recorder.threads)  # rule 1.3


def test_publisher_rule_3_9_and_errors(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        bad = Recorder()
        conn.persisted_events_publisher(f"{NS}:thing-1").subscribe(bad)
        assert bad.subscribed.wait(WAIT)
        bad.subscription.request(0)
        assert bad.done.wait(WAIT)
        missing = Recorder()
        conn.persisted_events_publisher(f"{NS}:none").subscribe(missing)
        assert missing.subscribed.wait(WAIT)
        missing.subscription.request(1)
        assert missing.done.wait(WAIT)
    assert isinstance(bad.error, IllegalArgumentError) and "3.9" in str(bad.error)
    assert isinstance(missing.error, DittoRemoteError) and missing.error.status == 404


def test_publisher_cancel_stops_the_source() -> None:
    history = CountingHistory()
    with serve(URL, history) as srv, connect(srv.url) as conn:
        recorder = Recorder()
        conn.persisted_events_publisher(f"{NS}:c").subscribe(recorder)
        assert recorder.subscribed.wait(WAIT)
        recorder.subscription.request(5)
        recorder.wait_items(5)
        recorder.subscription.cancel()
        assert history.closed.wait(WAIT)
    assert len(recorder.items) == 5
    assert history.pulled <= 6


# -- search ------------------------------------------------------------------------------


def test_search_pages(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        pages = list(conn.search(options="size(1),sort(-thingId)", timeout=WAIT))
        kitchen = list(conn.search(filter='eq(attributes/location,"kitchen")',
                                   fields="thingId", timeout=WAIT))
    assert [[t["thingId"] for t in page] for page in pages] == [
        [f"{NS}:thing-2"],
        [f"{NS}:thing-1"],
    ]
    assert pages[0][0]["attributes"] == {"location": "attic", "counter": 10}
    assert kitchen == [[{"thingId": f"{NS}:thing-1"}]]


def test_histories_inside_a_search_on_one_connection() -> None:
    """sansrs's server numbers histories and searches apart as Ditto does
    (both from "0"), so the client reading each found thing's history
    while the search is open is tested library to library too (issue #32)."""
    things = {f"thing-{i}": counter_history(f"thing-{i}", i + 1) for i in range(5)}
    history = InMemoryHistory([e for events in things.values() for e in events])
    got = {}
    with serve(URL, history) as srv, connect(srv.url) as conn:
        for page in conn.search(options="size(1)", prefetch=1, timeout=WAIT):
            for thing in (t["thingId"] for t in page):
                got[thing] = revisions(conn.subscribe_for_persisted_events(thing, timeout=WAIT))
    assert got == {f"{NS}:{t}": revisions(events) for t, events in things.items()}


def test_search_invalid_option_and_publisher(server: DittoHistoryServer) -> None:
    with connect(server.url) as conn:
        with pytest.raises(DittoRemoteError) as info:
            list(conn.search(options="size(1000)", timeout=WAIT))
        recorder = Recorder()
        conn.search_publisher(namespaces=[NS]).subscribe(recorder)
        assert recorder.subscribed.wait(WAIT)
        recorder.subscription.request(10)
        assert recorder.done.wait(WAIT)
    assert (info.value.status, info.value.code) == (400, "thing-search:search.option.invalid")
    assert recorder.completed
    assert [t["thingId"] for t in recorder.items[0]] == [f"{NS}:thing-1", f"{NS}:thing-2"]


# -- wss:// ----------------------------------------------------------------------------------


def test_history_over_wss_with_bearer_token() -> None:
    import ssl

    import trustme

    ca = trustme.CA()
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    history = RecordingHistory()
    with serve(
        "wss://127.0.0.1:0/ws/2", history, ssl_context=server_ctx,
        authenticate=require_bearer("jwt"),
    ) as srv:
        assert srv.url.startswith("wss://127.0.0.1:")
        with connect(srv.url, token="jwt", ssl_context=client_ctx) as conn:
            got = list(conn.subscribe_for_persisted_events(f"{NS}:t", timeout=WAIT))
        with pytest.raises(ssl.SSLError):
            connect(srv.url, token="jwt")  # the system CAs do not know this server
    assert revisions(got) == [1, 2, 3]
    assert history.authorization == ["Bearer jwt"]


class ThreadedPublisher:
    """A Publisher that signals from its own worker thread, within demand."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.requested = 0
        self.sent = 0
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._subscriber: Any = None

    def subscribe(self, subscriber: Any) -> None:
        self._subscriber = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        with self._lock:
            self.requested += n
        worker = threading.Thread(target=self._emit)
        self.threads.append(worker)
        worker.start()

    def _emit(self) -> None:
        with self._lock:
            while self.sent < min(self.requested, self.n):
                self.sent += 1
                self._subscriber.on_next(counter_history("p", self.sent)[-1])
            if self.sent == self.n:
                self.sent += 1  # complete once
                self._subscriber.on_complete()

    def cancel(self) -> None:
        pass


def test_publisher_source_signalling_from_other_threads() -> None:
    publishers: list[ThreadedPublisher] = []

    class PublisherHistory:
        def open(self, request: HistoryRequest) -> Any:
            publishers.append(ThreadedPublisher(500))
            return publishers[-1]

    with serve(URL, PublisherHistory()) as srv, connect(srv.url) as conn:
        got = revisions(conn.subscribe_for_persisted_events(f"{NS}:p", prefetch=10, timeout=WAIT))
    assert got == list(range(1, 501))
    (publisher,) = publishers
    assert publisher.requested <= 500 + 10  # never asked far beyond what was consumed
    for worker in publisher.threads:
        worker.join(WAIT)


def test_server_subscription_limit_fails_the_extra_subscribe() -> None:
    history = CountingHistory()
    config = DittoServerConfig(max_subscriptions=2)
    with serve(URL, history, config=config) as srv, connect(srv.url) as conn:
        first = conn.subscribe_for_persisted_events(f"{NS}:c", prefetch=2, timeout=WAIT)
        second = conn.subscribe_for_persisted_events(f"{NS}:c", prefetch=2, timeout=WAIT)
        assert next(first)["revision"] == next(second)["revision"] == 1
        with pytest.raises(DittoRemoteError) as info:
            next(conn.subscribe_for_persisted_events(f"{NS}:c", timeout=WAIT))
        first.close()
        second.close()
    assert (info.value.status, info.value.code) == (429, "streaming.subscription.limit.exceeded")


def test_rs_2_13_a_subscriber_that_raises_is_cancelled_and_the_session_goes_on() -> None:
    history = CountingHistory()

    class Raising(Recorder):
        def on_next(self, item: Any) -> None:
            super().on_next(item)
            raise RuntimeError("subscriber bug")  # breaks rule 2.13

    with serve(URL, history) as srv, connect(srv.url) as conn:
        bad = Raising()
        conn.persisted_events_publisher(f"{NS}:c").subscribe(bad)
        assert bad.subscribed.wait(WAIT)
        bad.subscription.request(10)
        assert history.closed.wait(WAIT)  # the server saw the cancel
        assert len(bad.items) == 1
        with conn.subscribe_for_persisted_events(f"{NS}:c", timeout=WAIT) as again:
            assert next(again)["revision"] == 1


def test_threaded_sources_pull_on_a_worker_within_demand() -> None:
    pulled_on: set[str] = set()
    history = CountingHistory(n=200)

    class Blocking:
        def open(self, request: HistoryRequest) -> Iterator[Any]:
            for event in history.open(request):
                pulled_on.add(threading.current_thread().name)
                yield event

    with serve(URL, Blocking(), threaded_sources=True) as srv, connect(srv.url) as conn:
        events = conn.subscribe_for_persisted_events(f"{NS}:c", prefetch=4, timeout=WAIT)
        assert next(events)["revision"] == 1
        assert history.pulled <= 1 + 4 + 1
        assert revisions(events) == list(range(2, 201))
    assert pulled_on == {"sansrs-ditto-source-streaming-0"}


def test_client_vanishing_releases_the_server_sources() -> None:
    history = CountingHistory()
    with serve(URL, history) as srv:
        conn = connect(srv.url)
        events = conn.subscribe_for_persisted_events(f"{NS}:c", prefetch=4, timeout=WAIT)
        assert next(events)["revision"] == 1
        conn.abort()  # TCP reset, no WebSocket close
        assert history.closed.wait(WAIT), "the source was not closed when the client vanished"
        assert history.pulled <= 1 + 4 + 1


def test_publishers_that_end_before_any_request() -> None:
    # A Publisher may signal on_complete / on_error right in subscribe, before
    # any demand (rules 1.4/1.5); the server still waits for the first request
    # to send complete / failed (Ditto's guarantee) and never loses the signal.
    from sansrs.streams import empty_publisher, error_publisher

    class Ending:
        def open(self, request: HistoryRequest) -> Any:
            if request.topic.entity_name == "empty":
                return empty_publisher()
            return error_publisher(DittoException(DittoError(
                status=410, error="things:thing.gone", message="gone")))

    with serve(URL, Ending()) as srv, connect(srv.url) as conn:
        assert list(conn.subscribe_for_persisted_events(f"{NS}:empty", timeout=WAIT)) == []
        with pytest.raises(DittoRemoteError) as info:
            next(conn.subscribe_for_persisted_events(f"{NS}:error", timeout=WAIT))
    assert (info.value.status, info.value.code) == (410, "things:thing.gone")


def test_selector_loop_drives_server_and_clients() -> None:
    from sansrs.adapters.drive import Loop

    loop = Loop(name="ditto-test-loop").start()
    history = InMemoryHistory([e for k in range(5) for e in counter_history(f"s{k}", 50)])
    try:
        with serve(URL, history, loop=loop) as srv:
            clients = [connect(srv.url, loop=loop) for _ in range(5)]
            try:
                iterators = [
                    c.subscribe_for_persisted_events(f"{NS}:s{k}", prefetch=8, timeout=WAIT)
                    for k, c in enumerate(clients)
                ]
                assert all(revisions(it) == list(range(1, 51)) for it in iterators)
                assert len(srv.peers) == 5
            finally:
                for c in clients:
                    c.close()
    finally:
        loop.stop()

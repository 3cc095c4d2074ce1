"""Reconnect, resume, token refresh and history-then-live against the fake
Ditto (tests/adapters/ditto/fake_ditto.py: closes on token expiry, accepts
``JWT-TOKEN``, drops on command, pushes live events after
``START-SEND-EVENTS``): every revision exactly once, in order."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.ditto import InMemoryHistory, connect, serve
from sansrs.adapters.ditto.history import HistoryRequest
from sansrs.adapters.ditto.live import STARTED, LiveNotAcknowledged, LiveOverflow
from sansrs.adapters.ditto.resume import ReconnectFailed, ReconnectPolicy
from sansrs.adapters.ditto.session import DittoSession
from sansrs.adapters.ditto.tokens import TokenPolicy
from sansrs.adapters.drive import ConnectionClosed

from sansrs.ditto import DittoRemoteError, DittoServerConfig, Kind
from tests.adapters.ditto.fake_ditto import FakeDitto
from tests.adapters.ditto.helpers import NS, counter_history

THING = f"{NS}:thing-1"
#: reconnect at once (the fake is back immediately), give up after 5 s
NOW = ReconnectPolicy(initial_delay=0, max_delay=0, max_outage=5)


def event(revision: int) -> dict[str, Any]:
    return counter_history("thing-1", revision)[-1]


def revisions(items: Any) -> list[int]:
    return [item["revision"] for item in items]


def take(it: Iterator[Any], n: int) -> list[int]:
    return [next(it)["revision"] for _ in range(n)]


class Tokens:
    """A token provider: t0, t1, ... (opaque: their life is the policy's)."""

    def __init__(self) -> None:
        self._count = itertools.count()
        self.issued: list[str] = []

    def __call__(self) -> str:
        token = f"t{next(self._count)}"
        self.issued.append(token)
        return token


@pytest.mark.timeout(30)
def test_ditto_session_history_outlives_three_token_lifetimes_and_two_drops_exactly_once() -> None:
    tokens = Tokens()
    policy = TokenPolicy(lifetime=1.0, refresh_margin=0.5)
    with (FakeDitto({THING: counter_history("thing-1", 300)}, token_lifetime=1.0) as ditto,
          DittoSession(ditto.url, token=tokens, reconnect=NOW, token_policy=policy) as session):
        events = session.subscribe_for_persisted_events(THING, prefetch=16)
        got = take(events, 100)
        for index, upto in ((0, 200), (1, 300)):
            connection = ditto.connection(index)
            # Outlive a token's life on this connection: refreshed twice on the open socket.
            ditto.wait_for(lambda c=connection: len(c.refreshed_tokens) >= 2)  # type: ignore[misc]
            connection.drop()
            got += take(events, upto - len(got))
        last = ditto.connection(2)
        ditto.wait_for(lambda: len(last.refreshed_tokens) >= 2)
        rest = list(events)
    assert got + revisions(rest) == list(range(1, 301))  # once each, in order
    assert session.reconnects == 2 and events.resumes == 2
    assert not [c for c in ditto.connections if c.close_reason == "token expired"]
    # the upgrade's tokens came from the provider (one per connection), the rest on the socket
    assert len(tokens.issued) >= 3 + 6


@pytest.mark.timeout(20)
def test_ditto_session_replaces_an_expired_token_on_demand_when_ditto_closes() -> None:
    tokens = Tokens()
    with (FakeDitto({THING: counter_history("thing-1", 40)}) as ditto,
          DittoSession(ditto.url, token=tokens, reconnect=NOW) as session):
        events = session.subscribe_for_persisted_events(THING, prefetch=4)
        got = take(events, 10)
        ditto.connection(0).expire_token()  # Ditto closes the socket, 1000
        got += revisions(events)
    assert got == list(range(1, 41))
    assert tokens.issued == ["t0", "t1"]  # the second asked for by the reconnect


@pytest.mark.timeout(20)
def test_ditto_session_gives_up_after_the_outage_with_a_typed_error() -> None:
    with FakeDitto({THING: counter_history("thing-1", 40)}) as ditto:
        url = ditto.url
        session = DittoSession(url, reconnect=ReconnectPolicy(
            initial_delay=0.01, max_delay=0.01, jitter=0, max_outage=0.05))
        events = session.subscribe_for_persisted_events(THING, prefetch=4)
        take(events, 2)
    # the fake is gone: every attempt is refused until the outage is exceeded
    with pytest.raises(ReconnectFailed) as failed:
        list(events)
    assert isinstance(failed.value, ConnectionClosed)
    assert isinstance(failed.value.cause, OSError) and failed.value.attempts >= 1
    session.close()


@pytest.mark.timeout(20)
def test_ditto_plain_connection_loss_still_ends_the_iterator() -> None:
    with FakeDitto({THING: counter_history("thing-1", 40)}) as ditto, connect(ditto.url) as conn:
        events = conn.subscribe_for_persisted_events(THING, prefetch=4)
        take(events, 2)
        ditto.drop_all()
        with pytest.raises(ConnectionClosed):
            list(events)


@pytest.mark.timeout(20)
def test_ditto_follow_goes_from_history_to_live_with_no_gap_and_no_duplicate() -> None:
    with FakeDitto({THING: counter_history("thing-1", 50)}) as ditto, connect(ditto.url) as conn:
        follow = conn.follow(THING, prefetch=16)  # live acknowledged, history subscribed
        got = take(follow, 50)  # the history, as it was when subscribed
        ditto.publish(event(50))  # live, already in the history: a duplicate
        ditto.publish(event(51), entity=THING)
        ditto.publish(event(52), entity=THING)
        ditto.append(THING, event(53))  # persisted, its live event lost (at most once)
        ditto.append(THING, event(54))
        ditto.publish(event(55), entity=THING)
        got += take(follow, 5)  # 53 and 54 read from the history before 55
        ditto.publish(event(56), entity=THING)
        got += take(follow, 1)
        follow.close()
    assert got == list(range(1, 57))
    sent = ditto.connections[0].received
    assert sent[0].startswith("START-SEND-EVENTS?namespaces=org.eclipse.ditto&filter=eq%28thingId")


@pytest.mark.timeout(20)
def test_ditto_follow_resumes_after_a_drop_and_after_a_live_overflow() -> None:
    with (FakeDitto({THING: counter_history("thing-1", 30)}) as ditto,
          DittoSession(ditto.url, reconnect=NOW) as session):
        follow = session.follow(THING, prefetch=4)
        got = take(follow, 10)
        ditto.drop_all()
        got += take(follow, 20)
        ditto.wait_for(lambda: len(ditto.connections) == 2 and ditto.connections[1].live)
        for revision in range(31, 51):  # more than prefetch while nobody reads
            ditto.publish(event(revision), entity=THING)
        got += take(follow, 20)
        follow.close()
    assert got == list(range(1, 51))
    assert follow.resumes == 1 and session.reconnects == 1


@pytest.mark.timeout(20)
def test_ditto_live_events_overflow_ends_the_tap_after_what_fits() -> None:
    with FakeDitto({THING: []}) as ditto, connect(ditto.url) as conn:
        live = conn.live_events(THING, prefetch=4)
        assert next(live) is STARTED
        for revision in range(1, 11):
            ditto.publish(event(revision))
        ditto.publish({**event(1), "topic": f"{NS}/other/things/twin/events/modified"})
        assert take(live, 3) == [1, 2, 3]
        with pytest.raises(LiveOverflow):
            next(live)
        ditto.wait_for(lambda: "STOP-SEND-EVENTS" in ditto.connections[0].received)


# -- asyncio --------------------------------------------------------------------------


async def _take(it: Any, n: int) -> list[int]:
    return [(await it.__anext__())["revision"] for _ in range(n)]


@pytest.mark.timeout(30)
def test_ditto_aio_session_resumes_a_history_across_drops_with_an_async_token_provider() -> None:
    from sansrs.adapters.ditto.aio import AsyncDittoSession

    issued: list[str] = []

    async def provider() -> str:
        issued.append(f"a{len(issued)}")
        return issued[-1]

    async def main(ditto: FakeDitto) -> list[int]:
        policy = TokenPolicy(lifetime=1.0, refresh_margin=0.5)
        async with AsyncDittoSession(ditto.url, reconnect=NOW, token=provider,
                                     token_policy=policy) as session:
            events = await session.subscribe_for_persisted_events(THING, prefetch=8)
            got = await _take(events, 30)
            for index in (0, 1):
                connection = ditto.connection(index)
                await asyncio.to_thread(ditto.wait_for,
                                        lambda c=connection: len(c.refreshed_tokens) >= 2)
                connection.drop()
                got += await _take(events, 30)
            got += [e["revision"] async for e in events]
            assert session.reconnects == 2 and events.resumes == 2
        return got

    with FakeDitto({THING: counter_history("thing-1", 120)}, token_lifetime=1.0) as ditto:
        got = asyncio.run(asyncio.wait_for(main(ditto), 25))
    assert got == list(range(1, 121))
    assert not [c for c in ditto.connections if c.close_reason == "token expired"]
    assert ditto.connections[0].refreshed_tokens[:2] == ["a1", "a2"]  # a0 went in the upgrade


@pytest.mark.timeout(20)
def test_ditto_aio_follow_goes_from_history_to_live_with_no_gap_and_no_duplicate() -> None:
    from sansrs.adapters.ditto import aio

    async def main(ditto: FakeDitto) -> list[int]:
        async with await aio.connect(ditto.url) as conn:
            follow = await conn.follow(THING, prefetch=16)
            got = await _take(follow, 20)
            ditto.publish(event(20))  # a duplicate
            ditto.publish(event(21), entity=THING)
            ditto.append(THING, event(22))  # its live event lost
            ditto.publish(event(23), entity=THING)
            got += await _take(follow, 3)
            await follow.aclose()
        return got

    with FakeDitto({THING: counter_history("thing-1", 20)}) as ditto:
        assert asyncio.run(asyncio.wait_for(main(ditto), 15)) == list(range(1, 24))


class RecordingHistory(InMemoryHistory):
    """Records each search's filter (what a resumed search asked for)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__(events)
        self.filters: list[str | None] = []

    def open(self, request: HistoryRequest) -> Any:
        if request.kind is Kind.SEARCH:
            self.filters.append(request.options.filter)  # type: ignore[union-attr]
        return super().open(request)


def _things(n: int) -> list[dict[str, Any]]:
    return [{**counter_history(f"t-{k:02d}", 1)[0], "path": "/attributes/k", "value": k}
            for k in range(n)]


@pytest.mark.timeout(20)
def test_ditto_session_search_resumes_after_the_last_thing_by_thing_id() -> None:
    history = RecordingHistory(_things(30))
    with (serve("ws://127.0.0.1:0/ws/2", history) as server,
          DittoSession(server.url, reconnect=NOW) as session):
        pages = session.search(filter="exists(attributes/k)", options="size(5)", prefetch=1)
        got = [t["thingId"] for _ in range(2) for t in next(pages)]
        server.peers[0].close()  # the connection is lost mid-search
        got += [t["thingId"] for page in pages for t in page]
    assert got == [f"{NS}:t-{k:02d}" for k in range(30)]  # each thing once, in order
    # resumed after the last thing handed out before the loss (t-09, or a
    # page later if the next page was already queued when the loss came)
    first, resumed = history.filters
    assert first == "exists(attributes/k)"
    assert resumed in [f'and(gt(thingId,"{NS}:t-{k:02d}"),exists(attributes/k))' for k in (9, 14)]
    assert pages.position.resumes == 1


@pytest.mark.timeout(20)
def test_ditto_session_search_not_ordered_by_thing_id_is_not_resumed() -> None:
    with (serve("ws://127.0.0.1:0/ws/2", InMemoryHistory(_things(30))) as server,
          DittoSession(server.url, reconnect=NOW) as session):
        pages = session.search(options="size(5),sort(-thingId)", prefetch=1)
        next(pages)
        server.peers[0].close()
        with pytest.raises(ConnectionClosed):
            list(pages)


@pytest.mark.timeout(20)
def test_ditto_aio_session_search_resumes_after_the_last_thing() -> None:
    from sansrs.adapters.ditto.aio import AsyncDittoSession

    async def main(server: Any) -> list[str]:
        async with AsyncDittoSession(server.url, reconnect=NOW) as session:
            pages = session.search(options="size(4)", prefetch=1)
            got = [t["thingId"] for t in await pages.__anext__()]
            await asyncio.to_thread(server.peers[0].close)
            got += [t["thingId"] async for page in pages for t in page]
        return got

    with serve("ws://127.0.0.1:0/ws/2", InMemoryHistory(_things(12))) as server:
        got = asyncio.run(asyncio.wait_for(main(server), 15))
    assert got == [f"{NS}:t-{k:02d}" for k in range(12)]


class ClosingHistory(InMemoryHistory):
    """Signals when the first subscription's source is closed (Ditto ended it)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__(events)
        self.first_closed = threading.Event()
        self.opened = 0

    def open(self, request: HistoryRequest) -> Any:
        self.opened += 1
        return self._watched(super().open(request), self.opened == 1)

    def _watched(self, items: Any, first: bool) -> Iterator[Any]:
        try:
            yield from items
        finally:
            if first:
                self.first_closed.set()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("resume", [True, False])
def test_ditto_session_renews_a_history_that_ditto_ended_for_lack_of_requests(
    resume: bool,
) -> None:
    history = ClosingHistory(counter_history("thing-1", 20))
    config = DittoServerConfig(idle_timeout=0.2)
    with (serve("ws://127.0.0.1:0/ws/2", history, config=config) as server,
          DittoSession(server.url, reconnect=NOW) as session):
        events = (session.subscribe_for_persisted_events(THING, prefetch=2) if resume
                  else session.connection.subscribe_for_persisted_events(THING, prefetch=2))
        got = take(events, 1)
        assert history.first_closed.wait(10)  # 408 after 0.2 s without a request
        if not resume:
            with pytest.raises(DittoRemoteError) as failed:
                list(events)
            assert failed.value.status == 408
            return
        got += revisions(events)
    assert got == list(range(1, 21)) and events.resumes == 1 and session.reconnects == 0


@pytest.mark.timeout(20)
def test_ditto_session_on_the_selector_loop_refreshes_tokens_and_resumes() -> None:
    tokens = Tokens()
    policy = TokenPolicy(lifetime=1.0, refresh_margin=0.5)
    with (FakeDitto({THING: counter_history("thing-1", 60)}, token_lifetime=1.0) as ditto,
          DittoSession(ditto.url, token=tokens, reconnect=NOW, token_policy=policy,
                       loop="selector") as session):
        events = session.subscribe_for_persisted_events(THING, prefetch=8)
        got = take(events, 20)
        first = ditto.connection(0)
        ditto.wait_for(lambda: len(first.refreshed_tokens) >= 2)  # past the first token's life
        first.drop()
        got += revisions(events)
    assert got == list(range(1, 61)) and session.reconnects == 1
    assert first.close_reason != "token expired"


@pytest.mark.timeout(20)
def test_ditto_follow_of_a_server_without_live_events_fails_typed_not_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sansrs.adapters.ditto import follow

    monkeypatch.setattr(follow, "ACK_TIMEOUT", 0.3)
    # the project's server answers START-SEND-EVENTS with json.invalid, no ACK
    with (serve("ws://127.0.0.1:0/ws/2", InMemoryHistory(counter_history("thing-1", 3)))
          as server, connect(server.url) as conn):
        with pytest.raises(LiveNotAcknowledged, match="did not acknowledge START-SEND-EVENTS"):
            conn.follow(THING)
        assert not conn.closed  # the connection goes on


@pytest.mark.timeout(20)
def test_ditto_follow_without_a_timeout_waits_through_quiet_periods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sansrs.adapters.ditto import follow as follow_module

    monkeypatch.setattr(follow_module, "ACK_TIMEOUT", 0.1)  # the tap's bounded waits
    with (FakeDitto({THING: counter_history("thing-1", 3)}, ping_interval=0.5) as ditto,
          connect(ditto.url) as conn):
        follow = conn.follow(THING)
        got = take(follow, 3)
        later: queue.Queue[Any] = queue.Queue()
        reader = threading.Thread(target=lambda: later.put(next(follow)), daemon=True)
        reader.start()
        connection = ditto.connection(0)
        # quiet for longer than several of the tap's waits: the fake's idle ping comes at 0.5 s
        ditto.wait_for(lambda: connection.pings_sent >= 1)
        ditto.publish(event(4), entity=THING)
        got.append(later.get(timeout=10)["revision"])
        follow.close()
    assert got == [1, 2, 3, 4]


@pytest.mark.timeout(20)
def test_ditto_session_iterators_opened_on_a_connection_lost_while_idle_reconnect() -> None:
    with (FakeDitto({THING: counter_history("thing-1", 20)}) as ditto,
          DittoSession(ditto.url, reconnect=NOW) as session):
        idle = session.connection
        ditto.drop_all()
        assert idle.wait_closed(10)
        history = session.subscribe_for_persisted_events(THING, prefetch=4)
        follow = session.follow(THING, prefetch=4)  # same generation: one reconnect for both
        assert revisions(history) == list(range(1, 21))
        assert take(follow, 20) == list(range(1, 21))
        follow.close()
    assert session.reconnects == 1


@pytest.mark.timeout(20)
def test_ditto_aio_session_iterators_opened_on_a_connection_lost_while_idle_reconnect() -> None:
    from sansrs.adapters.ditto.aio import AsyncDittoSession

    async def main(ditto: FakeDitto) -> tuple[list[int], list[int], int]:
        async with AsyncDittoSession(ditto.url, reconnect=NOW) as session:
            idle = session.connection
            ditto.drop_all()
            await idle.wait_closed()
            history = await session.subscribe_for_persisted_events(THING, prefetch=4)
            follow = await session.follow(THING, prefetch=4)
            got = [e["revision"] async for e in history]
            followed = await _take(follow, 20)
            await follow.aclose()
            return got, followed, session.reconnects

    with FakeDitto({THING: counter_history("thing-1", 20)}) as ditto:
        got, followed, reconnects = asyncio.run(asyncio.wait_for(main(ditto), 15))
    assert got == followed == list(range(1, 21)) and reconnects == 1


class ScriptedStream:
    """A subscription as the iterators see it (StreamIterator's behaviour):
    its items, then its error once, then the end."""

    def __init__(self, items: list[Any], error: BaseException | None = None) -> None:
        self.items = list(items)
        self.error = error
        self.closed = False

    def __iter__(self) -> ScriptedStream:
        return self

    def __next__(self) -> Any:
        if self.items:
            return self.items.pop(0)
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        raise StopIteration

    def close(self) -> None:
        self.closed = True

    def __aiter__(self) -> ScriptedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return self.__next__()
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self.close()


class ScriptedConnection:
    """A connection whose live tap dies before Ditto's acknowledgement (when
    ``dies``), else acknowledges; its history is revisions 1..3."""

    def __init__(self, dies: bool) -> None:
        self.dies = dies

    def live_events(self, entity: str, **options: Any) -> ScriptedStream:
        if self.dies:
            return ScriptedStream([], ConnectionClosed("lost before the ACK"))
        return ScriptedStream([STARTED])

    def subscribe_for_persisted_events(self, entity: str, **options: Any) -> ScriptedStream:
        assert not self.dies
        return ScriptedStream(counter_history("thing-1", 3))


def test_ditto_follow_whose_live_tap_dies_before_the_ack_reconnects_and_starts_again() -> None:
    from sansrs.adapters.ditto.follow import FollowEvents

    connections = [ScriptedConnection(dies=True), ScriptedConnection(dies=False)]
    lost: list[BaseException] = []

    def reconnect(generation: int, cause: BaseException) -> None:
        lost.append(cause)
        connections.pop(0)

    follow = FollowEvents(lambda: (connections[0], len(lost)), reconnect, THING, {}, 4, None)
    assert [next(follow)["revision"] for _ in range(3)] == [1, 2, 3]
    assert [str(e) for e in lost] == ["lost before the ACK"]


def test_ditto_aio_follow_whose_live_tap_dies_before_the_ack_reconnects_and_starts_again() -> None:
    from sansrs.adapters.ditto.aio import AsyncFollowEvents

    connections = [ScriptedConnection(dies=True), ScriptedConnection(dies=False)]
    lost: list[BaseException] = []

    async def current() -> Any:
        return connections[0], len(lost)

    async def reconnect(generation: int, cause: BaseException) -> None:
        lost.append(cause)
        connections.pop(0)

    async def main() -> list[int]:
        follow = AsyncFollowEvents(current, reconnect, THING, {}, 4, None)
        with contextlib.suppress(ConnectionClosed):
            await follow.start()  # as AsyncDittoSession.follow does
        return await _take(follow, 3)

    assert asyncio.run(main()) == [1, 2, 3] and len(lost) == 1


@pytest.mark.timeout(20)
def test_ditto_connection_refreshes_its_token_on_demand() -> None:
    tokens = Tokens()
    with FakeDitto({THING: []}) as ditto, connect(ditto.url, token=tokens) as conn:
        conn.refresh_token()
        first = ditto.connection(0)
        ditto.wait_for(lambda: first.refreshed_tokens == ["t1"])
    with FakeDitto({THING: []}) as ditto, connect(ditto.url, token="fixed") as conn:
        conn.refresh_token()  # no provider: nothing to send
        assert revisions(conn.subscribe_for_persisted_events(THING)) == []
        assert ditto.connection(0).refreshed_tokens == []

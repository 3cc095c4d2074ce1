"""The rules of the resuming iterators and of a session's reconnect, whose
logic is written once (``follow.HistoryRead`` / ``FollowRead`` /
``SearchRead``, ``resume.Reconnecting``), through both forms: the
synchronous iterators and session, and the asyncio ones. Scripted
connections play Ditto (no socket): each test says exactly what every
subscription yields, so the seams are deterministic."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from sansrs.adapters.ditto import aio
from sansrs.adapters.ditto.follow import FollowEvents, ResumingHistory, ResumingSearch
from sansrs.adapters.ditto.live import STARTED, LiveNotAcknowledged, LiveOverflow
from sansrs.adapters.ditto.resume import ReconnectFailed, ReconnectPolicy
from sansrs.adapters.ditto.session import DittoSession
from sansrs.adapters.drive import ConnectionClosed

from sansrs.ditto import DittoError, DittoRemoteError
from tests.adapters.ditto.helpers import NS

THING = f"{NS}:thing-1"


def event(revision: int) -> dict[str, Any]:
    return {"topic": f"{NS}/thing-1/things/twin/events/modified", "revision": revision}


def events(*revisions: int) -> list[Any]:
    return [event(r) for r in revisions]


def thing(name: str) -> dict[str, Any]:
    return {"thingId": f"{NS}:{name}"}


def remote(status: int) -> DittoRemoteError:
    return DittoRemoteError(DittoError(status=status, error="e", message=f"status {status}"))


class Scripted:
    """A subscription as the iterators see it (either form): its items in
    order, an exception among them raised in its turn, then the end."""

    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)
        self.closed = False

    def _take(self, end: type[Exception]) -> Any:
        if not self.items:
            raise end
        item = self.items.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    def __iter__(self) -> Scripted:
        return self

    def __next__(self) -> Any:
        return self._take(StopIteration)

    def __aiter__(self) -> Scripted:
        return self

    async def __anext__(self) -> Any:
        return self._take(StopAsyncIteration)

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


class Connection:
    """A connection whose subscriptions are scripted: each call takes the
    next script of its kind and records the keywords it was made with."""

    def __init__(self, histories: Sequence[list[Any]] = (), lives: Sequence[list[Any]] = (),
                 searches: Sequence[list[Any]] = ()) -> None:
        self.scripts = {"history": list(histories), "live": list(lives), "search": list(searches)}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.opened: list[Scripted] = []

    def _open(self, kind: str, options: dict[str, Any]) -> Scripted:
        self.calls.append((kind, options))
        stream = Scripted(self.scripts[kind].pop(0))
        self.opened.append(stream)
        return stream

    def subscribe_for_persisted_events(self, entity: str, **options: Any) -> Scripted:
        return self._open("history", {k: v for k, v in options.items()
                                      if k not in ("prefetch", "timeout")})

    def live_events(self, entity: str, **options: Any) -> Scripted:
        return self._open("live", {"timeout": options["timeout"]})

    def search(self, **options: Any) -> Scripted:
        return self._open("search", {k: v for k, v in options.items()
                                     if k not in ("prefetch", "timeout")})

    def queries(self, kind: str) -> list[dict[str, Any]]:
        return [options for k, options in self.calls if k == kind]


class World:
    """The connections a session goes through: ``reconnect`` moves to the
    next one (and records why)."""

    def __init__(self, *connections: Connection) -> None:
        self.connections = list(connections)
        self.generation = 0
        self.lost: list[BaseException] = []

    def current(self) -> tuple[Connection, int]:
        return self.connections[self.generation], self.generation

    def reconnect(self, generation: int, cause: BaseException) -> None:
        self.lost.append(cause)
        if self.generation + 1 >= len(self.connections):
            raise cause  # nothing to come back to
        self.generation += 1


class Driven:
    """An iterator of either form, driven from the test's thread."""

    def __init__(self, it: Any, step: Callable[[], Any], close: Callable[[], None]) -> None:
        self.it = it
        self._step = step
        self._close = close

    def next(self) -> Any:
        return self._step()

    def take(self, n: int) -> list[Any]:
        return [self._step() for _ in range(n)]

    def rest(self) -> list[Any]:
        out = []
        with contextlib.suppress(StopIteration):
            while True:
                out.append(self._step())
        return out

    def close(self) -> None:
        self._close()


def _sync(cls: Any, world: World, *args: Any) -> Driven:
    it = cls(world.current, world.reconnect, *args)
    return Driven(it, lambda: next(it), it.close)


def _asyncio(cls: Any, world: World, *args: Any) -> Driven:
    async def current() -> tuple[Connection, int]:
        return world.current()

    async def reconnect(generation: int, cause: BaseException) -> None:
        world.reconnect(generation, cause)

    it = cls(current, reconnect, *args)

    ended = object()

    async def step() -> Any:
        return await anext(it, ended)

    def run(coroutine: Any) -> Any:
        # Scripted subscriptions hold nothing of a loop: a loop per step will do.
        return asyncio.run(coroutine)

    def next_item() -> Any:
        item = run(step())
        if item is ended:
            raise StopIteration
        return item

    if hasattr(it, "start") and cls is not aio.AsyncResumingSearch:
        with contextlib.suppress(ConnectionClosed):  # as AsyncDittoSession does
            run(it.start())
    return Driven(it, next_item, lambda: run(it.aclose()))


FORMS: dict[str, tuple[Callable[..., Driven], dict[str, Any]]] = {
    "sync": (_sync, {"history": ResumingHistory, "follow": FollowEvents,
                     "search": ResumingSearch}),
    "asyncio": (_asyncio, {"history": aio.AsyncResumingHistory, "follow": aio.AsyncFollowEvents,
                           "search": aio.AsyncResumingSearch}),
}


@pytest.fixture(params=sorted(FORMS))
def form(request: pytest.FixtureRequest) -> Callable[..., Driven]:
    drive, classes = FORMS[request.param]

    def make(kind: str, world: World, *args: Any) -> Driven:
        return drive(classes[kind], world, *args)

    return make


def revisions(items: list[Any]) -> list[int]:
    return [item["revision"] for item in items]


def test_ditto_follow_drops_live_duplicates_and_reads_a_live_gap_from_the_history_first(
    form: Callable[..., Driven],
) -> None:
    conn = Connection(histories=[events(1, 2, 3), events(4, 5)],
                      lives=[[STARTED, *events(3, 6, 7)]])
    follow = form("follow", World(conn), THING, {}, 8, None)
    assert revisions(follow.take(7)) == [1, 2, 3, 4, 5, 6, 7]
    # the live 3 was already in the history; 4 and 5 (their live events lost) were read
    # from the history, bounded by the held live event, before it
    assert conn.queries("history") == [{}, {"from_revision": 4, "to_revision": 5}]


def test_ditto_follow_with_a_filter_reads_no_gap(form: Callable[..., Driven]) -> None:
    conn = Connection(histories=[events(1)], lives=[[STARTED, *events(5)]])
    follow = form("follow", World(conn), THING, {"filter": "exists(x)"}, 8, None)
    assert revisions(follow.take(2)) == [1, 5]  # a filter skips revisions by design
    assert conn.queries("history") == [{"filter": "exists(x)"}]


def test_ditto_follow_restarts_from_the_last_revision_after_a_live_overflow(
    form: Callable[..., Driven],
) -> None:
    conn = Connection(histories=[events(1, 2), events(4, 5)],
                      lives=[[STARTED, *events(3), LiveOverflow("full")], [STARTED, *events(6)]])
    world = World(conn)
    follow = form("follow", world, THING, {}, 8, None)
    assert revisions(follow.take(6)) == [1, 2, 3, 4, 5, 6]
    assert conn.queries("history") == [{}, {"from_revision": 4}]
    assert world.lost == [] and conn.opened[0].closed  # the full tap closed, no reconnect


def test_ditto_follow_resumes_on_the_restored_connection_after_a_loss(
    form: Callable[..., Driven],
) -> None:
    lost = ConnectionClosed("dropped")
    first = Connection(histories=[events(1, 2)], lives=[[STARTED, *events(3), lost]])
    second = Connection(histories=[events(4)], lives=[[STARTED, *events(5)]])
    world = World(first, second)
    follow = form("follow", world, THING, {"from_revision": 1}, 8, None)
    assert revisions(follow.take(5)) == [1, 2, 3, 4, 5]
    assert world.lost == [lost] and follow.it.resumes == 1 and follow.it.last == 5
    assert second.queries("history") == [{"from_revision": 4}]


def test_ditto_follow_unacknowledged_fails_typed_and_a_quiet_tap_waits_without_a_timeout(
    form: Callable[..., Driven],
) -> None:
    silent = Connection(lives=[[TimeoutError("no item")]])
    with pytest.raises(LiveNotAcknowledged, match="did not acknowledge START-SEND-EVENTS"):
        form("follow", World(silent), THING, {}, 8, 0.5).next()
    assert silent.opened[0].closed
    # no timeout of the user's: the tap's bounded waits run out and the follow waits on
    quiet = Connection(histories=[events(1)], lives=[[STARTED, TimeoutError("quiet"), event(2)]])
    assert revisions(form("follow", World(quiet), THING, {}, 8, None).take(2)) == [1, 2]
    # the user's timeout: raised, and the follow goes on after it
    timed = Connection(histories=[events(1)], lives=[[STARTED, TimeoutError("quiet"), event(2)]])
    follow = form("follow", World(timed), THING, {}, 8, 0.5)
    assert revisions(follow.take(1)) == [1]
    with pytest.raises(TimeoutError, match="quiet"):
        follow.next()
    assert follow.next()["revision"] == 2


def test_ditto_follow_refuses_a_history_with_an_end(form: Callable[..., Driven]) -> None:
    with pytest.raises(ValueError, match="no end"):
        form("follow", World(Connection()), THING, {"to_revision": 9}, 8, None)


def test_ditto_resuming_history_renews_after_a_408_and_raises_other_remote_errors(
    form: Callable[..., Driven],
) -> None:
    conn = Connection(histories=[[*events(1, 2), remote(408)], events(2, 3)])
    world = World(conn)
    history = form("history", world, THING, {"from_revision": 1}, 4, None)
    assert revisions(history.rest()) == [1, 2, 3]  # the 2 at the seam dropped
    assert world.lost == [] and history.it.resumes == 1
    assert conn.queries("history") == [{"from_revision": 1}, {"from_revision": 3}]
    failing = Connection(histories=[[*events(1), remote(404)]])
    history = form("history", World(failing), THING, {}, 4, None)
    assert history.next()["revision"] == 1
    with pytest.raises(DittoRemoteError) as failed:
        history.next()
    assert failed.value.status == 404 and failing.opened[0].closed


def test_ditto_resuming_history_reconnects_after_a_loss_and_stops_at_its_end(
    form: Callable[..., Driven],
) -> None:
    first = Connection(histories=[[*events(1, 2), ConnectionClosed("dropped")]])
    second = Connection(histories=[events(3, 4)])
    world = World(first, second)
    query = {"from_timestamp": "2024-01-01T00:00:00Z", "to_revision": 4}
    history = form("history", world, THING, query, 4, None)
    assert revisions(history.rest()) == [1, 2, 3, 4]
    # resumed by revision (the timestamp is then implied), the end kept
    assert second.queries("history") == [{"from_revision": 3, "to_revision": 4}]
    # its end handed out: a renewal after it subscribes no more
    conn = Connection(histories=[[*events(1, 2), remote(408)]])
    assert revisions(form("history", World(conn), THING, {"to_revision": 2}, 4, None).rest()) == [
        1, 2]
    assert conn.queries("history") == [{"to_revision": 2}]


def test_ditto_resuming_iterators_closed_end_and_close_their_subscriptions(
    form: Callable[..., Driven],
) -> None:
    conn = Connection(histories=[events(1, 2, 3)], lives=[[STARTED]])
    follow = form("follow", World(conn), THING, {}, 8, None)
    assert revisions(follow.take(1)) == [1]
    follow.close()
    assert [s.closed for s in conn.opened] == [True, True]
    with pytest.raises(StopIteration):
        follow.next()


def test_ditto_resuming_search_goes_on_after_the_last_thing_when_ordered_by_thing_id(
    form: Callable[..., Driven],
) -> None:
    lost = ConnectionClosed("dropped")
    first = Connection(searches=[[[thing("a"), thing("b")], [thing("c")], lost]])
    second = Connection(searches=[[[thing("c"), thing("d")]]])
    world = World(first, second)
    pages = form("search", world, {"filter": "exists(x)"}, 1, None)
    ids = [[t["thingId"].split(":")[1] for t in page] for page in pages.rest()]
    assert ids == [["a", "b"], ["c"], ["d"]]  # c at the seam dropped
    assert second.queries("search") == [{"filter": f'and(gt(thingId,"{NS}:c"),exists(x))'}]
    assert pages.it.position.resumes == 1
    unordered = World(Connection(searches=[[[thing("b")], lost]]), Connection(searches=[[]]))
    pages = form("search", unordered, {"options": "sort(-thingId)"}, 1, None)
    assert len(pages.next()) == 1
    with pytest.raises(ConnectionClosed):
        pages.next()
    assert unordered.lost == []  # not resumable: the loss is the caller's


# -- a session's reconnect, through both forms ---------------------------------------


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class Opened:
    """A connection as the session sees it; its ``close`` is awaitable for
    the asyncio form."""

    def __init__(self, awaited: bool) -> None:
        self.awaited = awaited
        self.closes = 0

    def close(self, timeout: float | None = None) -> Any:
        self.closes += 1
        return asyncio.sleep(0) if self.awaited else None


class Opener:
    """Opens connections; after the first, ``refuse`` attempts fail."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.made: list[Opened] = []
        self.attempts = 0
        self.awaited = False

    def __call__(self, *args: Any, **options: Any) -> Opened:
        self.attempts += 1
        if self.attempts > 1 and self.refuse > 0:
            self.refuse -= 1
            raise ConnectionRefusedError("refused")
        self.made.append(Opened(self.awaited))
        return self.made[-1]


@pytest.fixture(params=["sync", "asyncio"])
def session_form(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Any]]:
    """Makes a session of either form over an :class:`Opener`, as a view whose
    ``reconnect``, ``current`` and ``close`` block."""
    if request.param == "sync":
        yield lambda opener, **kw: DittoSession("ws://x", connect=opener, **kw)
        return

    class View:
        def __init__(self, opener: Opener, **kw: Any) -> None:
            async def connect(*args: Any, **options: Any) -> Opened:
                return opener(*args, **options)

            monkeypatch.setattr(aio, "connect", connect)
            self.loop = asyncio.new_event_loop()
            self.session = self.loop.run_until_complete(
                aio.AsyncDittoSession("ws://x", **kw).start())

        def __getattr__(self, name: str) -> Any:
            attr = getattr(self.session, name)
            if not callable(attr):
                return attr
            return lambda *a: self.loop.run_until_complete(attr(*a))

    views: list[View] = []

    def make(opener: Opener, **kw: Any) -> View:
        opener.awaited = True
        views.append(View(opener, **kw))
        return views[-1]

    yield make
    for view in views:
        view.loop.close()


NOW = ReconnectPolicy(initial_delay=0, max_delay=0, jitter=0, max_outage=100)


def test_ditto_session_reconnects_once_per_lost_generation_retrying_refused_attempts(
    session_form: Callable[..., Any],
) -> None:
    opener = Opener(refuse=2)
    session = session_form(opener, reconnect=NOW, clock=Ticks())
    lost = ConnectionClosed("dropped")
    session.reconnect(0, lost)
    assert opener.attempts == 4 and len(opener.made) == 2  # two refused, then restored
    assert opener.made[0].closes == 1 and session.reconnects == 1
    assert session.current()[1] == 1
    session.reconnect(0, lost)  # another iterator of generation 0, late: nothing to do
    assert opener.attempts == 4 and session.reconnects == 1
    session.close()
    with pytest.raises(ConnectionClosed, match="dropped"):
        session.reconnect(1, lost)  # closed: the loss is the caller's
    assert opener.attempts == 4


def test_ditto_session_gives_up_past_the_outage_naming_the_last_failure(
    session_form: Callable[..., Any],
) -> None:
    opener = Opener(refuse=1000)
    policy = ReconnectPolicy(initial_delay=0, max_delay=0, jitter=0, max_outage=5)
    session = session_form(opener, reconnect=policy, clock=Ticks())
    with pytest.raises(ReconnectFailed) as failed:
        session.reconnect(0, ConnectionClosed("dropped"))
    assert isinstance(failed.value.cause, ConnectionRefusedError)
    # the clock moves 1 s a read, a read per attempt: the 5 s outage allows 5
    assert failed.value.attempts == opener.attempts - 1 == 5
    assert session.reconnects == 0

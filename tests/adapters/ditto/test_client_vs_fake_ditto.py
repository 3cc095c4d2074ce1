"""The client against the fake Ditto peer (``fake_ditto.py``), which numbers
history and search subscriptions with two counters and answers errors as
Ditto does, on every driver: a thread per connection, the selector loop and
asyncio. What the library-to-library tests cannot show (issue #32)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sansrs.adapters.ditto import DittoConnection, aio, connect
from sansrs.adapters.drive import ConnectionClosed

from sansrs.ditto import DittoRemoteError, LocalProtocolError
from tests.adapters.ditto.fake_ditto import FakeDitto
from tests.adapters.ditto.helpers import NS, Recorder, counter_history

WAIT = 10.0
DRIVERS = ["thread", "selector", "asyncio"]
#: Things with 1..6 events each; thing-3's subscribe is answered by Ditto's
#: uncorrelated 500 (what a timestamp Ditto cannot parse gets).
THINGS = {f"{NS}:thing-{i}": counter_history(f"thing-{i}", i % 6 + 1) for i in range(9)}
BROKEN = f"{NS}:thing-3"


def _fake(**knobs: Any) -> FakeDitto:
    return FakeDitto(THINGS, page_size=2, broken={BROKEN}, **knobs)


def _run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 40))


@contextmanager
def _sync(url: str, driver: str, **options: Any) -> Iterator[DittoConnection]:
    with connect(url, loop=driver, **options) as conn:
        yield conn


def _expected(thing: str) -> list[int]:
    return [e["revision"] for e in THINGS[thing]]


# -- finding 1: history and search subscriptions share IDs --------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("driver", DRIVERS)
def test_ditto_client_histories_inside_a_search_get_every_event_exactly_once(
    driver: str,
) -> None:
    """The headline: iterate a search (one page at a time) and, for each
    thing on a page, open its history, read it and close it, while the
    search is still open; every other thing's history is first left after
    its first event (cancelled) and opened again. Ditto numbers the search
    "0" and the histories "0", "1", ...: every history starts, every event
    of every thing comes exactly once per full read, and the broken
    thing's history ends with Ditto's 500 as a ``DittoRemoteError`` within
    its timeout."""
    seen: dict[str, list[int]] = {}
    failures: dict[str, int] = {}

    def record(thing: str, revisions: list[int] | int) -> None:
        if isinstance(revisions, int):
            failures[thing] = revisions
        else:
            assert thing not in seen, thing
            seen[thing] = revisions

    with _fake() as ditto:
        if driver == "asyncio":
            async def main() -> None:
                async with await aio.connect(ditto.url) as conn:
                    async for page in conn.search(prefetch=1, timeout=WAIT):
                        for thing in (t["thingId"] for t in page):
                            if thing != BROKEN and int(thing[-1]) % 2:
                                early = conn.subscribe_for_persisted_events(
                                    thing, prefetch=1, timeout=WAIT)
                                assert (await early.__anext__())["revision"] == 1
                                await early.aclose()
                            try:
                                record(thing, [e["revision"] async for e in
                                               conn.subscribe_for_persisted_events(
                                                   thing, prefetch=2, timeout=WAIT)])
                            except DittoRemoteError as exc:
                                record(thing, exc.status)
            _run(main)
        else:
            with _sync(ditto.url, driver) as conn:
                for page in conn.search(prefetch=1, timeout=WAIT):
                    for thing in (t["thingId"] for t in page):
                        if thing != BROKEN and int(thing[-1]) % 2:
                            with conn.subscribe_for_persisted_events(
                                    thing, prefetch=1, timeout=WAIT) as early:
                                assert next(early)["revision"] == 1
                        try:
                            with conn.subscribe_for_persisted_events(
                                    thing, prefetch=2, timeout=WAIT) as events:
                                record(thing, [e["revision"] for e in events])
                        except DittoRemoteError as exc:
                            record(thing, exc.status)
        streams = [m for c in ditto.connections for m in c.sent if "/streaming/created" in m]
    assert seen == {t: _expected(t) for t in THINGS if t != BROKEN}
    assert failures == {BROKEN: 500}
    assert '"subscriptionId":"0"' in streams[0]  # the same ID as the search's: Ditto's numbering


@pytest.mark.timeout(60)
@pytest.mark.parametrize("driver", DRIVERS)
def test_ditto_client_history_after_leaving_a_search_early_starts(driver: str) -> None:
    """Leave a search after its first page (the cancelled search keeps ID
    "0" on the client), then open a history, which Ditto numbers "0" too."""
    thing = f"{NS}:thing-4"
    with _fake() as ditto:
        if driver == "asyncio":
            async def main() -> list[int]:
                async with await aio.connect(ditto.url) as conn:
                    search = conn.search(prefetch=1, timeout=WAIT)
                    await search.__anext__()
                    await search.aclose()
                    return [e["revision"] async for e in conn.subscribe_for_persisted_events(
                        thing, timeout=WAIT)]
            box: list[list[int]] = []

            async def wrapped() -> None:
                box.append(await main())
            _run(wrapped)
            got = box[0]
        else:
            with _sync(ditto.url, driver) as conn:
                with conn.search(prefetch=1, timeout=WAIT) as pages:
                    next(pages)
                got = [e["revision"] for e in conn.subscribe_for_persisted_events(
                    thing, timeout=WAIT)]
    assert got == _expected(thing)


# -- finding 2: an error Ditto sends without a correlation-id -------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("driver", ["thread", "selector"])
def test_ditto_client_uncorrelated_error_reaches_the_publishers_subscriber(driver: str) -> None:
    with _fake() as ditto, _sync(ditto.url, driver) as conn:
        recorder = Recorder()
        conn.persisted_events_publisher(BROKEN).subscribe(recorder)
        assert recorder.subscribed.wait(WAIT)
        recorder.subscription.request(5)
        assert recorder.done.wait(WAIT)
    assert isinstance(recorder.error, DittoRemoteError) and recorder.error.status == 500


@pytest.mark.timeout(30)
@pytest.mark.parametrize("driver", DRIVERS)
def test_ditto_client_uncorrelated_error_fails_the_pending_subscribe(driver: str) -> None:
    """No ``timeout`` (the default): Ditto's 500 without a correlation-id
    must end the subscribe waiting for its ``created``, not leave it hanging."""
    with _fake() as ditto:
        if driver == "asyncio":
            async def main() -> None:
                async with await aio.connect(ditto.url) as conn:
                    with pytest.raises(DittoRemoteError) as info:
                        async for _ in conn.subscribe_for_persisted_events(BROKEN):
                            pass
                    assert (info.value.status, info.value.code) == (500, "gateway:internalerror")
                    got = [e["revision"] async for e in conn.subscribe_for_persisted_events(
                        f"{NS}:thing-1", timeout=WAIT)]
                    assert got == _expected(f"{NS}:thing-1")
            _run(main)
        else:
            with _sync(ditto.url, driver) as conn:
                with pytest.raises(DittoRemoteError) as info:
                    list(conn.subscribe_for_persisted_events(BROKEN))
                assert (info.value.status, info.value.code) == (500, "gateway:internalerror")
                got = [e["revision"] for e in conn.subscribe_for_persisted_events(
                    f"{NS}:thing-1", timeout=WAIT)]
                assert got == _expected(f"{NS}:thing-1")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("stamp", ["yesterday", "2022-13-45", "2022-10-25T14:00:00"])
def test_ditto_client_checks_timestamps_before_sending(driver: str, stamp: str) -> None:
    """What Ditto cannot parse never goes out: ``LocalProtocolError`` naming the field."""
    with _fake() as ditto:
        if driver == "asyncio":
            async def main() -> None:
                async with await aio.connect(ditto.url) as conn:
                    with pytest.raises(LocalProtocolError, match="to_historical_timestamp"):
                        async for _ in conn.subscribe_for_persisted_events(
                                f"{NS}:thing-1", to_timestamp=stamp, timeout=WAIT):
                            pass
            _run(main)
        else:
            with _sync(ditto.url, driver) as conn, pytest.raises(
                    LocalProtocolError, match="to_historical_timestamp"):
                list(conn.subscribe_for_persisted_events(
                    f"{NS}:thing-1", to_timestamp=stamp, timeout=WAIT))
        assert not any("subscribeForPersistedEvents" in m
                       for c in ditto.connections for m in c.received)


# -- the fake's other knobs, as a client meets them -------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("driver", DRIVERS)
def test_ditto_client_answers_dittos_idle_pings(driver: str) -> None:
    with _fake(ping_interval=0.05) as ditto:
        if driver == "asyncio":
            async def main() -> None:
                async with await aio.connect(ditto.url):
                    conn = await asyncio.to_thread(ditto.connection)
                    await asyncio.to_thread(ditto.wait_for, lambda: conn.pongs >= 2)
            _run(main)
        else:
            with _sync(ditto.url, driver):
                conn = ditto.connection()
                ditto.wait_for(lambda: conn.pongs >= 2)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("driver", DRIVERS)
def test_ditto_client_a_dropped_connection_fails_the_open_history(driver: str) -> None:
    thing = f"{NS}:thing-5"
    with _fake(drop_after=3) as ditto:
        if driver == "asyncio":
            async def main() -> None:
                async with await aio.connect(ditto.url) as conn:
                    events = conn.subscribe_for_persisted_events(thing, prefetch=1, timeout=WAIT)
                    assert (await events.__anext__())["revision"] == 1
                    with pytest.raises(ConnectionClosed):
                        async for _ in events:
                            pass
            _run(main)
        else:
            with _sync(ditto.url, driver) as conn:
                events = conn.subscribe_for_persisted_events(thing, prefetch=1, timeout=WAIT)
                assert next(events)["revision"] == 1
                with pytest.raises(ConnectionClosed):
                    list(events)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("driver", DRIVERS)
def test_ditto_client_token_expiry_closes_the_connection(driver: str) -> None:
    """Ditto closes the WebSocket when the JWT expires: an open history ends
    with ``ConnectionClosed`` (refreshing is the application's, for now)."""
    thing = f"{NS}:thing-5"
    with _fake(token="t0", token_lifetime=3600) as ditto:
        if driver == "asyncio":
            async def main() -> None:
                async with await aio.connect(ditto.url, token="t0") as conn:
                    events = conn.subscribe_for_persisted_events(thing, prefetch=1, timeout=WAIT)
                    assert (await events.__anext__())["revision"] == 1
                    ditto.connection().expire_token()
                    with pytest.raises(ConnectionClosed):
                        async for _ in events:
                            pass
            _run(main)
        else:
            with _sync(ditto.url, driver, token="t0") as conn:
                events = conn.subscribe_for_persisted_events(thing, prefetch=1, timeout=WAIT)
                assert next(events)["revision"] == 1
                ditto.connection().expire_token()
                with pytest.raises(ConnectionClosed):
                    list(events)
        assert ditto.connection().close_reason == "token expired"

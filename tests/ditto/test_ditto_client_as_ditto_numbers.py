"""The client core facing Ditto as Ditto's users meet it (issue #32): a
history and a search numbered by a counter each (both from "0"), errors
that name no subscribe, timestamps Ditto cannot read."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.ditto import ClientState, DittoClient, DittoClientConfig, Kind
from sansrs.ditto._envelope import dumps
from sansrs.ditto._error_responses import UNREADABLE_ERROR
from sansrs.ditto.events import (
    ErrorResponseReceived,
    NextReceived,
    PageReceived,
    SubscriptionCompleted,
    SubscriptionCreated,
)

NS = "org.eclipse.ditto"
HISTORY = f"{NS}/thing-2/things/twin/streaming/"
SEARCH = "_/_/things/twin/search/"
CT = {"content-type": "application/json"}


def _client(**config: Any) -> DittoClient:
    counter = itertools.count()
    return DittoClient(DittoClientConfig(correlation_ids=lambda: f"c-{next(counter)}", **config))


def _msg(topic: str, value: Any, headers: dict[str, Any] | None = None, **more: Any) -> str:
    return dumps({"topic": topic, "headers": headers or {}, "path": "/", "value": value, **more})


def _sent(client: DittoClient) -> list[dict[str, Any]]:
    return [json.loads(m) for m in client.messages_to_send()]


def _error(status: int = 500, code: str = "gateway:internalerror") -> dict[str, Any]:
    return {"status": status, "error": code, "message": "m"}


def _created(client: DittoClient, base: str, sid: str, correlation_id: str) -> None:
    client.receive_message(_msg(base + "created", {"subscriptionId": sid},
                                {"correlation-id": correlation_id}))


UNKNOWN_500 = _msg("unknown/unknown/things/twin/errors", _error(), status=500)


# -- finding 1: two counters ----------------------------------------------------------


@pytest.mark.parametrize("how", ["one", "run"])
def test_ditto_client_history_and_search_may_both_have_id_0(how: str) -> None:
    """Ditto numbers the search "0" and the history "0" on one WebSocket:
    both start, and each one's messages reach it (before the fix, the
    history's created was a stray and it never started)."""
    client = _client()
    search = client.subscribe_search()
    history = client.subscribe_for_persisted_events(NS, "thing-2")
    client.messages_to_send()
    texts = [
        _msg(SEARCH + "created", {"subscriptionId": "0"}, {"correlation-id": "c-0", **CT}),
        _msg(HISTORY + "created", {"subscriptionId": "0"}, {"correlation-id": "c-1", **CT}),
    ]
    feed = client.receive_run if how == "run" else lambda ts: [client.receive_message(t)
                                                               for t in ts]
    feed(texts)
    assert [(type(e), e.key) for e in client.events()] == [
        (SubscriptionCreated, search), (SubscriptionCreated, history)]
    with pytest.raises(LocalProtocolError, match="name its kind"):
        client.request("0", 1)
    client.request("0", 2, kind=Kind.STREAMING)
    client.request("0", 1, kind=Kind.SEARCH)
    assert [m["topic"] for m in _sent(client)] == [HISTORY + "request", SEARCH + "request"]
    feed([
        _msg(HISTORY + "next", {"subscriptionId": "0", "item": {"revision": 1}}, CT),
        _msg(SEARCH + "next", {"subscriptionId": "0", "items": [{"thingId": "a:b"}]}, CT),
        _msg(HISTORY + "next", {"subscriptionId": "0", "item": {"revision": 2}}, CT),
        _msg(SEARCH + "complete", {"subscriptionId": "0"}, CT),
        _msg(HISTORY + "complete", {"subscriptionId": "0"}, CT),
    ])
    got = [(type(e).__name__, e.key) for e in client.events()]
    items = [(n, k) for n, k in got if n in ("NextReceived", "ItemsReceived")]
    assert {k for _, k in items} == {history}
    assert ("PageReceived", search) in got
    assert got[-2:] == [("SubscriptionCompleted", search), ("SubscriptionCompleted", history)]
    assert client.state_of("0", Kind.SEARCH) is ClientState.DONE
    assert client.state_of("0") is ClientState.DONE


def test_ditto_client_history_after_a_cancelled_search_with_the_same_id_starts() -> None:
    """Leave a search early (its ID "0" is remembered as cancelled), then
    open a history, which Ditto numbers "0" too."""
    client = _client()
    client.subscribe_search()
    _created(client, SEARCH, "0", "c-0")
    client.cancel("0")
    history = client.subscribe_for_persisted_events(NS, "thing-2")
    _created(client, HISTORY, "0", "c-1")
    events = list(client.events())
    assert isinstance(events[-1], SubscriptionCreated) and events[-1].key == history
    client.request("0", 1)  # the only open one with that ID: no kind needed
    client.receive_message(_msg(SEARCH + "next", {"subscriptionId": "0", "items": []}))
    client.receive_message(_msg(HISTORY + "next", {"subscriptionId": "0", "item": 1}))
    late_page, item = list(client.events())
    assert isinstance(late_page, PageReceived) and isinstance(item, NextReceived)
    assert item.key == history


def test_ditto_client_created_reusing_a_cancelled_id_of_its_kind_releases_it() -> None:
    """A cancelled subscription waits for late events Ditto may never send;
    when Ditto gives its ID to a new subscription of the same kind, the old
    one has ended there: released, and the new one starts."""
    client = _client()
    client.subscribe_for_persisted_events(NS, "thing-2")
    _created(client, HISTORY, "5", "c-0")
    client.cancel("5")
    second = client.subscribe_for_persisted_events(NS, "thing-2")
    _created(client, HISTORY, "5", "c-1")
    event = list(client.events())[-1]
    assert isinstance(event, SubscriptionCreated) and event.key == second
    assert client.state_of("5") is ClientState.CREATED
    assert not client._cancelled


def test_ditto_client_created_with_an_id_a_live_subscription_has_is_a_protocol_error() -> None:
    client = _client()
    client.subscribe_for_persisted_events(NS, "thing-2")
    client.receive_message(_msg(HISTORY + "created", {"subscriptionId": "0"},
                                {"correlation-id": "c-0"}))
    client.subscribe_for_persisted_events(NS, "thing-2")
    with pytest.raises(RemoteProtocolError, match="which a live one has"):
        client.receive_message(_msg(HISTORY + "created", {"subscriptionId": "0"},
                                    {"correlation-id": "c-1"}))


# -- finding 2: errors that name no subscribe -------------------------------------------


def test_ditto_client_uncorrelated_error_fails_every_pending_subscribe() -> None:
    """Ditto's 500 without a correlation-id (what a timestamp it cannot
    parse gets) answers a subscribe instead of its created; the client
    cannot tell which, so every subscribe still waiting for its created
    fails with it; created ones are untouched."""
    client = _client()
    started = client.subscribe_for_persisted_events(NS, "thing-1")
    client.receive_message(_msg(f"{NS}/thing-1/things/twin/streaming/created",
                                {"subscriptionId": "0"}, {"correlation-id": "c-0"}))
    a = client.subscribe_for_persisted_events(NS, "thing-2")
    b = client.subscribe_search()
    list(client.events())
    client.receive_message(UNKNOWN_500)
    failed = list(client.events())
    assert [(type(e), e.key, e.error.status) for e in failed] == [
        (ErrorResponseReceived, a, 500), (ErrorResponseReceived, b, 500)]
    assert isinstance(failed[0], ErrorResponseReceived)
    assert failed[0].error.exception().code == "gateway:internalerror"
    assert not client._pending and client.state_of("0") is ClientState.CREATED
    assert started == 0
    # The good one among them gets its created after all: cancelled at once.
    client.messages_to_send()
    client.receive_message(_msg(SEARCH + "created", {"subscriptionId": "0"},
                                {"correlation-id": "c-2"}))
    assert list(client.events()) == []
    assert _sent(client) == [{"topic": SEARCH + "cancel", "headers": {}, "path": "/",
                              "value": {"subscriptionId": "0"}}]


@pytest.mark.parametrize(
    ("topic", "failed"),
    [
        (f"{NS}/thing-2/things/twin/errors", ["thing-2"]),  # that entity's only
        ("_/_/things/search/errors", ["search"]),  # the search's only
        ("unknown/unknown/things/twin/errors", ["thing-2", "thing-3", "search"]),
        ("_/_/things/twin/errors", ["thing-2", "thing-3", "search"]),
    ],
)
def test_ditto_client_uncorrelated_error_scope_is_its_topic(topic: str, failed: list[str]) -> None:
    client = _client()
    keys = {"thing-2": client.subscribe_for_persisted_events(NS, "thing-2"),
            "thing-3": client.subscribe_for_persisted_events(NS, "thing-3"),
            "search": client.subscribe_search()}
    client.receive_message(_msg(topic, _error(400, "x"), status=400))
    assert [e.key for e in client.events()] == [keys[name] for name in failed]


def test_ditto_client_error_with_someone_elses_correlation_id_spares_the_subscribes_with_one(
) -> None:
    """Ditto echoes a command's correlation-id or loses it, never swaps it:
    an error carrying another one can only answer a subscribe sent without."""
    client = DittoClient()
    mine = client.subscribe_for_persisted_events(NS, "thing-2", headers={"correlation-id": "x"})
    bare = client.subscribe_for_persisted_events(NS, "thing-2")
    client.receive_message(_msg("unknown/unknown/things/twin/errors", _error(),
                                {"correlation-id": "other"}))
    assert [e.key for e in client.events()] == [bare]
    client.receive_message(_msg("unknown/unknown/things/twin/errors", _error(),
                                {"correlation-id": "other"}))
    (unmatched,) = list(client.events())
    assert isinstance(unmatched, ErrorResponseReceived) and unmatched.key is None
    assert list(client._pending) == [mine]


@pytest.mark.parametrize(
    ("value", "status", "code"),
    [
        ([], 500, UNREADABLE_ERROR),
        ({"status": "500"}, 503, UNREADABLE_ERROR),  # the envelope's status then
        ({"status": 404, "error": 7}, 404, UNREADABLE_ERROR),
        ({"error": "gateway:internalerror"}, 503, "gateway:internalerror"),
    ],
)
def test_ditto_client_unreadable_error_still_fails_the_subscribe(
    value: Any, status: int, code: str
) -> None:
    """An errors message whose value is not an error object is still Ditto
    reporting an error: the subscribe it may answer fails with what can be
    read of it, the connection goes on."""
    client = _client()
    key = client.subscribe_for_persisted_events(NS, "thing-2")
    more = {} if status == 500 else {"status": 503}
    client.receive_message(_msg("unknown/unknown/things/twin/errors", value, **more))
    (event,) = list(client.events())
    assert isinstance(event, ErrorResponseReceived) and event.key == key
    assert (event.error.status, event.error.error) == (status, code)
    assert "cannot be read" in event.error.message


@pytest.mark.parametrize("stamp", ["yesterday", "2022-13-45", "2022-13-45T00:00:00Z",
                                   "2022-10-25T14:00:00", "2022-10-25T14:00:00+01:00",
                                   "2022-10-25 14:00:00Z", "2022-10-25T25:00Z"])
@pytest.mark.parametrize("field", ["from_historical_timestamp", "to_historical_timestamp"])
def test_ditto_client_checks_a_timestamp_before_sending_it(stamp: str, field: str) -> None:
    """What Ditto cannot parse gets a 500 naming no subscribe: refused here,
    naming the field, and nothing goes out."""
    client = _client()
    with pytest.raises(LocalProtocolError, match=field):
        client.subscribe_for_persisted_events(NS, "thing-2", **{field: stamp})
    assert client.messages_to_send() == [] and not client._pending


@pytest.mark.parametrize("stamp", ["2022-10-25T14:00:00Z", "2022-10-25T14:00Z",
                                   "2022-10-25T14:00:00.123456789Z", "2024-02-29T00:00:00z"])
def test_ditto_client_sends_the_timestamps_ditto_reads(stamp: str) -> None:
    client = _client()
    client.subscribe_for_persisted_events(NS, "thing-2", from_historical_timestamp=stamp)
    assert _sent(client)[0]["value"] == {"fromHistoricalTimestamp": stamp}


def test_ditto_client_completed_after_cancel_releases_the_id() -> None:
    client = _client()
    client.subscribe_search()
    client.receive_message(_msg(SEARCH + "created", {"subscriptionId": "0"},
                                {"correlation-id": "c-0"}))
    client.cancel("0")
    client.receive_message(_msg(SEARCH + "complete", {"subscriptionId": "0"}))
    assert isinstance(list(client.events())[-1], SubscriptionCompleted)
    assert not client._cancelled and not client._searches


def test_ditto_client_subscribe_failed_by_an_uncorrelated_error_frees_its_place() -> None:
    """The failed subscribe no longer counts against ``max_subscriptions``
    (it did, waiting forever, before the fix); the subscribes it keeps to
    cancel a late created are bounded by the same limit."""
    client = _client(max_subscriptions=1)
    for _ in range(3):
        client.subscribe_for_persisted_events(NS, "thing-2")
        client.receive_message(UNKNOWN_500)
    assert len(client._orphans) == 1 and not client._pending
    assert [type(e) for e in client.events()] == [ErrorResponseReceived] * 3

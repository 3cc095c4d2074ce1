"""The client (subscriber) role."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.ditto import ClientState, DittoClient, DittoClientConfig, DittoRemoteError
from sansrs.ditto._envelope import dumps
from sansrs.ditto.events import (
    ErrorResponseReceived,
    NextReceived,
    OtherMessageReceived,
    StrayMessageReceived,
    SubscriptionCompleted,
    SubscriptionCreated,
    SubscriptionFailed,
)

ENTITY = "org.eclipse.ditto/thing-2/things/twin/streaming"
MAX_LONG = 2**63 - 1


def _event(action: str, sid: str = "0", headers: dict[str, Any] | None = None, **value: Any) -> str:
    return dumps(
        {
            "topic": f"{ENTITY}/{action}",
            "headers": headers or {},
            "path": "/",
            "value": {"subscriptionId": sid, **value},
        }
    )


def _sent(client: DittoClient) -> list[dict[str, Any]]:
    return [json.loads(m) for m in client.messages_to_send()]


def _open(client: DittoClient, sid: str = "0", demand: int = 0) -> int:
    key = client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    client.receive_message(_event("created", sid))
    if demand:
        client.request(sid, demand)
    client.messages_to_send()
    list(client.events())
    return key


def test_ditto_client_subscribe_every_option_in_dittos_order() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events(
        "ns",
        "t",
        filter="exists(x)",
        to_historical_timestamp="2022-10-25T15:00:00Z",
        from_historical_timestamp=datetime(2022, 10, 25, 14, 0, 0, 5000, tzinfo=UTC),
        to_historical_revision=-2,
        from_historical_revision=-10,
    )
    (msg,) = client.messages_to_send()
    assert msg == (
        '{"topic":"ns/t/things/twin/streaming/subscribeForPersistedEvents","headers":{},'
        '"path":"/","value":{"fromHistoricalRevision":-10,"toHistoricalRevision":-2,'
        '"fromHistoricalTimestamp":"2022-10-25T14:00:00.005Z",'
        '"toHistoricalTimestamp":"2022-10-25T15:00:00Z","filter":"exists(x)"}}'
    )


def test_ditto_client_subscribe_without_options_sends_empty_value() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events("ns", "p", group="policies")
    assert _sent(client)[0]["value"] == {}


def test_ditto_client_explicit_range_writes_dittos_defaults() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events("ns", "t", explicit_range=True)
    assert _sent(client)[0]["value"] == {
        "fromHistoricalRevision": 0,
        "toHistoricalRevision": MAX_LONG,
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"group": "connections"},
        {"group": "policies", "filter": "x"},
        {"from_historical_revision": 2**63},
        {"to_historical_revision": 1.0},
        {"from_historical_timestamp": datetime(2022, 1, 1)},  # naive
        {"from_historical_timestamp": 5},
    ],
)
def test_ditto_client_subscribe_misuse_is_local_protocol_error(kwargs: dict[str, Any]) -> None:
    client = DittoClient()
    with pytest.raises(LocalProtocolError):
        client.subscribe_for_persisted_events("ns", "t", **kwargs)
    assert client.messages_to_send() == []


def test_ditto_client_rejects_bad_entity_names() -> None:
    client = DittoClient()
    for namespace, name in (("", "t"), ("a/b", "t"), ("ns", "")):
        with pytest.raises(LocalProtocolError):
            client.subscribe_for_persisted_events(namespace, name)


def test_rs_3_9_ditto_client_refuses_nonpositive_demand() -> None:
    client = DittoClient()
    _open(client)
    for demand in (0, -1, 2**63, 1.0, True):
        with pytest.raises(LocalProtocolError):
            client.request("0", demand)  # type: ignore[arg-type]
    client.request("0", MAX_LONG)
    assert _sent(client)[0]["value"] == {"subscriptionId": "0", "demand": MAX_LONG}


def test_ditto_client_request_and_cancel_for_unknown_id_is_misuse() -> None:
    client = DittoClient()
    with pytest.raises(LocalProtocolError):
        client.request("0", 1)
    with pytest.raises(LocalProtocolError):
        client.cancel("0")


def test_ditto_client_created_matched_by_correlation_id_out_of_order() -> None:
    ids = iter(["c-a", "c-b"])
    client = DittoClient(DittoClientConfig(correlation_ids=lambda: next(ids)))
    first = client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    second = client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    assert [m["headers"] for m in _sent(client)] == [
        {"correlation-id": "c-a"},
        {"correlation-id": "c-b"},
    ]
    client.receive_message(_event("created", "5", headers={"correlation-id": "c-b"}))
    client.receive_message(_event("created", "6", headers={"correlation-id": "c-a"}))
    created = list(client.events())
    assert [(e.key, e.subscription_id) for e in created if isinstance(e, SubscriptionCreated)] == [
        (second, "5"),
        (first, "6"),
    ]


def test_ditto_client_created_without_correlation_id_matches_oldest_of_entity() -> None:
    client = DittoClient()
    other = client.subscribe_for_persisted_events("ns", "other")
    first = client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    client.receive_message(_event("created", "0"))
    (event,) = list(client.events())
    assert isinstance(event, SubscriptionCreated)
    assert event.key == first != other


def test_ditto_client_next_complete_and_demand_accounting() -> None:
    client = DittoClient()
    key = _open(client, demand=2)
    client.receive_message(_event("next", item={"topic": "a/b/things/twin/events/deleted"}))
    client.receive_message(_event("next", item=None))
    with pytest.raises(RemoteProtocolError) as info:
        client.receive_message(_event("next", item=3))
    assert info.value.error_code == 400
    assert "rule 1.1" in info.value.message
    assert _sent(client)[0]["topic"] == f"{ENTITY}/cancel"
    events = list(client.events())
    assert isinstance(events[0], NextReceived)
    assert events[0].envelope is not None
    assert events[0].envelope.headers == {}
    assert events[1] == NextReceived(key=key, subscription_id="0", item=None)


def test_ditto_client_item_that_only_looks_like_an_envelope_is_kept_raw() -> None:
    client = DittoClient()
    _open(client, demand=1)
    client.receive_message(_event("next", item={"topic": "a/b/things/twin/x", "headers": 5}))
    (event,) = list(client.events())
    assert isinstance(event, NextReceived)
    assert event.envelope is None
    assert event.item == {"topic": "a/b/things/twin/x", "headers": 5}


def test_ditto_client_failed_surfaces_typed_error() -> None:
    client = DittoClient()
    key = _open(client, demand=1)
    error = {"status": 404, "error": "things:thing.notfound", "message": "m", "href": "h"}
    client.receive_message(_event("failed", error=error))
    (event,) = list(client.events())
    assert isinstance(event, SubscriptionFailed)
    assert event.key == key
    exc = event.error.exception()
    assert isinstance(exc, DittoRemoteError)
    assert (exc.error_code, exc.code, exc.href, exc.description) == (
        404,
        "things:thing.notfound",
        "h",
        None,
    )
    with pytest.raises(LocalProtocolError):
        client.request("0", 1)  # nothing more after failed


def test_ditto_client_idle_timeout_failed_before_request_is_accepted() -> None:
    client = DittoClient()
    _open(client)
    client.receive_message(_event("failed", error={"status": 408, "error": "t", "message": "m"}))
    assert isinstance(next(client.events()), SubscriptionFailed)


def test_ditto_client_late_events_after_cancel_are_delivered() -> None:
    client = DittoClient()
    _open(client, demand=1)
    client.cancel("0")
    client.cancel("0")  # idempotent (rule 3.7): one message
    assert len(client.messages_to_send()) == 1
    client.receive_message(_event("next", item=1))
    client.receive_message(_event("next", item=2))  # buffered beyond demand: tolerated
    client.receive_message(_event("complete"))
    events = list(client.events())
    assert [type(e) for e in events] == [NextReceived, NextReceived, SubscriptionCompleted]
    client.receive_message(_event("next", item=3))
    assert isinstance(next(client.events()), StrayMessageReceived)


def test_ditto_client_cancel_before_created_cancels_when_the_id_arrives() -> None:
    ids = iter(["c"])
    client = DittoClient(DittoClientConfig(correlation_ids=lambda: next(ids)))
    key = client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    client.messages_to_send()
    client.cancel_pending(key)
    assert client.messages_to_send() == []  # no ID to name yet
    client.receive_message(_event("created", "9", headers={"correlation-id": "c"}))
    (cancel,) = _sent(client)
    assert cancel["topic"] == f"{ENTITY}/cancel"
    assert cancel["value"] == {"subscriptionId": "9"}
    assert list(client.events()) == []  # the application gave it up
    assert client.state_of("9") is ClientState.CANCELLED
    with pytest.raises(LocalProtocolError):
        client.cancel_pending(key)


def test_ditto_client_forgets_the_oldest_cancelled_beyond_the_limit() -> None:
    client = DittoClient(DittoClientConfig(max_subscriptions=2))
    for sid in ("0", "1", "2"):
        _open(client, sid)
        client.cancel(sid)  # Ditto may never answer a cancel
    assert [client.state_of(s) for s in ("0", "1", "2")] == [
        ClientState.DONE,
        ClientState.CANCELLED,
        ClientState.CANCELLED,
    ]
    client.receive_message(_event("complete", "1"))
    assert client.state_of("1") is ClientState.DONE


def test_ditto_client_error_response_matched_to_pending_subscribe() -> None:
    ids = iter(["c"])
    client = DittoClient(DittoClientConfig(correlation_ids=lambda: next(ids)))
    key = client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    client.receive_message(
        '{"topic":"org.eclipse.ditto/thing-2/things/twin/errors","headers":{"correlation-id":"c"},'
        '"path":"/","value":{"status":429,"error":"x","message":"m"},"status":429}'
    )
    (event,) = list(client.events())
    assert isinstance(event, ErrorResponseReceived)
    assert (event.key, event.error.status) == (key, 429)
    client.receive_message(_event("created", "0", headers={"correlation-id": "c"}))
    assert isinstance(next(client.events()), StrayMessageReceived)


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "[]",
        '{"topic":"a/b/things/live/streaming/next"}',
        '{"topic":"a/b/things/twin/streaming/request","value":{"subscriptionId":"0"}}',
        '{"topic":"a/b/things/twin/streaming/next","value":{}}',
        '{"topic":"a/b/things/twin/streaming/failed","value":{"subscriptionId":"0","error":1}}',
    ],
)
def test_ditto_client_malformed_input_raises_remote_protocol_error_only(text: str) -> None:
    client = DittoClient()
    _open(client, demand=1)
    with pytest.raises(RemoteProtocolError):
        client.receive_message(text)


def test_ditto_client_limits() -> None:
    client = DittoClient(DittoClientConfig(max_message_size=10, max_subscriptions=1))
    with pytest.raises(RemoteProtocolError) as info:
        client.receive_message(" " * 11)
    assert info.value.error_code == 413
    client.subscribe_for_persisted_events("ns", "t")
    with pytest.raises(LocalProtocolError):
        client.subscribe_for_persisted_events("ns", "t")
    with pytest.raises(ValueError):
        DittoClientConfig(max_subscriptions=0)


def test_ditto_client_other_messages_and_no_timers() -> None:
    client = DittoClient()
    client.receive_message('{"topic":"a/b/things/twin/events/modified","path":"/","value":1}')
    assert isinstance(next(client.events()), OtherMessageReceived)
    client.handle_timeout(1e9)
    assert client.next_deadline() is None
    assert client.next_event() is None


def test_ditto_error_reported_by_ditto_is_an_application_error_not_a_protocol_error() -> None:
    """A Ditto 404 is an application error the server reported: a
    ``DittoException`` (``DittoRemoteError`` on the client), never a
    ``ProtocolError`` (docs/architecture.md, Errors and words)."""
    from sansrs import ProtocolError
    from sansrs.ditto import DittoError, DittoException

    error = DittoError(status=404, error="things:thing.notfound", message="m", href="h")
    exc = error.exception()
    assert isinstance(exc, DittoRemoteError) and isinstance(exc, DittoException)
    assert not isinstance(exc, ProtocolError)
    assert (exc.status, exc.error_code, exc.code, exc.message, str(exc)) == (
        404,
        404,
        "things:thing.notfound",
        "things:thing.notfound: m",
        "things:thing.notfound: m",
    )
    assert exc.error is error
    # What a server's Publisher raises to fail a subscription: the same root.
    assert not issubclass(DittoException, ProtocolError)

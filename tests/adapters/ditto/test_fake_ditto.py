"""The fake Ditto peer (``fake_ditto.py``) answers as Ditto does: checked
byte for byte with a scripted WebSocket client, so the client's tests
against it test the client, not the fake."""

from __future__ import annotations

import json

import pytest

from tests.adapters.ditto.fake_ditto import UNKNOWN_ERRORS_TOPIC, FakeDitto, RawClient
from tests.adapters.ditto.helpers import NS, counter_history

THING = f"{NS}:thing-1"
BASE = f"{NS}/thing-1/things/twin/streaming/"
SEARCH = "_/_/things/twin/search/"


def _msg(topic: str, value: object = None, headers: object = None) -> str:
    out: dict[str, object] = {"topic": topic, "headers": headers or {}, "path": "/"}
    if value is not None:
        out["value"] = value
    return json.dumps(out, separators=(",", ":"))


@pytest.mark.timeout(20)
def test_fake_ditto_numbers_histories_and_searches_apart_from_0() -> None:
    with FakeDitto({THING: counter_history("thing-1", 2)}) as ditto, RawClient(ditto.url) as ws:
        ws.send(_msg(SEARCH + "subscribe", {}, {"correlation-id": "s"}))
        ws.send(_msg(BASE + "subscribeForPersistedEvents", {}, {"correlation-id": "h"}))
        ws.send(_msg(BASE + "subscribeForPersistedEvents", {}, {"correlation-id": "h2"}))
        got = [ws.receive_json() for _ in range(3)]
    assert [(m["topic"], m["headers"]["correlation-id"], m["value"]["subscriptionId"])
            for m in got] == [(SEARCH + "created", "s", "0"), (BASE + "created", "h", "0"),
                              (BASE + "created", "h2", "1")]
    assert got[0]["headers"]["content-type"] == "application/json"


@pytest.mark.timeout(20)
def test_fake_ditto_streams_within_demand_and_completes_after_a_request() -> None:
    with FakeDitto({THING: counter_history("thing-1", 3)}) as ditto, RawClient(ditto.url) as ws:
        ws.send(_msg(BASE + "subscribeForPersistedEvents", {"fromHistoricalRevision": 2}))
        assert ws.receive_json()["topic"] == BASE + "created"
        ws.send(_msg(BASE + "request", {"subscriptionId": "0", "demand": 1}))
        first = ws.receive_json()
        ws.send(_msg(BASE + "request", {"subscriptionId": "0", "demand": 5}))
        second, end = ws.receive_json(), ws.receive_json()
    assert [first["value"]["item"]["revision"], second["value"]["item"]["revision"]] == [2, 3]
    assert end["topic"] == BASE + "complete"


@pytest.mark.timeout(20)
def test_fake_ditto_answers_bad_input_as_ditto_does() -> None:
    with FakeDitto({THING: []}) as ditto, RawClient(ditto.url) as ws:
        ws.send("not json")
        bad_json = ws.receive_json()
        ws.send(_msg(f"{NS}/thing-1/things/streaming/subscribeForPersistedEvents", {},
                     {"correlation-id": "c"}))
        no_channel = ws.receive_json()
        ws.send(_msg(BASE + "subscribeForPersistedEvents",
                     {"fromHistoricalTimestamp": "yesterday"}, {"correlation-id": "t"}))
        timestamp = ws.receive_json()
        ws.send(_msg(BASE + "request", {"subscriptionId": "7", "demand": 1}))
        unknown = ws.receive_json()
        ws.send(_msg(f"{NS}/nope/things/twin/streaming/subscribeForPersistedEvents", {}))
        ws.send(_msg(f"{NS}/nope/things/twin/streaming/request",
                     {"subscriptionId": "0", "demand": 1}))
        created, not_found = ws.receive_json(), ws.receive_json()
    assert (bad_json["topic"], bad_json["value"]["error"], bad_json["status"]) == (
        UNKNOWN_ERRORS_TOPIC, "json.invalid", 400)
    assert (no_channel["topic"], no_channel["value"]["error"], no_channel["headers"]) == (
        UNKNOWN_ERRORS_TOPIC, "protocoladapter:unknown.topicpath", {"correlation-id": "c"})
    assert (timestamp["topic"], timestamp["value"]["error"], timestamp["headers"],
            timestamp["status"]) == (UNKNOWN_ERRORS_TOPIC, "gateway:internalerror", {}, 500)
    assert unknown["value"]["error"]["error"] == "streaming.subscription.not.found"
    assert created["value"] == {"subscriptionId": "0"}  # the timestamp took no number
    assert not_found["value"]["error"]["error"] == "things:thing.notfound"


@pytest.mark.timeout(20)
def test_fake_ditto_live_events_after_start_send_events() -> None:
    with FakeDitto() as ditto, RawClient(ditto.url) as ws:
        ws.send("START-SEND-EVENTS")
        assert ws.receive() == "START-SEND-EVENTS:ACK"
        event = counter_history("thing-1", 1)[0]
        ditto.publish(event, entity=THING)
        assert ws.receive_json() == event
        assert ditto.history(THING) == [event]


@pytest.mark.timeout(20)
def test_fake_ditto_closes_on_token_expiry_and_a_jwt_message_extends_it() -> None:
    with FakeDitto(token="t0", valid_tokens={"t1"}, token_lifetime=3600) as ditto:
        with RawClient(ditto.url) as refused:
            assert refused.rejected == 401
        with RawClient(ditto.url, token="t0") as ws:
            conn = ditto.connection(1)
            ditto.wait_for(lambda: conn.token_deadline is not None)
            before = conn.token_deadline
            ws.send("JWT-TOKEN?jwtToken=t1")
            ditto.wait_for(lambda: conn.refreshed_tokens == ["t1"])
            assert conn.token_deadline is not None and before is not None
            assert conn.token_deadline > before
            conn.expire_token()
            close = ws.wait_closed()
        assert close is not None and close.code == 1000 and conn.close_reason == "token expired"


@pytest.mark.timeout(20)
def test_fake_ditto_pings_when_idle_and_drops_on_command() -> None:
    with FakeDitto(ping_interval=0.05) as ditto, RawClient(ditto.url) as ws:
        conn = ditto.connection()
        ditto.wait_for(lambda: conn.pings_sent >= 2)
        conn.drop()
        # No close frame: the TCP connection was cut (the pings still unread
        # may be lost with it: a reset discards them).
        assert ws.wait_closed() is None


@pytest.mark.timeout(20)
def test_fake_ditto_drops_after_n_messages() -> None:
    with FakeDitto({THING: counter_history("thing-1", 5)}, drop_after=3) as ditto, \
            RawClient(ditto.url) as ws:
        ws.send(_msg(BASE + "subscribeForPersistedEvents", {}))
        ws.send(_msg(BASE + "request", {"subscriptionId": "0", "demand": 5}))
        got = [ws.receive_json() for _ in range(3)]
        assert ws.wait_closed() is None
    assert [m["topic"].rsplit("/", 1)[1] for m in got] == ["created", "next", "next"]


@pytest.mark.timeout(20)
def test_fake_ditto_drop_after_per_connection_spares_the_reconnected_one() -> None:
    with FakeDitto({THING: counter_history("thing-1", 3)}, drop_after=[2, None]) as ditto:
        with RawClient(ditto.url) as first:
            first.send(_msg(BASE + "subscribeForPersistedEvents", {}))
            first.send(_msg(BASE + "request", {"subscriptionId": "0", "demand": 5}))
            assert [first.receive_json()["topic"] for _ in range(2)][-1] == BASE + "next"
            assert first.wait_closed() is None
        with RawClient(ditto.url) as second:
            second.send(_msg(BASE + "subscribeForPersistedEvents", {}))
            second.send(_msg(BASE + "request", {"subscriptionId": "0", "demand": 5}))
            got = [second.receive_json()["topic"].rsplit("/", 1)[1] for _ in range(5)]
    assert got == ["created", "next", "next", "next", "complete"]

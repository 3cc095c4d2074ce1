"""The server (publisher) role: docs/protocols/ditto.md, the server role, rule by rule."""

from __future__ import annotations

from typing import Any

import pytest

from sansrs import LocalProtocolError
from sansrs.ditto import (
    INTERNAL_ERROR,
    RULE_3_9_MESSAGE,
    DittoError,
    DittoException,
    DittoServer,
    DittoServerConfig,
    Envelope,
    Headers,
    Kind,
    ServerState,
    SubscribeOptions,
)
from sansrs.ditto._envelope import dumps
from sansrs.ditto.events import (
    InvalidMessage,
    OtherMessageReceived,
    SubscribeReceived,
    SubscriptionClosed,
)
from sansrs.streams import MAX_DEMAND, empty_publisher, error_publisher, from_iterable
from tests.ditto.ditto_helpers import (
    ManualPublisher,
    cancel_text,
    drain,
    request_text,
    sent,
    subscribe_text,
)

MAX_LONG = 2**63 - 1


def _open(server: DittoServer, **kwargs: Any) -> str:
    server.receive_message(subscribe_text(**kwargs))
    events = [e for e in drain(server) if isinstance(e, SubscribeReceived)]
    assert events, "no SubscribeReceived"
    return events[-1].subscription_id


def _actions(messages: list[dict[str, Any]]) -> list[str]:
    return [m["topic"].rsplit("/", 1)[1] for m in messages]


def _error(message: dict[str, Any]) -> dict[str, Any]:
    error: dict[str, Any] = message["value"]["error"]
    return error


# -- created, options ------------------------------------------------------------


def test_ditto_created_for_every_subscribe_with_session_counter_ids() -> None:
    server = DittoServer()
    ids = [_open(server) for _ in range(3)]
    assert ids == ["0", "1", "2"]
    assert [m["value"] for m in sent(server)] == [{"subscriptionId": i} for i in ids]


def test_ditto_subscribe_options_every_field_including_negative_revisions() -> None:
    server = DittoServer()
    value = {
        "fromHistoricalRevision": -5,
        "toHistoricalRevision": 0,
        "fromHistoricalTimestamp": "2022-10-25T14:00:00Z",
        "toHistoricalTimestamp": "2022-10-25T15:00:00.123Z",
        "filter": "exists(thingId)",
    }
    server.receive_message(subscribe_text(value=value))
    (event,) = drain(server)
    assert isinstance(event, SubscribeReceived)
    assert event.options == SubscribeOptions(
        from_historical_revision=-5,
        to_historical_revision=0,
        from_historical_timestamp="2022-10-25T14:00:00Z",
        to_historical_timestamp="2022-10-25T15:00:00.123Z",
        filter="exists(thingId)",
    )
    assert event.topic.entity_id == "org.eclipse.ditto:thing-2"


def test_ditto_subscribe_without_value_streams_full_history() -> None:
    server = DittoServer()
    server.receive_message(subscribe_text())
    (event,) = drain(server)
    assert isinstance(event, SubscribeReceived)
    assert event.options == SubscribeOptions()


def test_ditto_subscribe_for_policy_and_things_only_with_the_twin_channel() -> None:
    """Policies take no channel; a things streaming topic without one is
    answered as Ditto answers it: unknown topic path (issue #32, finding 3)."""
    server = DittoServer()
    _open(server, entity="ns/p/policies")
    server.receive_message(subscribe_text(entity="ns/t/things", headers={"correlation-id": "c"}))
    created, refused = sent(server)
    assert created["topic"] == "ns/p/policies/streaming/created"
    assert (refused["value"]["error"], refused["status"], refused["headers"]) == (
        "protocoladapter:unknown.topicpath", 400, {"correlation-id": "c"})
    assert not [e for e in drain(server) if isinstance(e, SubscribeReceived)]


@pytest.mark.parametrize(
    "value",
    [
        {"fromHistoricalRevision": "1"},
        {"fromHistoricalRevision": 1.5},
        {"toHistoricalRevision": 2**63},
        {"fromHistoricalRevision": -(2**63) - 1},
        {"fromHistoricalRevision": True},
        {"fromHistoricalTimestamp": "yesterday"},
        {"toHistoricalTimestamp": 5},
        {"filter": ["x"]},
        [1],
        "x",
    ],
)
def test_ditto_subscribe_with_wrong_types_gets_json_invalid_error_response(value: Any) -> None:
    server = DittoServer()
    server.receive_message(subscribe_text(value=value, headers={"correlation-id": "c"}))
    (answer,) = sent(server)
    assert answer["topic"] == "org.eclipse.ditto/thing-2/things/twin/errors"
    assert answer["headers"] == {"correlation-id": "c"}
    assert answer["status"] == 400
    assert answer["value"]["error"] == "json.invalid"
    assert isinstance(drain(server)[0], InvalidMessage)


def test_ditto_header_value_out_of_range_gets_400_and_the_connection_goes_on() -> None:
    # {"x": 1e999} would be infinity, which the "created" answer echoing the
    # headers could not carry: a 400 error message, not an internal error.
    server = DittoServer()
    server.receive_message(subscribe_text().replace('"headers":{}', '"headers":{"x":1e999}'))
    assert not [e for e in drain(server) if isinstance(e, SubscribeReceived)]
    (answer,) = sent(server)
    assert answer["topic"].endswith("/errors")
    assert (answer["value"]["status"], answer["value"]["error"]) == (400, "json.invalid")
    assert _open(server) == "0"  # the next subscription is served


def test_ditto_filter_is_for_things_only() -> None:
    server = DittoServer()
    server.receive_message(subscribe_text(entity="ns/p/policies", value={"filter": "x"}))
    (answer,) = sent(server)
    assert answer["topic"] == "ns/p/policies/errors"
    assert answer["value"]["error"] == "json.invalid"


def test_ditto_subscribe_revision_extremes_are_accepted() -> None:
    server = DittoServer()
    value = {"fromHistoricalRevision": -(2**63), "toHistoricalRevision": MAX_LONG}
    server.receive_message(subscribe_text(value=value))
    event = drain(server)[0]
    assert isinstance(event, SubscribeReceived)
    assert event.options == SubscribeOptions(
        from_historical_revision=-(2**63), to_historical_revision=MAX_LONG
    )


# -- demand, next, complete, failed ---------------------------------------------------


def test_rs_1_1_ditto_next_only_within_demand() -> None:
    server = DittoServer()
    sid = _open(server)
    server.accept(sid, from_iterable(range(10)))
    server.receive_message(request_text(sid, 3))
    messages = sent(server)
    assert _actions(messages) == ["created", "next", "next", "next"]
    assert [m["value"]["item"] for m in messages[1:]] == [0, 1, 2]
    server.receive_message(request_text(sid, 2))
    assert [m["value"]["item"] for m in sent(server)] == [3, 4]


def test_ditto_no_complete_before_first_request() -> None:
    server = DittoServer()
    sid = _open(server)
    server.accept(sid, empty_publisher())
    server.handle_timeout(59.0)
    assert _actions(sent(server)) == ["created"]
    assert server.state_of(sid) is ServerState.READY
    server.receive_message(request_text(sid, 1))
    assert _actions(sent(server)) == ["complete"]


def test_ditto_no_failed_before_first_request() -> None:
    server = DittoServer()
    sid = _open(server)
    server.accept(
        sid, error_publisher(DittoException(DittoError(status=404, error="e", message="m")))
    )
    assert _actions(sent(server)) == ["created"]
    server.receive_message(request_text(sid, 1))
    (failed,) = sent(server)
    assert _error(failed) == {"status": 404, "error": "e", "message": "m"}


def test_ditto_publisher_is_subscribed_lazily_at_first_request() -> None:
    server = DittoServer()
    sid = _open(server)
    publisher = ManualPublisher()
    server.accept(sid, publisher)
    assert publisher.subscribes == 0
    server.receive_message(request_text(sid, 4))
    assert publisher.subscribes == 1
    assert publisher.subscription.requests == [4]
    server.receive_message(request_text(sid, 6))
    assert publisher.subscription.requests == [4, 6]


def test_ditto_request_before_accept_is_kept_and_relayed() -> None:
    server = DittoServer()
    sid = _open(server)
    server.receive_message(request_text(sid, 2))
    server.receive_message(request_text(sid, 3))
    assert server.state_of(sid) is ServerState.PENDING_REQUESTED
    publisher = ManualPublisher()
    server.accept(sid, publisher)
    assert publisher.subscription.requests == [5]
    assert server.state_of(sid) is ServerState.ACTIVE


def test_ditto_reject_after_request_fails_at_once() -> None:
    server = DittoServer()
    sid = _open(server)
    server.receive_message(request_text(sid, 1))
    server.reject(sid, DittoError(status=403, error="x", message="no"))
    assert _actions(sent(server)) == ["created", "failed"]
    assert server.state_of(sid) is ServerState.ZOMBIE


def test_rs_3_9_ditto_nonpositive_demand_fails_with_pekko_message_and_cancels() -> None:
    for demand in (0, -1, -(2**63)):
        server = DittoServer()
        sid = _open(server)
        publisher = ManualPublisher()
        server.accept(sid, publisher)
        server.receive_message(request_text(sid, 1))
        server.receive_message(request_text(sid, demand))
        (failed,) = sent(server)[1:]
        assert _error(failed) == {
            "status": 400,
            "error": "streaming.subscription.protocol.error",
            "message": RULE_3_9_MESSAGE,
        }
        assert publisher.subscription.cancelled == 1
        assert server.state_of(sid) is ServerState.ZOMBIE


def test_rs_3_9_ditto_missing_demand_counts_as_zero() -> None:
    server = DittoServer()
    sid = _open(server)
    server.receive_message(
        dumps(
            {
                "topic": "org.eclipse.ditto/thing-2/things/twin/streaming/request",
                "headers": {},
                "path": "/",
                "value": {"subscriptionId": sid},
            }
        )
    )
    assert _error(sent(server)[1])["message"] == RULE_3_9_MESSAGE


@pytest.mark.parametrize("demand", [2**63, 10**30, 1.5, 10.0, "5", True, None, [1], 1e400])
def test_ditto_demand_not_a_long_is_json_invalid_error_response(demand: Any) -> None:
    server = DittoServer()
    sid = _open(server)
    server.messages_to_send()
    if demand is None:
        text = request_text(sid, 0).replace('"demand":0', '"demand":null')
    elif demand == 1e400:
        text = request_text(sid, 0).replace('"demand":0', '"demand":1e400')
    else:
        text = request_text(sid, demand)
    server.receive_message(text)
    (answer,) = sent(server)
    if demand is None:  # null is "missing": rule 3.9
        assert _error(answer)["message"] == RULE_3_9_MESSAGE
        return
    assert answer["topic"].endswith("/errors")
    assert answer["value"]["error"] == "json.invalid"
    assert server.state_of(sid) is ServerState.PENDING  # not failed


def test_rs_3_17_ditto_demand_saturates_instead_of_failing() -> None:
    server = DittoServer()
    sid = _open(server)
    publisher = ManualPublisher()
    server.accept(sid, publisher)
    server.receive_message(request_text(sid, MAX_LONG))
    server.receive_message(request_text(sid, MAX_LONG))
    sent(server)
    for i in range(3):
        publisher.subscriber.on_next(i)
    assert _actions(sent(server)) == ["next"] * 3
    assert server.state_of(sid) is ServerState.ACTIVE
    assert MAX_DEMAND == MAX_LONG


def test_rs_1_1_ditto_publisher_beyond_demand_fails_500_and_is_cancelled() -> None:
    server = DittoServer()
    sid = _open(server)
    publisher = ManualPublisher()
    server.accept(sid, publisher)
    server.receive_message(request_text(sid, 1))
    publisher.subscriber.on_next("a")
    publisher.subscriber.on_next("b")
    messages = sent(server)
    assert _actions(messages) == ["created", "next", "failed"]
    assert _error(messages[2]) == INTERNAL_ERROR.to_json()
    assert publisher.subscription.cancelled == 1


def test_ditto_publisher_plain_exception_becomes_internal_error() -> None:
    server = DittoServer()
    sid = _open(server)
    server.accept(sid, error_publisher(RuntimeError("boom")))
    server.receive_message(request_text(sid, 1))
    assert _error(sent(server)[1])["status"] == 500
    closed = [e for e in drain(server) if isinstance(e, SubscriptionClosed)]
    assert closed == [
        SubscriptionClosed(subscription_id=sid, reason="failed", error=INTERNAL_ERROR,
                           kind=Kind.STREAMING)
    ]


def test_ditto_item_that_is_not_json_fails_the_subscription() -> None:
    server = DittoServer()
    sid = _open(server)
    server.accept(sid, from_iterable([object()]))
    server.receive_message(request_text(sid, 1))
    assert _actions(sent(server)) == ["created", "failed"]


def test_ditto_envelope_items_are_written_as_ditto_messages() -> None:
    server = DittoServer()
    sid = _open(server)
    item = Envelope(topic="a/b/things/twin/events/created", headers=Headers(), path="/", value=1)
    server.accept(sid, from_iterable([item]))
    server.receive_message(request_text(sid, 1))
    assert sent(server)[1]["value"]["item"] == item.to_json()


def test_ditto_publisher_that_raises_does_not_escape() -> None:
    class Raising:
        def subscribe(self, subscriber: Any) -> None:
            raise RuntimeError("bad publisher")

    class RaisingRequest(ManualPublisher):
        def subscribe(self, subscriber: Any) -> None:
            self.subscriber = subscriber

            class Sub:
                def request(self, n: int) -> None:
                    raise RuntimeError("bad request")

                def cancel(self) -> None:
                    raise RuntimeError("bad cancel")

            subscriber.on_subscribe(Sub())

    for publisher in (Raising(), RaisingRequest()):
        server = DittoServer()
        sid = _open(server)
        server.accept(sid, publisher)
        server.receive_message(request_text(sid, 1))
        assert _actions(sent(server)) == ["created", "failed"]


# -- reentrancy ------------------------------------------------------------------------


def test_ditto_reentrant_signals_inside_request_are_correct() -> None:
    # from_iterable signals on_next and on_complete synchronously inside request().
    server = DittoServer()
    sid = _open(server)
    server.accept(sid, from_iterable(["a", "b"]))
    server.receive_message(request_text(sid, 5))
    messages = sent(server)
    assert _actions(messages) == ["created", "next", "next", "complete"]
    assert server.state_of(sid) is ServerState.ZOMBIE


def test_ditto_signal_in_on_subscribe_before_request_returns() -> None:
    class Eager:
        def subscribe(self, subscriber: Any) -> None:
            subscription = ManualPublisher().subscription
            subscriber.on_subscribe(subscription)
            subscriber.on_complete()

    server = DittoServer()
    sid = _open(server)
    server.accept(sid, Eager())
    server.receive_message(request_text(sid, 1))
    assert _actions(sent(server)) == ["created", "complete"]


def test_rs_2_5_ditto_second_on_subscribe_is_cancelled() -> None:
    server = DittoServer()
    sid = _open(server)
    publisher = ManualPublisher()
    server.accept(sid, publisher)
    server.receive_message(request_text(sid, 1))
    other = ManualPublisher().subscription
    publisher.subscriber.on_subscribe(other)
    assert other.cancelled == 1


def test_ditto_signals_after_cancel_are_dropped() -> None:
    server = DittoServer()
    sid = _open(server)
    publisher = ManualPublisher()
    server.accept(sid, publisher)
    server.receive_message(request_text(sid, 5))
    server.receive_message(cancel_text(sid))
    assert publisher.subscription.cancelled == 1
    publisher.subscriber.on_next(1)
    publisher.subscriber.on_complete()
    publisher.subscriber.on_error(RuntimeError())
    assert _actions(sent(server)) == ["created"]


# -- unknown IDs, after the end, cancel ----------------------------------------------


def test_ditto_request_and_cancel_for_unknown_id_get_not_found_only() -> None:
    server = DittoServer()
    server.receive_message(request_text("42", 1, headers={"correlation-id": "c"}))
    server.receive_message(cancel_text("43"))
    first, second = sent(server)
    assert first["topic"] == "org.eclipse.ditto/thing-2/things/twin/streaming/failed"
    assert first["headers"] == {"correlation-id": "c", "content-type": "application/json"}
    assert _error(first) == {
        "status": 404,
        "error": "streaming.subscription.not.found",
        "message": "No subscription with ID '42' exists.",
    }
    assert _error(second)["message"] == "No subscription with ID '43' exists."


def test_ditto_cancel_sends_nothing_and_later_request_is_considered_cancelled() -> None:
    server = DittoServer()
    sid = _open(server)
    sent(server)
    server.receive_message(cancel_text(sid))
    assert sent(server) == []
    server.receive_message(cancel_text(sid))  # a second cancel: still nothing
    assert sent(server) == []
    server.receive_message(request_text(sid, 1))
    assert _error(sent(server)[0])["message"] == (
        "This subscription is considered cancelled. No more messages are processed."
    )


def test_ditto_zombie_is_forgotten_after_ten_seconds_then_not_found() -> None:
    server = DittoServer()
    sid = _open(server)
    server.receive_message(cancel_text(sid), now=100.0)
    assert server.next_deadline() == 110.0
    server.handle_timeout(109.9)
    assert server.state_of(sid) is ServerState.ZOMBIE
    server.handle_timeout(110.0)
    assert server.state_of(sid) is ServerState.GONE
    sent(server)
    server.receive_message(request_text(sid, 1))
    assert _error(sent(server)[0])["error"] == "streaming.subscription.not.found"
    assert server.next_deadline() is None


def test_ditto_max_zombies_forgets_the_oldest() -> None:
    server = DittoServer(DittoServerConfig(max_zombies=2))
    ids = [_open(server) for _ in range(3)]
    for sid in ids:
        server.receive_message(cancel_text(sid))
    assert [server.state_of(s) for s in ids] == [
        ServerState.GONE,
        ServerState.ZOMBIE,
        ServerState.ZOMBIE,
    ]


# -- idle timeout --------------------------------------------------------------------------


def test_ditto_idle_timeout_default_60s_sends_408_even_before_request() -> None:
    server = DittoServer()
    sid = _open(server)
    assert server.next_deadline() == 60.0
    server.handle_timeout(59.999)
    assert _actions(sent(server)) == ["created"]
    server.handle_timeout(60.0)
    (failed,) = sent(server)
    assert _error(failed) == {
        "status": 408,
        "error": "streaming.subscription.timeout",
        "message": f"The subscription '{sid}' stopped due to a lack of interaction.",
    }
    assert server.state_of(sid) is ServerState.ZOMBIE


def test_ditto_idle_timeout_restarts_on_interaction_and_cancels_publisher() -> None:
    server = DittoServer(DittoServerConfig(idle_timeout=5.0))
    sid = _open(server)
    publisher = ManualPublisher()
    server.accept(sid, publisher)
    server.receive_message(request_text(sid, 2), now=4.0)
    assert server.next_deadline() == 9.0
    server.handle_timeout(8.0)
    publisher.subscriber.on_next("x")  # a delivery is interaction too
    assert server.next_deadline() == 13.0
    server.handle_timeout(13.0)
    assert _actions(sent(server)) == ["created", "next", "failed"]
    assert publisher.subscription.cancelled == 1
    closed = [e for e in drain(server) if isinstance(e, SubscriptionClosed)]
    assert closed[0].reason == "timeout"


def test_ditto_many_timer_updates_stay_bounded() -> None:
    server = DittoServer()
    sid = _open(server)
    server.accept(sid, from_iterable(range(10_000)))
    for i in range(1000):
        server.receive_message(request_text(sid, 1), now=float(i))
    assert len(server._timers) <= 4 * 1 + 64 + 1
    assert server.next_deadline() == 999.0 + 60.0


# -- headers ----------------------------------------------------------------------------


def test_ditto_created_echoes_subscribe_headers_and_later_events_follow_latest_request() -> None:
    server = DittoServer()
    sid = _open(server, headers={"Correlation-Id": "s", "x-app": [1]})
    server.accept(sid, from_iterable(range(5)))
    server.receive_message(request_text(sid, 1, headers={"correlation-id": "r1"}))
    server.receive_message(request_text(sid, 1, headers={"correlation-id": "r2"}))
    messages = sent(server)
    assert messages[0]["headers"] == {
        "Correlation-Id": "s",
        "x-app": [1],
        "content-type": "application/json",
    }
    assert [m["headers"]["correlation-id"] for m in messages[1:]] == ["r1", "r2"]


def test_ditto_content_type_header_replaced_case_insensitively() -> None:
    server = DittoServer()
    _open(server, headers={"Content-Type": "text/plain", "correlation-id": "c"})
    assert sent(server)[0]["headers"] == {"Content-Type": "application/json",
                                          "correlation-id": "c"}


def test_ditto_created_carries_a_generated_correlation_id_when_the_subscribe_had_none() -> None:
    """Ditto gives a command without a correlation-id a generated one, which
    its created echoes (issue #32, finding 3); a given one is kept."""
    ids = iter(["gen-1", "gen-2"])
    server = DittoServer(DittoServerConfig(correlation_ids=lambda: next(ids)))
    _open(server)
    _open(server, headers={"Correlation-Id": "mine"})
    assert [m["headers"] for m in sent(server)] == [
        {"correlation-id": "gen-1", "content-type": "application/json"},
        {"Correlation-Id": "mine", "content-type": "application/json"},
    ]
    plain = DittoServer()
    _open(plain)
    _open(plain)
    assert [m["headers"]["correlation-id"] for m in sent(plain)] == ["sansrs-0", "sansrs-1"]


def test_ditto_server_numbers_history_and_search_subscriptions_apart() -> None:
    """Two counters per connection, as Ditto's WebSocket (its
    StreamingSubscriptionManager and the search SubscriptionManager): both
    from "0", each subscription told apart by its kind (issue #32, finding 1)."""
    server = DittoServer()
    history = _open(server)
    server.receive_message(
        '{"topic":"_/_/things/twin/search/subscribe","headers":{},"path":"/","value":{}}')
    search = [e for e in drain(server) if isinstance(e, SubscribeReceived)][-1]
    second = _open(server)
    assert (history, search.subscription_id, second) == ("0", "0", "1")
    sent(server)
    server.accept("0", from_iterable([{"revision": 1}]), kind=Kind.STREAMING)
    server.reject("0", DittoError(status=400, error="x", message="m"), kind=Kind.SEARCH)
    with pytest.raises(LocalProtocolError, match="name its kind"):
        server.state_of("0")
    server.receive_message(
        '{"topic":"_/_/things/twin/search/request","headers":{},"path":"/",'
        '"value":{"subscriptionId":"0","demand":1}}')
    server.receive_message(
        '{"topic":"org.eclipse.ditto/thing-2/things/twin/streaming/request","headers":{},'
        '"path":"/","value":{"subscriptionId":"0","demand":5}}')
    answers = [(m["topic"].split("/", 4)[-1], m["value"].get("item")) for m in sent(server)]
    assert answers == [("search/failed", None), ("streaming/next", {"revision": 1}),
                       ("streaming/complete", None)]
    assert server.state_of("0", Kind.SEARCH) is ServerState.ZOMBIE
    assert server.state_of("1", Kind.STREAMING) is ServerState.PENDING


# -- malformed input: Ditto's error response, never an exception ------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "null",
        "42",
        '"x"',
        "[]",
        '{"topic":null}',
        '{"topic":"x"}',
        '{"topic":"a/b/things/twin/streaming/request","headers":{},"path":"/"}',
        '{"topic":"a/b/things/twin/streaming/request","headers":{},"path":"/","value":[]}',
        '{"topic":"a/b/things/twin/streaming/request","value":{"subscriptionId":1}}',
        '{"topic":"a/b/things/twin/streaming/cancel","value":{}}',
        '{"topic":"a/b/things/live/streaming/request","value":{"subscriptionId":"0"}}',
        '{"topic":"a/b/things/twin/streaming/nonsense","value":{"subscriptionId":"0"}}',
        '{"topic":"a/b/things/twin/streaming/created","value":{"subscriptionId":"0"}}',
        '{"topic":"_/_/things/twin/search/next","value":{"subscriptionId":"0"}}',
        '{"topic":"a/b/things/twin/streaming/request","value":{"subscriptionId":"0","demand":'
        + "9" * 5000
        + "}}",
        "\ud800",
        "[" * 50_000,
        '{"topic":"a/b/things/twin/streaming/request","value":{"demand":NaN}}',
    ],
)
def test_ditto_malformed_messages_get_an_error_response_never_an_exception(text: str) -> None:
    server = DittoServer()
    server.receive_message(text)
    (answer,) = sent(server)
    assert answer["path"] == "/"
    if answer["topic"].endswith("/failed"):  # a well-formed command for an unknown ID
        assert _error(answer)["status"] in (400, 404)
    else:
        assert answer["topic"].endswith("errors")
        assert answer["status"] == answer["value"]["status"] == 400
        assert {"status", "error", "message"} <= set(answer["value"])
    assert isinstance(drain(server)[-1], InvalidMessage)


def test_ditto_error_response_for_invalid_json_is_dittos_json_invalid() -> None:
    server = DittoServer()
    server.receive_message("{nope")
    (answer,) = server.messages_to_send()
    assert answer == (
        '{"topic":"unknown/unknown/things/twin/errors","headers":{},"path":"/",'
        '"value":{"status":400,'
        '"error":"json.invalid","message":"Failed to parse JSON string \'{nope\'!",'
        '"description":"Check if the JSON was valid (e.g. on https://jsonlint.com) and if '
        'it was in required format."},"status":400}'
    )


def test_ditto_missing_subscription_id_is_json_field_missing() -> None:
    server = DittoServer()
    server.receive_message(
        '{"topic":"a/b/things/twin/streaming/request","headers":{"correlation-id":"c"},'
        '"path":"/","value":{"demand":1}}'
    )
    (answer,) = sent(server)
    assert answer["headers"] == {"correlation-id": "c"}
    assert answer["value"]["error"] == "json.field.missing"
    assert answer["value"]["message"] == "JSON did not include required </subscriptionId> field!"


def test_ditto_other_ditto_messages_become_events() -> None:
    server = DittoServer()
    text = '{"topic":"a/b/things/twin/commands/modify","headers":{},"path":"/x","value":1}'
    server.receive_message(text)
    (event,) = drain(server)
    assert isinstance(event, OtherMessageReceived)
    assert event.envelope.to_text() == text
    assert server.messages_to_send() == []


def test_ditto_limits_max_message_size_and_max_subscriptions() -> None:
    server = DittoServer(DittoServerConfig(max_message_size=200, max_subscriptions=1))
    server.receive_message(" " * 201)
    (answer,) = sent(server)
    assert answer["status"] == 413
    _open(server)
    sent(server)
    server.receive_message(subscribe_text(headers={"correlation-id": "two"}))
    (answer,) = sent(server)
    assert answer["status"] == 429
    assert answer["headers"] == {"correlation-id": "two"}
    assert answer["value"]["error"] == "streaming.subscription.limit.exceeded"


def test_ditto_server_config_validation() -> None:
    for kwargs in ({"max_message_size": 0}, {"idle_timeout": 0}, {"zombie_timeout": -1}):
        with pytest.raises(ValueError):
            DittoServerConfig(**kwargs)  # type: ignore[arg-type]


# -- application API misuse -------------------------------------------------------------


def test_ditto_accept_misuse_is_local_protocol_error() -> None:
    server = DittoServer()
    sid = _open(server)
    server.accept(sid, empty_publisher())
    with pytest.raises(LocalProtocolError):
        server.accept(sid, empty_publisher())
    with pytest.raises(LocalProtocolError):
        server.reject(sid, INTERNAL_ERROR)
    with pytest.raises(LocalProtocolError):
        server.accept("99", empty_publisher())
    other = _open(server)
    with pytest.raises(TypeError):
        server.accept(other, None)  # type: ignore[arg-type]


def test_ditto_accept_after_the_subscription_ended_is_ignored() -> None:
    server = DittoServer()
    sid = _open(server)
    server.receive_message(cancel_text(sid))
    server.accept(sid, ManualPublisher())
    server.reject(sid, INTERNAL_ERROR)
    server.handle_timeout(100.0)
    publisher = ManualPublisher()
    server.accept(sid, publisher)  # forgotten: still ignored
    assert publisher.subscribes == 0


def test_ditto_injected_id_factory_collisions_get_a_suffix() -> None:
    server = DittoServer(DittoServerConfig(id_factory=lambda: "same"))
    first, second = _open(server), _open(server)
    assert first == "same"
    assert second.startswith("same-")


def test_ditto_accept_with_odd_ids_is_local_protocol_error_not_a_crash() -> None:
    server = DittoServer()
    for sid in ("9" * 5000, "²", "-1", ""):
        with pytest.raises(LocalProtocolError):
            server.accept(sid, empty_publisher())


# -- search ------------------------------------------------------------------------------

SEARCH_SUBSCRIBE = '{"topic":"_/_/things/twin/search/subscribe","headers":{},"path":"/"}'


def _search_request(sid: str, demand: int) -> str:
    return dumps(
        {
            "topic": "_/_/things/twin/search/request",
            "headers": {},
            "path": "/",
            "value": {"subscriptionId": sid, "demand": demand},
        }
    )


def test_ditto_search_page_that_is_not_a_list_fails_500() -> None:
    server = DittoServer()
    server.receive_message(SEARCH_SUBSCRIBE)
    server.accept("0", from_iterable([{"thingId": "a:b"}]))
    server.receive_message(_search_request("0", 1))
    messages = sent(server)
    assert _actions(messages) == ["created", "failed"]
    assert messages[1]["topic"] == "_/_/things/twin/search/failed"
    assert _error(messages[1])["status"] == 500


def test_ditto_search_errors_use_thing_search_codes() -> None:
    server = DittoServer(DittoServerConfig(idle_timeout=1.0))
    server.receive_message(SEARCH_SUBSCRIBE)
    server.receive_message(_search_request("0", 0))
    server.receive_message(_search_request("0", 1))
    server.receive_message(_search_request("5", 1))
    server.receive_message(SEARCH_SUBSCRIBE)
    server.handle_timeout(1.0)
    codes = [_error(m)["error"] for m in sent(server) if m["topic"].endswith("/failed")]
    assert codes == [
        "thing-search:subscription.protocol.error",
        "thing-search:subscription.protocol.error",
        "thing-search:subscription.not.found",
        "thing-search:subscription.timeout",
    ]


def test_ditto_search_subscribe_with_bad_fields_is_json_invalid() -> None:
    server = DittoServer()
    server.receive_message('{"topic":"_/_/things/twin/search/subscribe","fields":1}')
    (answer,) = sent(server)
    assert answer["topic"] == "unknown/unknown/things/twin/errors"
    assert answer["value"]["error"] == "json.invalid"


def test_ditto_deeply_nested_header_or_value_is_json_invalid_never_recursion() -> None:
    deep = "[" * 900 + "]" * 900
    for text in (
        '{"topic":"a/b/things/twin/streaming/subscribeForPersistedEvents","headers":{"x":'
        + deep
        + "}}",
        '{"topic":"a/b/things/twin/streaming/request","headers":{},"value":{"subscriptionId":'
        + deep
        + ',"demand":1}}',
        '{"topic":"a/b/things/twin/streaming/request","headers":{},"value":{"subscriptionId":"0",'
        '"demand":' + deep + "}}",
        '{"topic":"a/b/things/twin/streaming/subscribeForPersistedEvents","value":'
        '{"fromHistoricalRevision":' + deep + "}}",
    ):
        server = DittoServer()
        server.receive_message(text)
        (answer,) = sent(server)
        assert answer["value"]["error"] == "json.invalid"
        assert len(answer["value"]["message"]) < 200


def test_ditto_header_values_of_moderate_depth_are_echoed() -> None:
    server = DittoServer()
    value: Any = "x"
    for _ in range(31):
        value = [value]
    _open(server, headers={"deep": value})
    assert sent(server)[0]["headers"]["deep"] == value

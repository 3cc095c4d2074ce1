"""Every example under tests/ditto/examples parses; sansrs writes what it shares byte for byte.

The comparison text is the example as Ditto writes it: compact JSON with the
envelope keys in ``ImmutablePayload.toJson`` order (ditto_helpers.ditto_text).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sansrs.ditto import (
    DittoClient,
    DittoError,
    DittoServer,
    DittoServerConfig,
    Envelope,
    SearchOptions,
    parse_envelope,
)
from sansrs.ditto._envelope import dumps
from sansrs.ditto.events import (
    ErrorResponseReceived,
    NextReceived,
    PageReceived,
    SubscribeReceived,
    SubscriptionCompleted,
    SubscriptionCreated,
    SubscriptionFailed,
)
from sansrs.streams import empty_publisher, from_iterable
from tests.ditto.ditto_helpers import EXAMPLE_FILES, ditto_text, example, sent

CID = "3f0c0d52-6c1e-4c41-9f5e-0f3c2a1d9b11"


def test_ditto_examples_are_all_present() -> None:
    assert len(EXAMPLE_FILES) == 27


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_ditto_example_parses_and_rewrites_in_dittos_compact_form(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    envelope = parse_envelope(text)
    assert envelope.to_json() == json.loads(text)
    assert envelope.to_text() == ditto_text(path.stem)


def _server_with_subscription(
    subscribe: str = "code-subscribe-timestamps", *, content_type: bool = True
) -> tuple[DittoServer, str]:
    # The docs abbreviate headers: without content-type nor a generated correlation-id.
    server = DittoServer(DittoServerConfig(content_type_header=content_type,
                                           correlation_id_header=content_type))
    server.receive_message(ditto_text(subscribe))
    event = server.next_event()
    assert isinstance(event, SubscribeReceived)
    return server, event.subscription_id


# -- server role: Ditto's events ---------------------------------------------------


def test_ditto_example_code_created_byte_exact() -> None:
    server, _ = _server_with_subscription()
    assert server.messages_to_send() == [ditto_text("code-created")]


def test_ditto_example_code_next_and_complete_byte_exact() -> None:
    server, sid = _server_with_subscription()
    server.messages_to_send()
    item = parse_envelope(json.dumps(example("code-next")["value"]["item"]))
    server.accept(sid, from_iterable([item]))
    server.receive_message(ditto_text("code-request"))
    assert server.messages_to_send() == [ditto_text("code-next"), ditto_text("code-complete")]


def test_ditto_example_code_failed_rule_3_9_byte_exact() -> None:
    server, _ = _server_with_subscription()
    server.messages_to_send()
    request = example("code-request")
    request["value"]["demand"] = 0
    server.receive_message(dumps(request))
    assert server.messages_to_send() == [ditto_text("code-failed-rule-3.9-nonpositive-demand")]


def test_ditto_example_code_failed_not_found_byte_exact() -> None:
    server = DittoServer()
    request = example("code-request")
    request["value"]["subscriptionId"] = "7"
    server.receive_message(dumps(request))
    assert server.messages_to_send() == [ditto_text("code-failed-not-found")]


def test_ditto_example_code_failed_request_after_end_byte_exact() -> None:
    server, sid = _server_with_subscription()
    server.accept(sid, empty_publisher())
    server.receive_message(ditto_text("code-request"))
    server.messages_to_send()  # created, complete
    server.receive_message(ditto_text("code-request"))
    assert server.messages_to_send() == [ditto_text("code-failed-request-after-end")]


def test_ditto_example_code_failed_idle_timeout_byte_exact() -> None:
    server, _ = _server_with_subscription()
    server.messages_to_send()
    server.handle_timeout(60.0)
    assert server.messages_to_send() == [ditto_text("code-failed-idle-timeout")]


def test_ditto_example_code_failed_thing_not_accessible_byte_exact() -> None:
    server, sid = _server_with_subscription()
    server.messages_to_send()
    error = DittoError.from_json(example("code-failed-thing-not-accessible")["value"]["error"])
    server.reject(sid, error)
    assert server.messages_to_send() == []  # not before the first request
    server.receive_message(ditto_text("code-request"))
    assert server.messages_to_send() == [ditto_text("code-failed-thing-not-accessible")]


def test_ditto_example_docs_created_next_complete_byte_exact() -> None:
    # The docs abbreviate the headers to {}; with the content-type header off
    # sansrs writes exactly the documented messages.
    server, sid = _server_with_subscription(
        "docs-01-subscribeForPersistedEvents", content_type=False
    )
    assert server.messages_to_send() == [ditto_text("docs-02-created")]
    server.accept(sid, from_iterable([{}]))
    server.receive_message(ditto_text("docs-03-request"))
    assert server.messages_to_send() == [
        ditto_text("docs-04-next-empty-item"),
        ditto_text("docs-05-complete"),
    ]


def test_ditto_example_search_created_page_complete_byte_exact() -> None:
    page = example("subscription-has-next-event")["value"]["items"]
    server2 = DittoServer(DittoServerConfig(id_factory=lambda: "24601"))
    server2.receive_message(ditto_text("create-subscription-command"))
    event = server2.next_event()
    assert isinstance(event, SubscribeReceived)
    assert event.options == SearchOptions(
        filter="eq(/attributes/temperature,32)",
        options="size(10),sort(+thingId)",
        namespaces=("org.eclipse.ditto",),
        fields="attributes",
    )
    assert server2.messages_to_send() == [ditto_text("subscription-created-event")]
    server2.accept("24601", from_iterable([page]))
    server2.receive_message(ditto_text("request-subscription-command"))
    assert server2.messages_to_send() == [
        ditto_text("subscription-has-next-event"),
        ditto_text("subscription-complete-event"),
    ]


def test_ditto_example_search_failed_payload_through_ditto_exception() -> None:
    server = DittoServer(DittoServerConfig(id_factory=lambda: "24601"))
    server.receive_message(ditto_text("create-subscription-command"))
    error = DittoError.from_json(example("subscription-failed-event")["value"]["error"])
    server.reject("24601", error)
    server.receive_message(ditto_text("request-subscription-command"))
    assert server.messages_to_send()[1:] == [ditto_text("subscription-failed-event")]


def test_ditto_example_search_error_response_topic_and_shape() -> None:
    # Ditto's own error for an invalid search option; sansrs does not parse
    # options, but its error responses on search topics have the same form.
    server = DittoServer()
    command = example("create-subscription-command")
    command["value"]["namespaces"] = "not-an-array"
    server.receive_message(dumps(command))
    (answer,) = sent(server)
    reference = example("thing-search_search_option_invalid")
    assert answer["topic"] == reference["topic"]
    assert answer["headers"] == {"correlation-id": command["headers"]["correlation-id"]}
    assert list(answer) == list(reference)
    assert answer["status"] == answer["value"]["status"] == 400


# -- client role: the commands ---------------------------------------------------


def _client_sends(client: DittoClient) -> str:
    (text,) = client.messages_to_send()
    return text


def test_ditto_example_client_subscribe_timestamps_byte_exact() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events(
        "org.eclipse.ditto",
        "thing-2",
        from_historical_timestamp=datetime(2022, 10, 25, 14, tzinfo=UTC),
        to_historical_timestamp="2022-10-25T15:00:00Z",
        headers={"correlation-id": CID},
    )
    assert _client_sends(client) == ditto_text("code-subscribe-timestamps")


def test_ditto_example_client_subscribe_as_serialized_by_ditto_byte_exact() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events(
        "org.eclipse.ditto",
        "thing-2",
        from_historical_timestamp=datetime(2022, 10, 25, 14, tzinfo=UTC),
        filter="exists(thingId)",
        headers={"correlation-id": CID, "content-type": "application/json"},
        explicit_range=True,
    )
    assert _client_sends(client) == ditto_text("code-subscribe-as-serialized-by-ditto")


def test_ditto_example_client_subscribe_policy_negative_revision_byte_exact() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events(
        "org.eclipse.ditto",
        "policy-1",
        group="policies",
        from_historical_revision=-10,
        headers={"correlation-id": CID},
    )
    assert _client_sends(client) == ditto_text("code-subscribe-policy")


def test_ditto_example_client_docs_subscribe_request_byte_exact() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events(
        "org.eclipse.ditto", "thing-2", from_historical_revision=1, to_historical_revision=10
    )
    assert _client_sends(client) == ditto_text("docs-01-subscribeForPersistedEvents")
    client.subscribe_for_persisted_events(
        "org.eclipse.ditto",
        "thing-2",
        from_historical_revision=1,
        to_historical_revision=10,
        filter="exists(features/bamboo)",
    )
    assert _client_sends(client) == ditto_text("docs-06-subscribeForPersistedEvents-filter")
    client.receive_message(ditto_text("docs-02-created"))
    created = client.next_event()
    assert isinstance(created, SubscriptionCreated)
    assert (created.key, created.subscription_id) == (0, "0")
    client.request("0", 25)
    assert _client_sends(client) == ditto_text("docs-03-request")
    client.receive_message(ditto_text("docs-04-next-empty-item"))
    client.receive_message(ditto_text("docs-05-complete"))
    events = list(client.events())
    assert events == [
        NextReceived(key=0, subscription_id="0", item={}),
        SubscriptionCompleted(key=0, subscription_id="0"),
    ]


def test_ditto_example_client_code_request_cancel_and_parsed_next_item() -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events(
        "org.eclipse.ditto", "thing-2", headers={"correlation-id": CID}
    )
    client.messages_to_send()
    client.receive_message(ditto_text("code-created"))
    client.request("0", 10, headers={"correlation-id": CID})
    assert _client_sends(client) == ditto_text("code-request")
    client.receive_message(ditto_text("code-next"))
    client.cancel("0", headers={"correlation-id": CID})
    assert _client_sends(client) == ditto_text("code-cancel")
    events = list(client.events())
    nxt = events[1]
    assert isinstance(nxt, NextReceived)
    assert isinstance(nxt.envelope, Envelope)
    assert nxt.envelope.topic == "org.eclipse.ditto/thing-2/things/twin/events/modified"
    assert (nxt.envelope.path, nxt.envelope.value, nxt.envelope.revision) == (
        "/attributes/counter",
        5,
        6,
    )
    assert nxt.envelope.timestamp == "2022-10-25T14:03:12.417Z"


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [
        ("code-failed-idle-timeout", 408, "streaming.subscription.timeout"),
        ("code-failed-not-found", 404, "streaming.subscription.not.found"),
        ("code-failed-request-after-end", 400, "streaming.subscription.protocol.error"),
        ("code-failed-rule-3.9-nonpositive-demand", 400, "streaming.subscription.protocol.error"),
        ("code-failed-thing-not-accessible", 404, "things:thing.notfound"),
    ],
)
def test_ditto_example_client_failed_is_a_typed_error(name: str, status: int, code: str) -> None:
    client = DittoClient()
    client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    created = example("code-created")
    created["value"]["subscriptionId"] = example(name)["value"]["subscriptionId"]
    client.receive_message(dumps(created))
    client.request(created["value"]["subscriptionId"], 1)
    client.receive_message(ditto_text(name))
    failed = list(client.events())[-1]
    assert isinstance(failed, SubscriptionFailed)
    exc = failed.error.exception()
    assert (exc.error_code, exc.code) == (status, code)
    assert exc.message.endswith(example(name)["value"]["error"]["message"])


def test_ditto_example_client_search_commands_and_events() -> None:
    client = DittoClient()
    key = client.subscribe_search(
        filter="eq(/attributes/temperature,32)",
        options="size(10),sort(+thingId)",
        namespaces=["org.eclipse.ditto"],
        fields="attributes",
        headers={
            "content-type": "application/json",
            "correlation-id": "444dae7e-bacf-312b-bc97-8f393dadf1bd",
        },
    )
    assert _client_sends(client) == ditto_text("create-subscription-command")
    client.receive_message(ditto_text("subscription-created-event"))
    client.request("24601", 3, headers={"content-type": "application/json"})
    assert _client_sends(client) == ditto_text("request-subscription-command")
    client.receive_message(ditto_text("subscription-has-next-event"))
    client.receive_message(ditto_text("subscription-complete-event"))
    events = list(client.events())
    assert isinstance(events[0], SubscriptionCreated)
    page = events[1]
    assert isinstance(page, PageReceived)
    assert (page.key, len(page.items)) == (key, 2)
    assert events[2] == SubscriptionCompleted(key=key, subscription_id="24601")
    key2 = client.subscribe_search(headers={"content-type": "application/json"})
    client.messages_to_send()
    created = example("subscription-created-event")
    created["value"]["subscriptionId"] = "24602"
    client.receive_message(dumps(created))
    client.cancel("24602", headers={"content-type": "application/json"})
    assert _client_sends(client) == ditto_text("cancel-subscription-command").replace(
        "24601", "24602"
    )
    client.receive_message(ditto_text("subscription-failed-event").replace("24601", "24602"))
    failed = list(client.events())[-1]
    assert isinstance(failed, SubscriptionFailed)
    assert failed.key == key2
    assert failed.error.error == "thing-search:subscription.protocol.error"
    assert failed.error.description is not None


def test_ditto_example_client_search_error_response() -> None:
    client = DittoClient()
    key = client.subscribe_search(headers={"correlation-id": "<preserved-command-correlation-id>"})
    client.receive_message(ditto_text("thing-search_search_option_invalid"))
    (event,) = list(client.events())
    assert isinstance(event, ErrorResponseReceived)
    assert event.key == key
    assert (event.error.status, event.error.error) == (400, "thing-search:search.option.invalid")

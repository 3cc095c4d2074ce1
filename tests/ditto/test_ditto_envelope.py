"""The Ditto Protocol envelope, headers and topic grammar (docs/protocols/ditto.md)."""

from __future__ import annotations

import pytest

from sansrs.ditto import (
    ABSENT,
    DittoError,
    Envelope,
    Headers,
    MessageError,
    TopicError,
    format_instant,
    parse_envelope,
    parse_topic,
)
from sansrs.ditto._messages import Kind, classify


def test_ditto_envelope_writes_compact_keys_in_ditto_order() -> None:
    env = Envelope(
        topic="a/b/things/twin/events/modified",
        headers=Headers({"x": 1}),
        path="/attributes",
        value=5,
        fields="f",
        metadata={"m": 1},
        timestamp="2022-10-25T14:03:12.417Z",
        revision=6,
        status=200,
        extra={"e": 1},
    )
    assert env.to_text() == (
        '{"topic":"a/b/things/twin/events/modified","headers":{"x":1},"path":"/attributes",'
        '"value":5,"extra":{"e":1},"status":200,"revision":6,'
        '"timestamp":"2022-10-25T14:03:12.417Z","metadata":{"m":1},"fields":"f"}'
    )


def test_ditto_envelope_round_trips_and_keeps_null_value_apart_from_absent() -> None:
    text = '{"topic":"a/b/things/twin/streaming/created","headers":{},"path":"/","value":null}'
    env = parse_envelope(text)
    assert env.value is None
    assert env.to_text() == text
    no_value = parse_envelope('{"topic":"t/x/things/twin/errors","headers":{},"path":"/"}')
    assert no_value.value is ABSENT
    assert "value" not in no_value.to_json()


def test_ditto_envelope_keeps_non_ascii_as_is() -> None:
    text = '{"topic":"a/b/things/twin/streaming/created","headers":{"n":"Grüße"},"path":"/"}'
    assert parse_envelope(text).to_text() == text


def test_ditto_headers_are_case_insensitive_and_case_preserving() -> None:
    headers = Headers({"Correlation-ID": "c1", "X": True})
    assert headers["correlation-id"] == "c1"
    assert "CORRELATION-id" in headers
    assert headers.correlation_id == "c1"
    assert list(headers) == ["Correlation-ID", "X"]
    replaced = headers.with_header("correlation-id", "c2")
    assert replaced.to_json() == {"Correlation-ID": "c2", "X": True}
    assert headers["correlation-id"] == "c1"  # unchanged copy
    assert Headers({"a": 1}) == {"A": 1}
    assert hash(Headers({"a": 1})) == hash(Headers({"a": 1}))


def test_ditto_headers_correlation_id_must_be_a_string() -> None:
    assert Headers({"correlation-id": 5}).correlation_id is None


@pytest.mark.parametrize(
    ("text", "group", "channel", "criterion", "action"),
    [
        ("ns/t/things/twin/streaming/request", "things", "twin", "streaming", "request"),
        ("ns/t/things/streaming/request", "things", None, "streaming", "request"),
        ("ns/t/things/live/streaming/request", "things", "live", "streaming", "request"),
        ("ns/p/policies/streaming/created", "policies", None, "streaming", "created"),
        ("ns/c/connections/streaming/next", "connections", None, "streaming", "next"),
        ("ns/t/things/twin/errors", "things", "twin", "errors", None),
        ("ns/t/things/live/messages/a/b", "things", "live", "messages", "a/b"),
        ("_/_/things/twin/search/subscribe", "things", "twin", "search", "subscribe"),
    ],
)
def test_ditto_topic_grammar_parses_and_formats(
    text: str, group: str, channel: str | None, criterion: str, action: str | None
) -> None:
    topic = parse_topic(text)
    assert (topic.group, topic.channel, topic.criterion, topic.action) == (
        group,
        channel,
        criterion,
        action,
    )
    assert str(topic) == text


def test_ditto_topic_entity_id_and_twin_on_output() -> None:
    topic = parse_topic("org.eclipse.ditto/thing-2/things/streaming/request")
    assert topic.entity_id == "org.eclipse.ditto:thing-2"
    assert str(topic.with_action("streaming", "next")) == (
        "org.eclipse.ditto/thing-2/things/twin/streaming/next"
    )
    policy = parse_topic("ns/p/policies/streaming/request")
    assert str(policy.with_action("streaming", "failed")) == "ns/p/policies/streaming/failed"


@pytest.mark.parametrize(
    "text",
    ["", "a/b/c", "a/b/widgets/twin/streaming/x", "/b/things/twin/streaming/request",
     "a//things/twin/streaming/request", "a/b/policies/twin/streaming/request",
     "a/b/things/twin", "a/b/things/twin//x"],
)  # fmt: skip
def test_ditto_topic_grammar_rejects(text: str) -> None:
    with pytest.raises(TopicError):
        parse_topic(text)


def _classify(topic: str) -> object:
    return classify(parse_envelope(f'{{"topic":"{topic}","headers":{{}},"path":"/"}}'))


def test_ditto_live_streaming_topic_is_unknown_topicpath_as_ditto_rejects_it() -> None:
    with pytest.raises(MessageError) as info:
        _classify("ns/t/things/live/streaming/subscribeForPersistedEvents")
    assert info.value.error.error == "protocoladapter:unknown.topicpath"
    assert info.value.error.status == 400


@pytest.mark.parametrize(
    "topic",
    [
        "ns/t/things/twin/streaming/subscribe",  # search's action on a streaming topic
        "ns/t/things/twin/streaming/error",  # in the enum, unused by any adapter
        "ns/t/things/twin/streaming",
        "ns/t/things/twin/search/subscribe",  # search needs _/_ placeholders
        "_/_/things/live/search/subscribe",
        "_/_/policies/search/subscribe",
        "_/_/things/twin/search/subscribeForPersistedEvents",
    ],
)
def test_ditto_unknown_actions_are_unknown_topicpath(topic: str) -> None:
    with pytest.raises(MessageError) as info:
        _classify(topic)
    assert info.value.error.error == "protocoladapter:unknown.topicpath"


def test_ditto_classify_streaming_search_and_other() -> None:
    streaming = _classify("ns/t/things/twin/streaming/subscribeForPersistedEvents")
    assert getattr(streaming, "kind", None) is Kind.STREAMING
    assert getattr(streaming, "action", None) == "subscribe"
    search = _classify("_/_/things/twin/search/request")
    assert getattr(search, "kind", None) is Kind.SEARCH
    other = _classify("ns/t/things/twin/commands/modify")
    assert str(other) == "ns/t/things/twin/commands/modify"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("{", "json.invalid"),
        ("[]", "json.invalid"),
        ('{"topic":NaN}', "json.invalid"),
        ('{"topic":1e999999, "headers":{}}', "json.invalid"),
        ("[" * 100_000 + "]" * 100_000, "json.invalid"),
        ('{"headers":{}}', "json.field.missing"),
        ('{"topic":5}', "json.invalid"),
        ('{"topic":"a/b/things/twin/errors","headers":[]}', "json.invalid"),
        ('{"topic":"a/b/things/twin/errors","path":7}', "json.invalid"),
        ('{"topic":"a/b/things/twin/errors","revision":"1"}', "json.invalid"),
        ('{"topic":"a/b/things/twin/errors","timestamp":1}', "json.invalid"),
    ],
)
def test_ditto_malformed_envelopes_carry_dittos_error(text: str, code: str) -> None:
    with pytest.raises(MessageError) as info:
        parse_envelope(text)
    assert info.value.error.error == code
    assert info.value.error.status == 400


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1.5e400"])
@pytest.mark.parametrize("where", ["headers", "value"])
def test_ditto_json_number_out_of_range_is_json_invalid(number: str, where: str) -> None:
    # Python reads 1e999 as infinity, which no answer could echo back.
    text = '{"topic":"a/b/things/twin/errors","' + where + '":{"x":' + number + "}}"
    with pytest.raises(MessageError) as info:
        parse_envelope(text)
    assert (info.value.error.status, info.value.error.error) == (400, "json.invalid")


def test_ditto_huge_json_integer_is_json_invalid_not_a_crash() -> None:
    with pytest.raises(MessageError):
        parse_envelope('{"topic":' + "9" * 10_000 + "}")


def test_ditto_error_payload_omits_absent_optionals_and_becomes_typed_exception() -> None:
    error = DittoError(status=404, error="x", message="m")
    assert error.to_json() == {"status": 404, "error": "x", "message": "m"}
    full = DittoError(status=400, error="e", message="m", description="d", href="h")
    assert DittoError.from_json(full.to_json()) == full
    exc = full.exception()
    assert (exc.error_code, exc.status, exc.code, exc.description, exc.href) == (
        400,
        400,
        "e",
        "d",
        "h",
    )
    for bad in (None, [], {"status": "400"}, {"status": 400, "message": 5}):
        with pytest.raises(MessageError):
            DittoError.from_json(bad)


def test_ditto_format_instant_matches_java_instant_to_string() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    assert format_instant(datetime(2022, 10, 25, 14, 0, tzinfo=UTC)) == "2022-10-25T14:00:00Z"
    assert (
        format_instant(datetime(2022, 10, 25, 14, 0, 0, 417000, tzinfo=UTC))
        == "2022-10-25T14:00:00.417Z"
    )
    assert (
        format_instant(datetime(2022, 10, 25, 14, 0, 0, 417001, tzinfo=UTC))
        == "2022-10-25T14:00:00.417001Z"
    )
    plus2 = timezone(timedelta(hours=2))
    assert format_instant(datetime(2022, 10, 25, 16, 0, tzinfo=plus2)) == "2022-10-25T14:00:00Z"
    with pytest.raises(ValueError):
        format_instant(datetime(2022, 10, 25))

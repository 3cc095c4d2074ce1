"""The Ditto cores' hot paths (sansrs/ditto/_fast.py, the envelope checks,
the classification cache) give exactly what the plain code gives."""

from __future__ import annotations

import pytest

from sansrs.ditto import _envelope as env
from sansrs.ditto import _messages as msg
from sansrs.ditto._fast import new_next, next_prefix
from sansrs.ditto.events import NextReceived

ITEM = {"topic": "ns/t/things/twin/events/modified", "path": "/attributes", "revision": 3,
        "value": {"a": 1.5, "b": [1, "é"]}}


@pytest.mark.parametrize(
    "headers",
    [{"content-type": "application/json"}, {}, {"Correlation-Id": "c-1", "x": [1, {"y": 2}]}],
)
def test_ditto_next_prefix_writes_what_the_envelope_writes(headers: dict[str, object]) -> None:
    topic = "ns/t/things/twin/streaming/next"
    prefix = next_prefix(topic, env.Headers(headers), "7")
    whole = env.Envelope(
        topic=topic,
        headers=env.Headers(headers),
        path="/",
        value={"subscriptionId": "7", "item": ITEM},
    ).to_text()
    assert prefix and prefix + env.dumps(ITEM) + "}}" == whole


def test_ditto_next_prefix_leaves_non_ascii_messages_to_the_envelope() -> None:
    # dumps may write the whole message with \u escapes: it must see all of it.
    assert next_prefix("ns/t/things/twin/streaming/next", env.Headers({"n": "é"}), "7") == ""


def test_ditto_envelopes_built_fast_equal_the_dataclass() -> None:
    obj = {"topic": "ns/t/things/twin/events/modified", "headers": {"A": 1}, "value": {"x": 1},
           "revision": 2, "timestamp": "2024-01-01T00:00:00Z", "extra": {"e": 1}}
    fast = env.envelope_from_json(obj)
    plain = env.Envelope(topic=obj["topic"], headers=env.Headers({"a": 1}),  # type: ignore[arg-type]
                         value={"x": 1}, revision=2, timestamp="2024-01-01T00:00:00Z",
                         extra={"e": 1})
    assert fast == plain and type(fast) is env.Envelope
    assert new_next(1, "s", obj) == NextReceived(key=1, subscription_id="s", item=obj)
    assert new_next(1, "s", obj).envelope == fast


def test_ditto_envelope_checks_still_refuse_what_ditto_refuses() -> None:
    for bad in ({"topic": 1}, {}, {"topic": "a", "headers": None}, {"topic": "a", "path": 2},
                {"topic": "a", "revision": "1"}, {"topic": "a", "timestamp": 1}, []):
        with pytest.raises(env.MessageError):
            env.envelope_from_json(bad)


def test_ditto_topics_are_classified_alike_cached_or_not() -> None:
    short = "ns/t/things/twin/streaming/next"
    long_topic = "ns/" + "t" * 300 + "/things/twin/streaming/next"
    for topic in (short, long_topic):
        e = env.Envelope(topic=topic, headers=env.Headers())
        assert msg.classify(e) == msg.classify_topic(topic)
    bad = env.Envelope(topic="nope", headers=env.Headers())
    for _ in range(2):  # errors are not cached: raised every time
        with pytest.raises(env.MessageError):
            msg.classify(bad)

"""The Ditto cores' hot paths (sansrs/ditto/_fast.py, the envelope checks,
the classification cache) give exactly what the plain code gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs.ditto import DittoServer
from sansrs.ditto import _envelope as env
from sansrs.ditto import _messages as msg
from sansrs.ditto._fast import message_text, new_next, next_prefix, topic_base
from sansrs.ditto.events import NextReceived, SubscribeReceived
from sansrs.streams import MAX_DEMAND
from tests.ditto.ditto_helpers import ManualPublisher, request_text, subscribe_text

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


_names = st.text(min_size=1, max_size=6).filter(lambda n: "/" not in n)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=2),
    max_leaves=4,
)


@settings(max_examples=200, deadline=None)
@given(
    st.builds(env.Topic, namespace=_names, entity_name=_names,
              group=st.sampled_from(["things", "policies", "connections"]),
              channel=st.sampled_from([None, "twin", "live"]),
              criterion=st.sampled_from(["streaming", "search"]),
              action=st.none() | st.text(max_size=4)),
    st.sampled_from(["subscribeForPersistedEvents", "subscribe", "request", "cancel"]),
    st.dictionaries(st.text(max_size=6), _json, max_size=3),
    _json,
    st.none() | st.text(max_size=6),
)
def test_ditto_messages_written_from_a_topic_base_are_the_envelopes(
    topic: env.Topic, action: str, headers: dict[str, object], value: object,
    fields: str | None,
) -> None:
    """What the cores send (``_fast.message_text`` behind the subscription's
    ``topic_base``) is what the envelope of that topic writes."""
    full = topic.with_action(topic.criterion, action)
    assert topic_base(topic) + action == str(full)
    hs = env.Headers(headers)
    envelope = env.Envelope(topic=str(full), headers=hs, path="/", value=value, fields=fields)
    assert message_text(str(full), hs.to_json(), value, fields) == envelope.to_text()


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


def test_ditto_topics_built_fast_equal_the_dataclass() -> None:
    """Topics and classifications (``env.new_topic``, ``msg._classified``)
    are the frozen dataclasses, equal by value, hashed alike, still frozen."""
    args = ("ns", "t", "things", "twin", "streaming", "next")
    plain = env.Topic(namespace="ns", entity_name="t", group="things", channel="twin",
                      criterion="streaming", action="next")
    for fast in (env.new_topic(*args), env.parse_topic("ns/t/things/twin/streaming/next")):
        assert type(fast) is env.Topic and fast == plain and hash(fast) == hash(plain)
        assert repr(fast) == repr(plain)
        with pytest.raises(AttributeError):  # FrozenInstanceError
            fast.action = "x"  # type: ignore[misc]
    assert env.new_topic("a", "b", "policies", None, "streaming") == env.Topic(
        namespace="a", entity_name="b", group="policies", channel=None, criterion="streaming")
    classified = msg.classify_topic("ns/t/things/twin/streaming/next")
    assert type(classified) is msg.Classified and classified == msg.Classified(
        topic=plain, kind=msg.Kind.STREAMING, action="next")
    with pytest.raises(AttributeError):
        classified.action = "x"  # type: ignore[misc]


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


# -- the server's batch of items (Relay.on_next_many, _server_upstream.py) ---------

_items = st.one_of(
    st.just(ITEM),
    st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=2),
    st.sampled_from([{"x": float("nan")}, {"x": object()}, [1, 2], "text", None,
                     env.Envelope(topic="ns/t/things/twin/events/deleted", headers=env.Headers()),
                     {"é": "\ud800"}]),
)


def _active_server(demand: int, headers: dict[str, object]) -> tuple[DittoServer, ManualPublisher]:
    server = DittoServer()
    server.receive_message(subscribe_text(headers=headers), now=0.0)
    (subscribe,) = [e for e in server.events() if isinstance(e, SubscribeReceived)]
    publisher = ManualPublisher()
    server.accept(subscribe.subscription_id, publisher)
    server.receive_message(request_text(subscribe.subscription_id, demand), now=1.0)
    server.handle_timeout(1.5)  # items come later than the request: they move the idle timer
    server.messages_to_send()
    list(server.events())
    return server, publisher


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_items, max_size=12),
    st.one_of(st.integers(1, 10), st.just(MAX_DEMAND)),  # the batch paths: both kinds
    st.integers(1, 5),
    st.sampled_from([{}, {"n": "é"}, {"correlation-id": "c"}]),
)
def test_ditto_server_items_in_a_batch_give_what_one_by_one_gives(
    items: list[object], demand: int, chunk: int, headers: dict[str, object]
) -> None:
    one, one_pub = _active_server(demand, headers)
    many, many_pub = _active_server(demand, headers)
    for item in items:
        one_pub.subscriber.on_next(item)
    for k in range(0, len(items), chunk):
        many_pub.subscriber.on_next_many(items[k : k + chunk])
    assert one.messages_to_send() == many.messages_to_send()
    assert list(one.events()) == list(many.events())
    assert one._timers == many._timers
    assert one_pub.subscription.cancelled == many_pub.subscription.cancelled
    for later in (2.0, 1e9):  # idle and zombie timers fire alike
        one.handle_timeout(later)
        many.handle_timeout(later)
        assert one.messages_to_send() == many.messages_to_send()
        assert list(one.events()) == list(many.events())

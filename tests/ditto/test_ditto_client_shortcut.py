"""The client's shortcut for history ``next`` messages (``DittoClient._next_shortcut``:
the envelope's text learned once, only the item parsed) gives exactly what
the full path (``DittoClient._receive``) gives: the same events, the same
``RemoteProtocolError`` (message and status), the same messages out, the
same state and demand, for valid and invalid messages alike; and
``receive_run`` says what ``receive_message`` says one message at a time."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.fuzz_ditto_client import CONFIG, outcome, subscribed
from fuzz.fuzz_ditto_client import seeds as fuzz_seeds
from fuzz.fuzz_ditto_client import test_one_input as fuzz_one_input
from sansrs.ditto import DittoClient, DittoClientConfig, RemoteProtocolError
from sansrs.ditto import _envelope as env
from sansrs.ditto._fast import next_prefix
from sansrs.ditto.events import ItemsReceived, NextReceived
from sansrs.streams import MAX_DEMAND

TOPIC = "ns/t/things/twin/streaming"
HEADERS = {"content-type": "application/json"}
ITEM = {"topic": "ns/t/things/twin/events/modified", "path": "/attributes", "revision": 1,
        "value": {"id": 1, "x": 0.5}}


def prefix(sid: str = "0", headers: dict[str, Any] | None = None) -> str:
    return next_prefix(f"{TOPIC}/next", env.Headers(HEADERS if headers is None else headers), sid)


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def created(sid: str) -> str:
    return compact({"topic": f"{TOPIC}/created", "headers": HEADERS, "path": "/",
                    "value": {"subscriptionId": sid}})


def complete(sid: str) -> str:
    return compact({"topic": f"{TOPIC}/complete", "headers": HEADERS, "path": "/",
                    "value": {"subscriptionId": sid}})


def assert_alike(texts: list[str], demand: int, cancel_at: int = -1,
                 config: DittoClientConfig = CONFIG) -> None:
    fast, full = subscribed(demand, config), subscribed(demand, config)
    for i, text in enumerate(texts):
        if i == cancel_at:
            for client in (fast, full):
                if client.state_of("0").value in ("created", "active"):
                    client.cancel("0")
        assert outcome(fast, text, False) == outcome(full, text, True), (i, text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8,
)
JUNK = ["", " ", "NaN", "Infinity", "-Infinity", "1e999", "-1e400", "{", "}", "]", ",",
        '1,"item":2', '{"a":1}},"x":{"y":1', "[" * 40 + "]" * 40, '"\\ud800"', "tru", "01",
        '{"a":1} ', ' {"a":1}', '{"a":1}}', "null}", '"x"}', "{}}}"]
items = st.one_of(
    json_values.map(compact),
    json_values.map(json.dumps),  # with spaces
    st.sampled_from(JUNK),
    st.text(max_size=12),
)


@st.composite
def messages(draw: st.DrawFn) -> str:
    item = draw(items)
    shape = draw(st.integers(0, 9))
    if shape <= 4:
        return prefix() + item + "}}"
    if shape == 5:
        return prefix() + item + draw(st.sampled_from(["}} ", " }}", "}}}", "}", "", "}},"]))
    if shape == 6:  # another subscription, other headers, another topic
        return draw(st.sampled_from([prefix("1"), prefix(headers={}),
                                     prefix(headers={"a": [1, {"b": None}]}),
                                     prefix().replace("ns/t", "ns/u")])) + item + "}}"
    if shape == 7:
        return complete(draw(st.sampled_from(["0", "1"])))
    if shape == 8:
        return prefix()[: draw(st.integers(0, len(prefix())))] + item + "}}"
    return draw(st.text(max_size=40))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(messages(), min_size=1, max_size=12),
    st.sampled_from([1, 2, 3, 5, 64, MAX_DEMAND]),
    st.integers(-1, 12),
)
def test_ditto_client_shortcut_agrees_with_the_full_path(
    texts: list[str], demand: int, cancel_at: int
) -> None:
    warm_up = prefix() + compact(ITEM) + "}}"  # teaches the shortcut
    assert_alike([warm_up, *texts], demand, cancel_at)


@pytest.mark.parametrize("junk", JUNK)
def test_ditto_client_shortcut_answers_bad_items_as_the_full_path(junk: str) -> None:
    warm_up = prefix() + compact(ITEM) + "}}"
    assert_alike([warm_up, prefix() + junk + "}}", warm_up], 5)


def test_ditto_client_shortcut_keeps_max_message_size() -> None:
    text = prefix() + compact(ITEM) + "}}"
    config = DittoClientConfig(max_message_size=len(text))
    assert_alike([text, text, text[:-2] + " }}", prefix() + compact([ITEM]) + "}}"], 9,
                 config=config)


def test_ditto_client_shortcut_rule_1_1_next_beyond_demand_is_refused_alike() -> None:
    text = prefix() + compact(ITEM) + "}}"
    assert_alike([text, text, text], 2)
    client = subscribed(2)
    client.receive_message(text)
    client.receive_message(text)
    with pytest.raises(RemoteProtocolError, match=r"rule 1\.1"):
        client.receive_message(text)


def test_ditto_client_shortcut_is_taken_for_a_history_stream() -> None:
    client = subscribed(1000)
    items = [{**ITEM, "revision": r} for r in range(1, 101)]
    for item in items:
        client.receive_message(prefix() + compact(item) + "}}")
    got = list(client.events())
    assert [e.item for e in got if isinstance(e, NextReceived)] == items
    assert got[5].envelope == env.envelope_from_json(items[5])  # parsed when read
    assert [s.hits for s in client._shortcuts] == [99]  # the first one taught it


def test_ditto_client_shortcuts_of_interleaved_subscriptions() -> None:
    client = DittoClient()
    for name in ("t", "u"):
        client.subscribe_for_persisted_events("ns", name)
    client.receive_message(created("0"))
    client.receive_message(created("1").replace("ns/t", "ns/u"))
    client.request("0", 100)
    client.request("1", 100)
    list(client.events())
    texts = {
        "0": prefix("0"),
        "1": next_prefix("ns/u/things/twin/streaming/next", env.Headers(HEADERS), "1"),
    }
    for r in range(20):
        for head in texts.values():
            client.receive_message(head + compact({**ITEM, "revision": r}) + "}}")
    got = [(e.subscription_id, e.item["revision"]) for e in client.events()
           if isinstance(e, NextReceived)]
    assert got == [(sid, r) for r in range(20) for sid in ("0", "1")]
    assert sorted(s.hits for s in client._shortcuts) == [19, 19]


def test_ditto_client_shortcut_stops_learning_when_headers_change_per_message() -> None:
    client = subscribed(1000)
    for r in range(20):
        head = prefix(headers={"correlation-id": f"c-{r}"})
        client.receive_message(head + compact({**ITEM, "revision": r}) + "}}")
    assert client._shortcuts == [] or client._shortcuts[0].hits == 0
    assert client._streams["0"].misses == 4
    assert len([e for e in client.events() if isinstance(e, NextReceived)]) == 20


# -- receive_run: the messages of one read in one call --------------------------


def _flat(events: list[Any]) -> list[Any]:
    out: list[Any] = []
    for event in events:
        if isinstance(event, ItemsReceived):
            out.extend(NextReceived(key=event.key, subscription_id=event.subscription_id, item=i)
                       for i in event.items)
        else:
            out.append(event)
    return out


def _chunk_outcome(
    client: DittoClient, chunk: list[str], run: bool, sids: tuple[str, ...] = ("0",)
) -> tuple[Any, ...]:
    error = None
    try:
        if run:
            client.receive_run(chunk)
        else:
            for text in chunk:
                client.receive_message(text)
    except RemoteProtocolError as exc:
        error = (exc.message, exc.error_code)
    subs = [client._streams.get(sid) for sid in sids]
    return (error, _flat(list(client.events())), client.messages_to_send(),
            [client.state_of(sid) for sid in sids],
            [None if sub is None else sub.demand for sub in subs])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(messages(), min_size=1, max_size=16),
    st.sampled_from([1, 2, 3, 5, 64, MAX_DEMAND]),
    st.integers(1, 6),
)
def test_ditto_client_receive_run_says_what_one_message_at_a_time_says(
    texts: list[str], demand: int, chunk: int
) -> None:
    warm_up = prefix() + compact(ITEM) + "}}"
    texts = [warm_up, warm_up, *texts]
    by_run, one_by_one = subscribed(demand), subscribed(demand)
    for k in range(0, len(texts), chunk):
        part = texts[k : k + chunk]
        assert _chunk_outcome(by_run, part, True) == _chunk_outcome(one_by_one, part, False)


def test_ditto_client_receive_run_reports_consecutive_items_as_one_event() -> None:
    client = subscribed(100)
    texts = [prefix() + compact({**ITEM, "revision": r}) + "}}" for r in range(1, 11)]
    client.receive_run(texts[:1])  # full path: teaches the shortcut
    client.receive_run([*texts[1:5], complete("1"), *texts[5:]])
    events = list(client.events())
    assert [type(e).__name__ for e in events] == [
        "NextReceived", "ItemsReceived", "StrayMessageReceived", "ItemsReceived"]
    assert [i["revision"] for i in events[1].items + events[3].items] == list(range(2, 11))


@pytest.mark.parametrize("seed", fuzz_seeds())
def test_ditto_client_shortcut_fuzz_seeds_pass(seed: bytes) -> None:
    fuzz_one_input(seed)  # the differential fuzz target on its committed seeds


def _two_subscriptions(demand: int) -> DittoClient:
    """Subscriptions "0" and "1" active with ``demand`` each; both shortcuts
    learned, "1" the newest (tried first)."""
    client = DittoClient(CONFIG)
    for sid in ("0", "1"):
        client.subscribe_for_persisted_events("ns", "t")
        client.receive_message(created(sid))
        client.request(sid, demand)
    for sid in ("0", "1"):
        client.receive_message(prefix(sid) + compact(ITEM) + "}}")
    client.messages_to_send()
    list(client.events())
    return client


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["0", "1"]), st.one_of(items, st.just('"' + "x" * 2100 + '"'))),
        min_size=1, max_size=16,
    ),
    st.sampled_from([1, 3, 8, MAX_DEMAND]),
    st.integers(1, 8),
)
def test_ditto_client_receive_run_of_two_subscriptions_says_what_one_at_a_time_says(
    sent: list[tuple[str, str]], demand: int, chunk: int
) -> None:
    """Items of two subscriptions interleaved (each shortcut takes its own
    stretches), some beyond ``max_message_size`` (the full path refuses
    them, 413)."""
    texts = [prefix(sid) + item + "}}" for sid, item in sent]
    by_run, one_by_one = _two_subscriptions(demand), _two_subscriptions(demand)
    for k in range(0, len(texts), chunk):
        part = texts[k : k + chunk]
        assert _chunk_outcome(by_run, part, True, ("0", "1")) == _chunk_outcome(
            one_by_one, part, False, ("0", "1"))


_header_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=2),
    max_leaves=4,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ns/t", "ns/t2", 'ns/"', "n\\s/t"]),
            st.dictionaries(st.text(max_size=12), _header_values, max_size=3),
            st.text(max_size=6),
        ),
        min_size=2, max_size=2,
    )
)
def test_ditto_client_no_next_prefix_begins_another(
    pair: list[tuple[str, dict[str, Any], str]]
) -> None:
    """What lets ``receive_run`` take a stretch with any matching shortcut:
    a message starts with at most one learned prefix."""
    a, b = (next_prefix(f"{t}/things/twin/streaming/next", env.Headers(h), sid)
            for t, h, sid in pair)
    assert a == b or not (a and b and (a.startswith(b) or b.startswith(a)))

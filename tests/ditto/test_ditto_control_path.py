"""The client's control path (``DittoClient._control``: a subscription's
``created``, first ``next`` and ``complete`` taken without the envelope and
the topic grammar) gives exactly what the full path (``DittoClient._receive``)
gives: the same events, the same ``RemoteProtocolError`` (message and
status), the same messages out, the same states, demands and pending
subscribes, for Ditto's own messages and for every kind of variation of
them (other correlation-ids, topics, headers, fields, bad JSON), whatever
the intents between them."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs.ditto import (
    DittoClient,
    DittoClientConfig,
    LocalProtocolError,
    RemoteProtocolError,
)
from sansrs.ditto import _envelope as env
from sansrs.ditto import _messages as msg
from sansrs.ditto._fast import plain_message, topic_base
from sansrs.ditto.events import (
    ItemsReceived,
    NextReceived,
    SubscriptionCompleted,
    SubscriptionCreated,
)

ENTITIES = [("ns", "t"), ("ns", "u"), ("n.s", "t:1")]
SIDS = ["0", "1", "2", "3"]
CT = {"content-type": "application/json"}


def _client() -> DittoClient:
    counter = itertools.count()
    config = DittoClientConfig(max_message_size=600, max_subscriptions=6,
                               correlation_ids=lambda: f"c-{next(counter)}")
    return DittoClient(config)


def _base(ns: str, name: str, group: str = "things", criterion: str = "streaming") -> str:
    channel = "twin/" if group == "things" else ""
    return f"{ns}/{name}/{group}/{channel}{criterion}/"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_topics = st.one_of(
    st.sampled_from([_base(ns, name) for ns, name in ENTITIES]),
    st.sampled_from([
        "_/_/things/twin/search/", "ns/t/things/streaming/", "ns/t/things/live/streaming/",
        "ns/t/policies/streaming/", "ns/t/things/twin/streaming/x/", "ns//things/twin/streaming/",
        "ns/t/things/twin/", "", "ns/t/things/twin/events/", "unknown/unknown/things/twin/",
        "_/_/things/",
    ]),
)
_actions = st.sampled_from(["created", "next", "complete", "failed", "request", "subscribe",
                            "nope", "", "errors", "search/errors"])
_header_sets = st.one_of(
    st.sampled_from([{}, CT]),
    st.builds(lambda name, cid, more: {name: cid, **more},
              st.sampled_from(["correlation-id", "Correlation-Id", "CORRELATION-ID", "x"]),
              st.sampled_from([f"c-{i}" for i in range(6)] + [7, None, ["c-0"]]),
              st.sampled_from([{}, CT, {"a": {"b": 1}}, {"correlation-id": "c-1"}])),
)
_values = st.one_of(
    st.builds(lambda sid, more: {"subscriptionId": sid, **more},
              st.sampled_from([*SIDS, 5, None]),
              st.sampled_from([{}, {"item": {"revision": 1, "v": [1.5, "x"]}}, {"item": None},
                               {"items": [{"thingId": "a"}]}, {"items": 3},
                               {"error": {"status": 404, "error": "x", "message": "gone"}},
                               {"error": 3}])),
    st.sampled_from([None, [], "0", 1,
                     {"status": 500, "error": "gateway:internalerror", "message": "m"}]),
)
_extra_fields = st.sampled_from([{}, {}, {}, {"path": "/"}, {"path": "/x"}, {"path": 3},
                                 {"status": 200}, {"revision": 2}, {"extra": {}},
                                 {"fields": "thingId"}, {"other": 1}])


@st.composite
def _messages(draw: st.DrawFn) -> str:
    topic = draw(_topics) + draw(_actions)
    obj: dict[str, Any] = {"topic": topic}
    if draw(st.integers(0, 9)):
        obj["headers"] = draw(_header_sets)
    obj["path"] = "/"
    value = draw(_values)
    if value is not None or draw(st.booleans()):
        obj["value"] = value
    obj.update(draw(_extra_fields))
    shape = draw(st.integers(0, 11))
    if shape == 0:  # keys in another order
        obj = dict(reversed(obj.items()))
    text = _compact(obj)
    if shape == 1:
        return text + " "
    if shape == 2:
        return " " + text
    if shape == 3:
        return json.dumps(obj)  # with spaces
    if shape == 4:
        return text[: draw(st.integers(0, len(text)))]
    if shape == 5:
        return text.replace("/", "\\/", 1)  # the same JSON, another text
    if shape == 6:
        return _compact([obj])
    if shape == 7:
        return text + "x" * 600  # beyond max_message_size
    return text


_intents = st.one_of(
    st.tuples(st.just("subscribe"), st.integers(0, len(ENTITIES) - 1),
              st.sampled_from([None, {"correlation-id": "c-0"}, {"Correlation-Id": "c-9"},
                               {"correlation-id": 7}])),
    st.tuples(st.just("search"), st.just(0), st.none()),
    st.tuples(st.just("request"), st.integers(0, 7), st.sampled_from([1, 2, 9, 2**63 - 1])),
    st.tuples(st.just("request"), st.integers(0, 7), st.sampled_from([1, 2, 9, 2**63 - 1])),
    st.tuples(st.just("cancel"), st.integers(0, 7), st.none()),
    st.tuples(st.just("cancel_pending"), st.integers(0, 5), st.none()),
)


def _created(client: DittoClient) -> list[tuple[msg.Kind, str, Any]]:
    """(kind, ID, subscription) of every created subscription, histories first."""
    return [(kind, sid, sub) for kind, ids in ((msg.Kind.STREAMING, client._streams),
                                               (msg.Kind.SEARCH, client._searches))
            for sid, sub in ids.items()]


def _resolve(client: DittoClient, intent: tuple[str, Any, Any]) -> tuple[str, Any, Any]:
    """A request's or cancel's target: the n'th created subscription (any
    ID, then, if there is none), named by kind and ID, or (n >= 6) by its
    ID alone."""
    what, target, arg = intent
    if what in ("request", "cancel"):
        created = [(kind, sid) for kind, sid, _ in _created(client)] or [(None, s) for s in SIDS]
        kind, sid = created[target % len(created)]
        target = (None if target >= 6 else kind, sid)
    elif what == "cancel_pending" and client._pending:
        target = list(client._pending)[target % len(client._pending)]
    return what, target, arg


def _intent(client: DittoClient, intent: tuple[str, Any, Any]) -> Any:
    what, target, arg = intent
    try:
        if what == "subscribe":
            ns, name = ENTITIES[target]
            return client.subscribe_for_persisted_events(ns, name, headers=arg)
        if what == "search":
            return client.subscribe_search(filter="exists(thingId)")
        if what == "request":
            client.request(target[1], arg, kind=target[0])
        elif what == "cancel":
            client.cancel(target[1], kind=target[0])
        else:
            client.cancel_pending(target)
    except LocalProtocolError as exc:
        return str(exc)
    return None


def _state(client: DittoClient) -> tuple[Any, ...]:
    return (
        [(kind, sid, sub.state, sub.demand, sub.key) for kind, sid, sub in _created(client)],
        [(key, sub.state, sub.sid) for key, sub in client._pending.items()],
        [(key, sub.state) for key, sub in client._orphans.items()],
        list(client._cancelled),
    )


def _outcome(client: DittoClient, texts: list[str], how: str) -> tuple[Any, ...]:
    error = None
    one_at_a_time = {"full": client._receive, "one": client.receive_message}.get(how)
    try:
        if one_at_a_time is None:
            client.receive_run(texts)
        else:
            list(map(one_at_a_time, texts))
    except RemoteProtocolError as exc:
        error = (exc.message, exc.error_code)
    events: list[Any] = []
    for event in client.events():  # receive_run's runs of items taken apart
        if isinstance(event, ItemsReceived):
            events += [NextReceived(key=event.key, subscription_id=event.subscription_id,
                                    item=item) for item in event.items]
        else:
            events.append(event)
    return (error, events, repr(events), client.messages_to_send(), _state(client))


_answer = st.tuples(
    st.sampled_from(["created", "next", "complete"]), st.integers(0, 5), st.sampled_from(SIDS),
    st.sampled_from([{}, CT]), st.sampled_from([0] * 8 + list(range(1, 9))),
)


@st.composite
def _histories(draw: st.DrawFn) -> list[Any]:
    """Histories read as Ditto answers them: one to three subscribes (as
    the Spark reader subscribes ahead), their ``created`` in any order,
    then each one's request, next..., complete (each answer perhaps changed
    a little)."""
    def answer(action: str, pick: int) -> tuple[Any, ...]:
        return (action, pick, *draw(_answer)[2:])

    k = draw(st.integers(1, 3))
    steps: list[Any] = [("subscribe", draw(st.integers(0, len(ENTITIES) - 1)), None)
                        if draw(st.integers(0, 3)) else ("search", 0, None) for _ in range(k)]
    if draw(st.integers(0, 5)) == 0:
        steps.append(("cancel_pending", draw(st.integers(0, k - 1)), None))
    steps.append([answer("created", draw(st.integers(0, k - j - 1))) for j in range(k)])
    for j in reversed(range(k)):  # the newest first: a complete forgets the last one
        steps.append(("request", j, draw(st.sampled_from([1, 3, 9]))))
        steps.append([answer("next", j) for _ in range(draw(st.integers(0, 4)))]
                     + [answer("complete", j)])
    return ["history", *steps]


_steps = st.lists(
    st.one_of(
        _histories(),
        _intents,
        st.lists(_messages(), min_size=1, max_size=3),
        # Ditto's own answers to what was subscribed (mostly as Ditto writes them)
        st.lists(_answer, min_size=1, max_size=4),
    ),
    min_size=1, max_size=8,
).map(lambda steps: [s for step in steps for s in (step[1:] if step[0] == "history"
                                                   else [step])])

_MUTATIONS = {
    1: lambda t: t.replace('"correlation-id":"c-', '"correlation-id":"d-'),
    2: lambda t: t.replace('"correlation-id"', '"Correlation-ID"'),
    3: lambda t: t[:-1] + ',"status":200}',
    4: lambda t: t.replace("/twin/", "/"),
    5: lambda t: t.replace('"subscriptionId":"', '"subscriptionId":"x'),
    6: lambda t: t + "\n",
    7: lambda t: t.replace('"path":"/"', '"path":"/a"'),
    8: lambda t: t.replace('"headers":{', '"headers":{"h":[1],'),
}


def _answers(client: DittoClient, answers: list[tuple[Any, ...]]) -> list[str]:
    """The messages Ditto writes for ``answers``: ``created`` for a pending
    subscribe (with its correlation-id), ``next`` and ``complete`` for a
    created one, each perhaps changed a little (``_MUTATIONS``)."""
    texts = []
    for action, pick, sid, headers, mutation in answers:
        if action == "created":
            pending = list(client._pending.values())
            if not pending:
                continue
            sub = pending[pick % len(pending)]
            if sub.correlation_id is not None:
                headers = {"correlation-id": sub.correlation_id, **headers}
        else:
            created = _created(client)
            if not created:
                continue
            _, sid, sub = created[pick % len(created)]
        value: dict[str, Any] = {"subscriptionId": sid}
        if action == "next" and sub.kind is msg.Kind.SEARCH:
            value["items"] = [{"thingId": f"ns:{pick}"}]
        elif action == "next":
            value["item"] = {"revision": pick}
        text = _compact({"topic": sub.base + action, "headers": headers, "path": "/",
                         "value": value})
        texts.append(_MUTATIONS[mutation](text) if mutation else text)
    return texts


@settings(max_examples=600, deadline=None)
@given(_steps, st.sampled_from(["one", "run"]))
def test_ditto_client_control_path_agrees_with_the_full_path(
    steps: list[Any], how: str
) -> None:
    fast, full = _client(), _client()
    for step in steps:
        if isinstance(step, list):
            texts = step if isinstance(step[0], str) else _answers(full, step)
            assert _outcome(fast, texts, how) == _outcome(full, texts, "full"), texts
        else:
            step = _resolve(full, step)
            assert _intent(fast, step) == _intent(full, step)
            assert fast.messages_to_send() == full.messages_to_send()


def test_ditto_client_control_path_takes_a_things_own_answers() -> None:
    """A history of one thing: the control path takes its created, first
    next and complete (the full path is not called at all)."""
    client = _client()
    key = client.subscribe_for_persisted_events("ns", "t")
    base = _base("ns", "t")
    client._receive = None  # type: ignore[method-assign, assignment]
    client.receive_message(_compact({"topic": base + "created",
                                     "headers": {"correlation-id": "c-0", **CT},
                                     "path": "/", "value": {"subscriptionId": "7"}}))
    client.request("7", 10)
    for r in (1, 2):
        client.receive_message(_compact({"topic": base + "next", "headers": CT, "path": "/",
                                         "value": {"subscriptionId": "7",
                                                   "item": {"revision": r}}}))
    client.receive_message(_compact({"topic": base + "complete", "headers": CT, "path": "/",
                                     "value": {"subscriptionId": "7"}}))
    events = list(client.events())
    assert events[0] == SubscriptionCreated(
        key=key, subscription_id="7", headers=env.Headers({"correlation-id": "c-0", **CT}))
    assert [getattr(e, "item", None) for e in events[1:3]] == [{"revision": 1}, {"revision": 2}]
    assert events[3] == SubscriptionCompleted(key=key, subscription_id="7")
    assert client._shortcuts and client._shortcuts[0].hits == 1


_names = st.text(min_size=1, max_size=8).filter(lambda n: "/" not in n)


@settings(max_examples=300, deadline=None)
@given(_names, _names, st.sampled_from(["things", "policies"]),
       st.sampled_from(["created", "next", "complete"]))
def test_ditto_a_subscriptions_base_classifies_as_its_kind(
    namespace: str, name: str, group: str, action: str
) -> None:
    """What the control path relies on: ``sub.base + action`` is a topic
    of the subscription's kind with that action (the full path's
    classification), for any names the client accepts."""
    client = DittoClient()
    client.subscribe_for_persisted_events(namespace, name, group=group)
    client.subscribe_search()
    for sub, kind in zip(client._pending.values(), (msg.Kind.STREAMING, msg.Kind.SEARCH),
                         strict=True):
        classified = msg.classify_topic(sub.base + action)
        assert isinstance(classified, msg.Classified)
        assert (classified.kind, classified.action) == (kind, action)
        assert sub.base == topic_base(sub.topic)


@pytest.mark.parametrize("text", [
    '{"topic":"a","headers":{"x":1},"path":"/","value":{}}',
    '{"topic":"a","value":{"subscriptionId":"1"}}',
])
def test_ditto_plain_messages_are_what_the_envelope_parses(text: str) -> None:
    parts = plain_message(text, 1000)
    assert parts is not None
    envelope = env.parse_envelope(text)
    assert parts is not None and parts[0] == envelope.topic and parts[2] == envelope.value
    assert env.headers_from_json(parts[1]) == envelope.headers


@pytest.mark.parametrize("text", [
    '{"topic":"a","headers":{"x":[1]},"value":{}}', '{"topic":"a","value":[]}',
    '{"topic":"a","value":{},"status":200}', '{"topic":1,"value":{}}', ' {"topic":"a"}',
    '{"topic":"a","value":{}} ', '{"topic":"a","path":1,"value":{}}', "", "[",
    '{"topic":"a","headers":null,"value":{}}', '{"topic":"a","value":{"x":NaN}}',
])
def test_ditto_plain_message_leaves_the_rest_to_the_full_path(text: str) -> None:
    assert plain_message(text, 1000) is None
    assert plain_message('{"topic":"a","value":{}}', 23) is None  # longer than that


# -- the server's control path: a request as clients write it ---------------------

SERVER_ENTITIES = ["ns/t/things/twin", "ns/u/things", "n.s/t:1/policies", "_/_/things/twin"]
_demands = st.sampled_from([1, 2, 5, 2**63 - 1, 2**63, 0, -1, "3", 1.5, True, None, [1]])
_request_mutations = {
    1: lambda t: t.replace("/request", "/cancel"),
    2: lambda t: t.replace('"subscriptionId":"', '"subscriptionId":"9'),
    3: lambda t: t[:-1] + ',"status":200}',
    4: lambda t: t.replace("ns/t/", "ns/v/"),
    5: lambda t: t + " ",
    6: lambda t: t.replace('"headers":{', '"headers":{"h":{"a":1},'),
    7: lambda t: t.replace('"path":"/"', '"path":"/x"'),
    8: lambda t: t.replace('"demand":', '"demand":-'),
}
_server_steps = st.lists(
    st.one_of(
        st.tuples(st.just("subscribe"), st.integers(0, len(SERVER_ENTITIES) - 1),
                  st.sampled_from([{}, {"correlation-id": "c-1"}])),
        st.tuples(st.just("accept"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("request"), st.integers(0, 5), _demands,
                  st.sampled_from([{}, CT, {"Correlation-Id": "c-2"}]),
                  st.sampled_from([0] * 6 + list(range(1, 9)))),
        st.tuples(st.just("signal"), st.integers(0, 5), st.sampled_from(["next", "complete"])),
        st.tuples(st.just("time"), st.sampled_from([1.0, 61.0, 1e6])),
    ),
    min_size=1, max_size=14,
)


class _Upstream:
    """A Publisher that records what its Subscriber asks."""

    def __init__(self) -> None:
        self.subscriber: Any = None
        self.asked: list[Any] = []

    def subscribe(self, subscriber: Any) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        self.asked.append(n)

    def cancel(self) -> None:
        self.asked.append("cancel")


def _server_subs(server: Any) -> list[tuple[Any, str, Any]]:
    """(kind, ID, subscription) of every subscription, histories first: the
    two kinds are numbered apart, so IDs repeat across them."""
    return [(kind, sid, sub) for kind, ids in ((msg.Kind.STREAMING, server._streams),
                                               (msg.Kind.SEARCH, server._searches))
            for sid, sub in ids.items()]


def _server_step(server: Any, step: tuple[Any, ...], fast: bool,
                 upstreams: dict[Any, _Upstream]) -> tuple[Any, ...]:
    subs = _server_subs(server)
    what = step[0]
    pick = subs[step[1] % len(subs)][:2] if subs and what not in ("subscribe", "time") else None
    error = None
    if what == "subscribe":
        action = "search/subscribe" if step[1] == 3 else "streaming/subscribeForPersistedEvents"
        topic = f"{SERVER_ENTITIES[step[1]]}/{action}"
        server.receive_message(_compact({"topic": topic, "headers": step[2], "path": "/",
                                         "value": {}}))
    elif what == "accept" and pick is not None:
        kind, sid = pick
        try:
            if step[2]:
                upstreams[pick] = _Upstream()
                server.accept(sid, upstreams[pick], kind=kind)
            else:
                server.reject(sid, env.DittoError(status=404, error="x", message="gone"),
                              kind=kind)
        except LocalProtocolError as exc:
            error = str(exc)
    elif what == "request" and pick is not None:
        kind, sid = pick
        sub = server._streams[sid] if kind is msg.Kind.STREAMING else server._searches[sid]
        text = _compact({"topic": sub.base + "request", "headers": step[3], "path": "/",
                         "value": {"subscriptionId": sid, "demand": step[2]}})
        text = _request_mutations[step[4]](text) if step[4] else text
        if fast:
            server.receive_message(text)
        else:
            server._receive(text)
    elif what == "signal" and pick in upstreams and upstreams[pick].subscriber is not None:
        subscriber = upstreams[pick].subscriber
        if step[2] == "next":
            subscriber.on_next({"revision": 1})
        else:
            subscriber.on_complete()
    elif what == "time":
        server.handle_timeout(step[1])
    return (error, server.messages_to_send(), list(server.events()),
            [(k, s.id, s.state, s.outstanding, s.pending_demand, s.headers, s.deadline)
             for k, _, s in _server_subs(server)],
            {key: up.asked for key, up in upstreams.items()}, sorted(server._timers))


@settings(max_examples=400, deadline=None)
@given(_server_steps)
def test_ditto_server_control_path_agrees_with_the_full_path(steps: list[Any]) -> None:
    from sansrs.ditto import DittoServer

    fast, full = DittoServer(), DittoServer()
    fast_up: dict[Any, _Upstream] = {}
    full_up: dict[Any, _Upstream] = {}
    for step in [("subscribe", 0, {}), ("accept", 0, True), *steps]:
        assert _server_step(fast, step, True, fast_up) == _server_step(full, step, False,
                                                                        full_up), step

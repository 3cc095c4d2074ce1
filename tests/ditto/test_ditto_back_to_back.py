"""Client and server cores wired back to back, plus arbitrary text never escaping the server."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs.ditto import DittoClient, DittoError, DittoException, DittoServer, Envelope, Headers
from sansrs.ditto.events import (
    NextReceived,
    PageReceived,
    SubscribeReceived,
    SubscriptionCompleted,
    SubscriptionFailed,
)
from sansrs.streams import error_publisher, from_generator, from_iterable, range_publisher
from tests.ditto.ditto_helpers import EXAMPLE_FILES


class Pair:
    def __init__(self, items: dict[str, Any]) -> None:
        self.client = DittoClient()
        self.server = DittoServer()
        self.items = items  # entity name -> Publisher
        self.client_events: list[Any] = []

    def pump(self) -> None:
        while True:
            moved = False
            for text in self.client.messages_to_send():
                self.server.receive_message(text)
                moved = True
            for event in self.server.events():
                if isinstance(event, SubscribeReceived):
                    publisher = self.items.get(event.topic.entity_name)
                    if publisher is None:
                        self.server.reject(
                            event.subscription_id,
                            DittoError(status=404, error="things:thing.notfound", message="no"),
                            kind=event.kind,
                        )
                    else:
                        self.server.accept(event.subscription_id, publisher, kind=event.kind)
            for text in self.server.messages_to_send():
                self.client.receive_message(text)
                moved = True
            self.client_events.extend(self.client.events())
            if not moved:
                return


def _history(n: int) -> list[Envelope]:
    return [
        Envelope(
            topic="org.eclipse.ditto/thing-2/things/twin/events/modified",
            headers=Headers({"correlation-id": f"e{i}"}),
            path="/attributes/counter",
            value=i,
            revision=i + 1,
            timestamp="2022-10-25T14:03:12.417Z",
        )
        for i in range(n)
    ]


def test_ditto_back_to_back_history_streams_with_backpressure() -> None:
    pair = Pair({"thing-2": from_iterable(_history(5))})
    pair.client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    pair.pump()
    sid = pair.client_events[0].subscription_id
    pair.client.request(sid, 2)
    pair.pump()
    nexts = [e for e in pair.client_events if isinstance(e, NextReceived)]
    assert [e.envelope.value for e in nexts] == [0, 1]
    pair.client.request(sid, 10)
    pair.pump()
    nexts = [e for e in pair.client_events if isinstance(e, NextReceived)]
    assert [e.envelope for e in nexts] == _history(5)
    assert isinstance(pair.client_events[-1], SubscriptionCompleted)


def test_ditto_back_to_back_cancel_closes_generator() -> None:
    closed = []

    def gen() -> Any:
        try:
            yield from range(1000)
        finally:
            closed.append(True)

    pair = Pair({"t": from_generator(gen)})
    pair.client.subscribe_for_persisted_events("ns", "t")
    pair.pump()
    pair.client.request("0", 3)
    pair.pump()
    pair.client.cancel("0")
    pair.pump()
    assert closed == [True]
    assert len([e for e in pair.client_events if isinstance(e, NextReceived)]) == 3


def test_ditto_back_to_back_not_found_thing_fails_only_after_request() -> None:
    pair = Pair({})
    pair.client.subscribe_for_persisted_events("ns", "missing")
    pair.pump()
    assert len(pair.client_events) == 1  # created only
    pair.client.request("0", 1)
    pair.pump()
    failed = pair.client_events[-1]
    assert isinstance(failed, SubscriptionFailed)
    assert failed.error.exception().error_code == 404


def test_ditto_back_to_back_publisher_failure_and_many_subscriptions() -> None:
    boom = DittoException(DittoError(status=503, error="x.unavailable", message="later"))
    pair = Pair({"bad": error_publisher(boom), "inf": range_publisher(0)})
    pair.client.subscribe_for_persisted_events("ns", "bad")
    for _ in range(3):
        pair.client.subscribe_for_persisted_events("ns", "inf")
    pair.pump()
    for sid in ("0", "1", "2", "3"):
        pair.client.request(sid, 4)
    pair.pump()
    failed = [e for e in pair.client_events if isinstance(e, SubscriptionFailed)]
    assert [f.error.status for f in failed] == [503]
    nexts = [e for e in pair.client_events if isinstance(e, NextReceived)]
    assert len(nexts) == 12  # 4 per infinite stream, never more


def test_ditto_back_to_back_search_pages() -> None:
    client, server = DittoClient(), DittoServer()
    client.subscribe_search(filter="exists(thingId)", options="size(2)")
    for text in client.messages_to_send():
        server.receive_message(text)
    (event,) = list(server.events())
    assert isinstance(event, SubscribeReceived)
    server.accept(
        event.subscription_id, from_iterable([[{"thingId": "a:1"}], [{"thingId": "a:2"}]])
    )
    for text in server.messages_to_send():
        client.receive_message(text)
    client.request("0", 1)
    for text in client.messages_to_send():
        server.receive_message(text)
    for text in server.messages_to_send():
        client.receive_message(text)
    pages = [e for e in client.events() if isinstance(e, PageReceived)]
    assert [p.items for p in pages] == [({"thingId": "a:1"},)]


_SEEDS = [p.read_text(encoding="utf-8") for p in EXAMPLE_FILES]


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(
        st.one_of(
            st.text(max_size=60),
            st.sampled_from(_SEEDS),
            st.builds(
                lambda seed, cut, junk: seed[:cut] + junk + seed[cut:],
                st.sampled_from(_SEEDS),
                st.integers(0, 400),
                st.text(max_size=8),
            ),
        ),
        max_size=8,
    ),
    now=st.floats(0, 200),
)
def test_ditto_server_never_raises_on_arbitrary_text(texts: list[str], now: float) -> None:
    server = DittoServer()
    for text in texts:
        server.receive_message(text, now=now)
        for event in server.events():
            if isinstance(event, SubscribeReceived):
                server.accept(event.subscription_id, range_publisher(0, 3), kind=event.kind)
        server.handle_timeout(now)
    for message in server.messages_to_send():
        message.encode("utf-8")

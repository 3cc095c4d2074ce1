"""The server core's timer heap stays small however many items share one ``now``."""

from __future__ import annotations

from sansrs.ditto import DittoServer, DittoServerConfig
from sansrs.ditto.events import SubscribeReceived, SubscriptionClosed
from sansrs.streams import from_iterable
from tests.ditto.ditto_helpers import drain, request_text, subscribe_text


def test_ditto_items_at_one_instant_keep_the_timer_heap_bounded() -> None:
    # Regression: every `next` sent at the same `now` used to push a duplicate
    # timer entry that compaction could not drop, so compaction ran on every
    # item (quadratic in the items per batch).
    server = DittoServer(DittoServerConfig(idle_timeout=60.0))
    server.receive_message(subscribe_text(), now=5.0)
    (event,) = [e for e in drain(server) if isinstance(e, SubscribeReceived)]
    sid = event.subscription_id
    server.accept(sid, from_iterable(range(30_000)))  # not exhausted
    server.receive_message(request_text(sid, 20_000), now=5.0)
    assert len(server._timers) <= 2
    assert server.next_deadline() == 65.0
    nexts = [m for m in server.messages_to_send() if '/next"' in m or "streaming/next" in m]
    assert len(nexts) == 20_000


def test_ditto_idle_deadline_moves_with_interaction_at_later_instants() -> None:
    server = DittoServer(DittoServerConfig(idle_timeout=10.0))
    server.receive_message(subscribe_text(), now=0.0)
    (event,) = [e for e in drain(server) if isinstance(e, SubscribeReceived)]
    sid = event.subscription_id
    server.accept(sid, from_iterable(range(100)))
    for now in (1.0, 2.0, 3.0):
        server.receive_message(request_text(sid, 1), now=now)
        assert server.next_deadline() == now + 10.0
    server.handle_timeout(12.9)
    assert not any(isinstance(e, SubscriptionClosed) for e in drain(server))

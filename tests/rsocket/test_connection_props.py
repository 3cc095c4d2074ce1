"""Property test: random application intents on both ends of a pair, random
chunking between them. Never anything but ``LocalProtocolError`` for an
invalid intent; never a credit, lease or stream-lifetime violation seen by
the receiving end; never a ``RemoteProtocolError`` between honest peers."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sansrs import LocalProtocolError
from sansrs.rsocket import MAX_REQUEST_N, Connection, ConnectionConfig, ErrorCode
from sansrs.rsocket.events import (
    CancelReceived,
    ErrorReceived,
    Event,
    FireAndForgetReceived,
    LeaseReceived,
    PayloadReceived,
    RequestChannelReceived,
    RequestNReceived,
    RequestResponseReceived,
    RequestStreamReceived,
)
from tests.rsocket.pair import Pair, sized

STREAM_EVENTS = (PayloadReceived, ErrorReceived, CancelReceived, RequestNReceived)

ACTIONS = [
    "request_response",
    "request_fnf",
    "request_stream",
    "request_channel",
    "send_payload",
    "send_complete",
    "send_error",
    "request_n",
    "cancel",
    "metadata_push",
    "send_lease",
    "pump",
]


class Model:
    """What each receiving end may see, from the intents that succeeded."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.granted: dict[tuple[int, int], int] = defaultdict(int)  # (receiver, sid)
        self.received: dict[tuple[int, int], int] = defaultdict(int)
        self.done_in: set[tuple[int, int]] = set()  # completed inbound flows
        self.dead: set[tuple[int, int]] = set()  # terminated by ERROR
        self.sids: list[int] = []
        # Requests each end's lease still allows (None: no lease in use).
        self.lease_left: dict[int, int] | None = None

    def requested(self, conn: Connection) -> None:
        if self.lease_left is not None:
            self.lease_left[id(conn)] -= 1
            assert self.lease_left[id(conn)] >= 0, "a request beyond the lease was sent"

    def grant(self, receiver: Connection, sid: int, n: int) -> None:
        self.granted[(id(receiver), sid)] += n

    def check(self, conn: Connection, events: list[Event]) -> None:
        for ev in events:
            if isinstance(ev, LeaseReceived) and self.lease_left is not None:
                self.lease_left[id(conn)] = ev.number_of_requests
            if isinstance(ev, (RequestResponseReceived, RequestStreamReceived)):
                if isinstance(ev, RequestResponseReceived):
                    self.grant(self.peer(conn), ev.stream_id, 1)
                self.sids.append(ev.stream_id)
            elif isinstance(ev, (RequestChannelReceived, FireAndForgetReceived)):
                self.sids.append(ev.stream_id)
            if not isinstance(ev, STREAM_EVENTS):
                continue
            key = (id(conn), ev.stream_id)
            assert key not in self.dead, f"{ev} after the stream's ERROR"
            if isinstance(ev, ErrorReceived):
                self.dead.add(key)
            if isinstance(ev, PayloadReceived):
                assert key not in self.done_in, f"{ev} after the flow completed"
                if ev.next:
                    self.received[key] += 1
                    granted = self.granted[key]
                    assert granted >= MAX_REQUEST_N or self.received[key] <= granted, (
                        f"credit violated on {key}: {self.received[key]} > {granted}"
                    )
                if ev.complete:
                    self.done_in.add(key)

    def peer(self, conn: Connection) -> Connection:
        return self.pair.server if conn is self.pair.client else self.pair.client


def run(pair: Pair, data: st.DataObject, lease: int | None) -> None:
    model = Model(pair)
    if lease is not None:
        model.lease_left = {id(pair.client): lease, id(pair.server): 0}
    ends = [pair.client, pair.server]
    for _ in range(data.draw(st.integers(5, 40), label="steps")):
        action = data.draw(st.sampled_from(ACTIONS), label="action")
        me = data.draw(st.sampled_from(ends), label="end")
        sid = data.draw(st.sampled_from(model.sids) if model.sids else st.just(1), label="sid")
        n = data.draw(st.sampled_from([1, 2, 3, MAX_REQUEST_N]), label="n")
        try:
            if action == "pump":
                pair.chunker = sized(data.draw(st.integers(1, 64), label="chunk"))
                pair.pump()
                for conn, evs in (
                    (pair.client, pair.client_events),
                    (pair.server, pair.server_events),
                ):
                    model.check(conn, evs)
                pair.take()
                continue
            call: Any = getattr(me, action)
            if action in ("request_response", "request_fnf"):
                new = call(b"q")
                model.requested(me)
                if action == "request_response":
                    model.grant(me, new, 1)
                model.sids.append(new)
            elif action == "request_stream":
                new = call(b"q", initial_n=n)
                model.requested(me)
                model.grant(me, new, n)
                model.sids.append(new)
            elif action == "request_channel":
                new = call(b"q", initial_n=n, complete=data.draw(st.booleans(), label="c"))
                model.requested(me)
                model.grant(me, new, n)
                model.sids.append(new)
            elif action == "send_payload":
                call(sid, b"p", None, data.draw(st.booleans(), label="complete"))
            elif action in ("send_complete", "cancel"):
                call(sid)
            elif action == "send_error":
                call(sid, ErrorCode.APPLICATION_ERROR, "e")
            elif action == "request_n":
                call(sid, n)
                model.grant(me, sid, n)
            elif action == "metadata_push":
                call(b"m")
            elif action == "send_lease":
                call(1000, data.draw(st.integers(0, 3), label="lease_n"))
        except LocalProtocolError:
            pass
    pair.chunker = sized(3)
    pair.pump()
    model.check(pair.client, pair.client_events)
    model.check(pair.server, pair.server_events)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_intents_never_violate_credit_or_lifetimes(data: st.DataObject) -> None:
    pair = Pair.established()
    run(pair, data, lease=None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_intents_with_lease_and_fragmentation(data: st.DataObject) -> None:
    config = ConnectionConfig(fragment_size=64)
    pair = Pair.established(client_config=config, server_config=config, lease=(60_000, 4))
    run(pair, data, lease=4)

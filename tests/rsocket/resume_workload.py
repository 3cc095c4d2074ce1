"""A mixed workload on a ``ResumePair`` cut at random byte offsets.

A request-stream (server to client), a channel carrying items both ways and
request-responses started at random moments run while the transport is cut
``cuts`` times (at random offsets of the bytes in flight each way, so frames
break anywhere) and resumed. ``run`` returns what each end received, for
exactly-once-in-order checks. Randomness comes from the ``random.Random``
given (hypothesis passes its own).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sansrs.rsocket import Connection, StreamState
from sansrs.rsocket.events import (
    ConnectionLost,
    ConnectionTerminated,
    Event,
    PayloadReceived,
    RequestChannelReceived,
    RequestResponseReceived,
    RequestStreamReceived,
)
from tests.rsocket.resume_pair import ResumePair

WINDOW = 64  # credit granted per REQUEST_N


def item(prefix: bytes, i: int) -> bytes:
    return b"%s%d" % (prefix, i)


@dataclass
class Outcome:
    stream: list[bytes] = field(default_factory=list)  # server -> client
    channel_in: list[bytes] = field(default_factory=list)  # server -> client
    channel_out: list[bytes] = field(default_factory=list)  # client -> server, at the server
    stream_done: bool = False
    channel_in_done: bool = False
    channel_out_done: bool = False
    responses: dict[int, list[bytes]] = field(default_factory=dict)  # rr sid -> responses
    requests_sent: int = 0
    cuts: int = 0
    terminal: list[Event] = field(default_factory=list)


class _Flow:
    """One direction of items: how many sent, the consumer's credit bookkeeping."""

    def __init__(self, prefix: bytes, total: int) -> None:
        self.prefix = prefix
        self.total = total
        self.sent = 0
        self.consumed_since_grant = 0

    def send(self, conn: Connection, sid: int | None, budget: int) -> None:
        if sid is None:
            return
        while self.sent < self.total and budget > 0 and conn.send_credit(sid) > 0:
            last = self.sent == self.total - 1
            conn.send_payload(sid, item(self.prefix, self.sent), complete=last)
            self.sent += 1
            budget -= 1

    def consumed(self, conn: Connection, sid: int, done: bool) -> None:
        self.consumed_since_grant += 1
        receiving = conn.stream_state(sid) in (StreamState.BOTH_OPEN, StreamState.IN_ONLY)
        if self.consumed_since_grant >= WINDOW // 2 and not done and receiving:
            # (The core may already have seen the end of the flow in this read.)
            conn.request_n(sid, self.consumed_since_grant)
            self.consumed_since_grant = 0


def run(
    rng: random.Random,
    pair: ResumePair,
    *,
    stream_items: int,
    channel_items: int,
    requests: int,
    cuts: int,
    batch: int = 32,
) -> Outcome:
    out = Outcome()
    client = pair.client
    stream_sid = client.request_stream(b"s", initial_n=WINDOW)
    # The channel's first item travels in REQUEST_CHANNEL (item 0).
    chan_sid = client.request_channel(item(b"u", 0), initial_n=WINDOW)
    up = _Flow(b"u", channel_items)
    up.sent = 1
    down_stream = _Flow(b"s", stream_items)
    down_chan = _Flow(b"d", channel_items)
    # Consumers: REQUEST_N as items are taken.
    stream_consumer = _Flow(b"", 0)
    chan_consumer = _Flow(b"", 0)
    down_chan_consumer = _Flow(b"", 0)
    rr_sids: list[int] = []
    server_stream: int | None = None
    server_chan: int | None = None
    cut_every = max(1, max(stream_items, channel_items) // (batch * (cuts + 1)))
    turn = 0
    while True:
        turn += 1
        client_events, server_events = pair.take()
        for ev in server_events:
            if isinstance(ev, RequestStreamReceived):
                server_stream = ev.stream_id
            elif isinstance(ev, RequestChannelReceived):
                server_chan = ev.stream_id
                out.channel_out.append(ev.data)
                pair.server.request_n(server_chan, WINDOW)
            elif isinstance(ev, RequestResponseReceived):
                pair.server.send_payload(ev.stream_id, b"re:" + ev.data)
            elif isinstance(ev, PayloadReceived) and ev.stream_id == server_chan:
                if ev.next:
                    out.channel_out.append(ev.data)
                out.channel_out_done |= ev.complete
                if ev.next:
                    down_chan_consumer.consumed(pair.server, ev.stream_id, ev.complete)
            elif isinstance(ev, (ConnectionTerminated, ConnectionLost)):
                out.terminal.append(ev)
        for ev in client_events:
            if isinstance(ev, PayloadReceived):
                if ev.stream_id == stream_sid:
                    if ev.next:
                        out.stream.append(ev.data)
                        stream_consumer.consumed(pair.client, stream_sid, ev.complete)
                    out.stream_done |= ev.complete
                elif ev.stream_id == chan_sid:
                    if ev.next:
                        out.channel_in.append(ev.data)
                        chan_consumer.consumed(pair.client, chan_sid, ev.complete)
                    out.channel_in_done |= ev.complete
                else:
                    out.responses.setdefault(ev.stream_id, []).append(ev.data)
            elif isinstance(ev, (ConnectionTerminated, ConnectionLost)):
                out.terminal.append(ev)
        if out.terminal:
            return out
        done = out.stream_done and out.channel_in_done and out.channel_out_done
        if (
            done
            and out.requests_sent == requests
            and all(out.responses.get(sid) for sid in rr_sids)
        ):
            return out
        down_stream.send(pair.server, server_stream, batch)
        down_chan.send(pair.server, server_chan, batch)
        up.send(pair.client, chan_sid, batch)
        if out.requests_sent < requests and rng.random() < 0.3:
            rr_sids.append(pair.client.request_response(item(b"q", out.requests_sent)))
            out.requests_sent += 1
        if out.cuts < cuts and turn % cut_every == 0:
            to_server, to_client = pair.in_flight()
            pair.cut(rng.randint(0, to_server), rng.randint(0, to_client))
            out.cuts += 1
            pair.resume()
        else:
            pair.pump()

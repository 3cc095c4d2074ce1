"""The rsio connection: one test per rule of the draft, per Reactive Streams
rule it enforces on the wire, and per documented choice
(docs/protocols/rsio.md; tests cite its sections as test_rsio_<section>_...)."""

from __future__ import annotations

import pytest

from sansrs.rsio import (
    MAX_VARINT,
    ClientHello,
    Connection,
    ConnectionConfig,
    ConnectionState,
    ErrorCode,
    Goodbye,
    GoodbyeAck,
    LocalProtocolError,
    OnComplete,
    OnError,
    OnNext,
    OnNextLastPart,
    OnNextPacked,
    OnNextPart,
    OnSubscribe,
    RemoteProtocolError,
    Role,
    ServerHello,
    Subscribe,
    SubscriptionState,
    decode_message,
    encode_message,
)
from sansrs.rsio import events as ev
from tests.rsio.rsio_pair import Pair, kinds

SERVER_HELLO = encode_message(ServerHello(0))
CLIENT_HELLO = encode_message(ClientHello(0))


def client_after_hello() -> Connection:
    c = Connection(Role.CLIENT)
    c.data_to_send()
    c.receive_data(SERVER_HELLO)
    c.events()
    return c


def messages(data: bytes, size: int = 0) -> list[object]:
    out = []
    pos = 0
    while pos < len(data):
        msg, pos = decode_message(data, pos, lambda sid: size)
        out.append(msg)
    return out


def expect_error(conn: Connection, data: bytes, code: ErrorCode) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        conn.receive_data(data)
    assert info.value.error_code == code
    assert conn.state is ConnectionState.CLOSED
    out = messages(conn.data_to_send())
    assert isinstance(out[-1], Goodbye)
    assert out[-1].reason.startswith("protocol error: ")
    closed = conn.events()[-1]
    assert isinstance(closed, ev.ConnectionTerminated)
    assert closed.error_code == code
    assert not closed.by_peer
    # Later input re-raises the same error; nothing else escapes.
    with pytest.raises(RemoteProtocolError):
        conn.receive_data(b"\x25\x01")
    return info.value


def subscribed_client(size: int = 0, demand: int = 10) -> tuple[Connection, int]:
    c = client_after_hello()
    sid = c.subscribe("p", demand)
    c.receive_data(encode_message(OnSubscribe(sid, size)))
    c.events()
    c.data_to_send()
    return c, sid


# -- §4 handshake ------------------------------------------------------------------


def test_rsio_4_each_side_sends_its_hello_first() -> None:
    assert messages(Connection(Role.CLIENT).data_to_send()) == [ClientHello(0, ())]
    assert messages(Connection(Role.SERVER).data_to_send()) == [ServerHello(0, ())]
    cfg = ConnectionConfig(extensions=(7, 300))
    assert messages(Connection(Role.SERVER, cfg).data_to_send()) == [ServerHello(0, (7, 300))]


def test_rsio_4_loose_handshake_server_does_not_wait() -> None:
    p = Pair()
    assert p.server.data_to_send() == SERVER_HELLO  # before any clientHello
    p.server._out.queue(SERVER_HELLO)  # put it back for the pump
    p.pump()
    assert p.client_events == [ev.HelloReceived(version=0, extensions=())]
    assert p.client.state is p.server.state is ConnectionState.OPEN


def test_rsio_4_hello_extensions_are_recorded() -> None:
    c = Connection(Role.CLIENT)
    c.receive_data(encode_message(ServerHello(0, (1, 2**40))))
    assert c.events() == [ev.HelloReceived(version=0, extensions=(1, 2**40))]
    assert c.peer_hello == ServerHello(0, (1, 2**40))


def test_rsio_draft_version_mismatch_must_send_goodbye_and_close() -> None:
    c = Connection(Role.CLIENT)
    c.data_to_send()
    err = expect_error(c, encode_message(ServerHello(1)), ErrorCode.UNSUPPORTED_VERSION)
    assert "unsupported version 1" in err.message


def test_rsio_draft_client_may_send_optimistically_after_client_hello() -> None:
    c = Connection(Role.CLIENT)
    sid = c.subscribe("p", 3)  # before any serverHello
    s = Connection(Role.SERVER)
    s.receive_data(c.data_to_send())
    assert s.events() == [
        ev.HelloReceived(version=0, extensions=()),
        ev.SubscribeReceived(subscriber_id=sid, publisher="p", initial_demand=3),
    ]


def test_rsio_4_2_server_may_send_optimistically_too() -> None:
    s = Connection(Role.SERVER)
    sid = s.subscribe("from-server", 1)
    c = Connection(Role.CLIENT)
    c.receive_data(s.data_to_send())
    assert kinds(c.events()) == ["HelloReceived", "SubscribeReceived"]
    assert c.publication_state(sid).value == "subscribed"


@pytest.mark.parametrize(
    "first", [encode_message(Subscribe("p", 1)), b"\x25\x01", encode_message(GoodbyeAck(""))]
)
def test_rsio_4_first_message_must_be_the_hello(first: bytes) -> None:
    s = Connection(Role.SERVER)
    expect_error(s, first, ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_4_second_hello_is_an_error() -> None:
    c = client_after_hello()
    expect_error(c, SERVER_HELLO, ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_4_hello_of_the_wrong_kind_is_an_error() -> None:
    expect_error(Connection(Role.CLIENT), CLIENT_HELLO, ErrorCode.UNEXPECTED_MESSAGE)
    expect_error(Connection(Role.SERVER), SERVER_HELLO, ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_4_goodbye_instead_of_hello_is_accepted() -> None:
    c = Connection(Role.CLIENT)
    c.data_to_send()
    c.receive_data(encode_message(Goodbye("go away")))
    assert c.events() == [ev.ConnectionTerminated(reason="go away", by_peer=True, error_code=0)]
    assert messages(c.data_to_send()) == [GoodbyeAck("")]


# -- §5 subscriptions --------------------------------------------------------------


def test_rsio_draft_fully_bidirectional_both_sides_publish_and_subscribe() -> None:
    p = Pair()
    a = p.client.subscribe("on-server", 2)
    b = p.server.subscribe("on-client", 2)
    p.pump()
    p.server.send_on_subscribe(a)
    p.client.send_on_subscribe(b)
    p.server.send_next(a, b"s1")
    p.client.send_next(b, b"c1")
    p.server.send_complete(a)
    p.client.send_complete(b)
    p.pump()
    c_events, s_events = p.take()
    assert ev.NextReceived(subscriber_id=a, element=b"s1") in c_events
    assert ev.NextReceived(subscriber_id=b, element=b"c1") in s_events
    assert ev.CompleteReceived(subscriber_id=a) in c_events
    assert ev.CompleteReceived(subscriber_id=b) in s_events


def test_rsio_5_1_subscriber_ids_are_allocated_increasing() -> None:
    c = client_after_hello()
    assert [c.subscribe("p") for _ in range(3)] == [1, 2, 3]


def test_rsio_5_1_subscribe_on_an_id_in_use_is_a_protocol_error() -> None:
    s = Connection(Role.SERVER)
    s.receive_data(CLIENT_HELLO + encode_message(Subscribe("p", 9)))
    expect_error(s, encode_message(Subscribe("q", 9)), ErrorCode.UNEXPECTED_MESSAGE)


def _server_with(sid: int) -> Connection:
    s = Connection(Role.SERVER)
    s.receive_data(CLIENT_HELLO + encode_message(Subscribe("p", sid, 1)))
    s.events()
    s.send_on_subscribe(sid)
    s.data_to_send()
    return s


def test_rsio_draft_subscriber_may_reuse_id_after_cancel() -> None:
    s = _server_with(9)
    s.receive_data(b"\x12\x09" + encode_message(Subscribe("again", 9, 2)))
    assert s.events() == [
        ev.CancelReceived(subscriber_id=9),
        ev.SubscribeReceived(subscriber_id=9, publisher="again", initial_demand=2),
    ]


def test_rsio_draft_subscriber_may_reuse_id_after_on_complete_or_on_error() -> None:
    s = _server_with(9)
    s.send_complete(9)
    s.receive_data(encode_message(Subscribe("again", 9)))
    assert kinds(s.events()) == ["SubscribeReceived"]
    s.send_error(9, "no")
    s.receive_data(encode_message(Subscribe("third", 9)))
    assert kinds(s.events()) == ["SubscribeReceived"]


def test_rs_1_9_on_subscribe_must_come_first() -> None:
    for msg in (OnNext(1, b"x"), OnComplete(1), OnError(1, "e"), OnNextLastPart(1, 0, b"x")):
        c = client_after_hello()
        c.subscribe("p", 5)
        expect_error(c, encode_message(msg), ErrorCode.UNEXPECTED_MESSAGE)


def test_rs_1_9_second_on_subscribe_is_an_error() -> None:
    c, sid = subscribed_client()
    expect_error(c, encode_message(OnSubscribe(sid, 0)), ErrorCode.UNEXPECTED_MESSAGE)


def test_rs_1_9_publisher_cannot_send_before_on_subscribe() -> None:
    s = Connection(Role.SERVER)
    s.receive_data(CLIENT_HELLO + encode_message(Subscribe("p", 1, 5)))
    with pytest.raises(LocalProtocolError, match=r"1\.9"):
        s.send_next(1, b"x")
    s.send_on_subscribe(1)
    with pytest.raises(LocalProtocolError, match=r"1\.9"):
        s.send_on_subscribe(1)


@pytest.mark.parametrize("terminal", ["complete", "error"])
def test_rs_1_9_terminal_before_on_subscribe_sends_on_subscribe_first(terminal: str) -> None:
    s = Connection(Role.SERVER)
    s.receive_data(CLIENT_HELLO + encode_message(Subscribe("p", 4)))
    s.data_to_send()
    if terminal == "complete":
        s.send_complete(4)
        assert messages(s.data_to_send()) == [OnSubscribe(4, 0), OnComplete(4)]
    else:
        s.send_error(4, "no such publisher")
        assert messages(s.data_to_send()) == [OnSubscribe(4, 0), OnError(4, "no such publisher")]


def test_rs_1_1_on_next_beyond_demand_is_a_protocol_error() -> None:
    c, sid = subscribed_client(demand=2)
    c.receive_data(encode_message(OnNext(sid, b"a")) * 2)
    assert len(c.events()) == 2
    expect_error(c, encode_message(OnNext(sid, b"a")), ErrorCode.DEMAND_EXCEEDED)


def test_rs_1_1_packed_beyond_demand_is_a_protocol_error() -> None:
    c, sid = subscribed_client(size=1, demand=2)
    expect_error(c, encode_message(OnNextPacked(sid, b"abc"), 1), ErrorCode.DEMAND_EXCEEDED)


def test_rs_1_1_split_element_beyond_demand_is_a_protocol_error() -> None:
    c, sid = subscribed_client(demand=0)
    expect_error(c, encode_message(OnNextPart(sid, 0, b"ab")), ErrorCode.DEMAND_EXCEEDED)


def test_rs_1_1_publisher_cannot_send_beyond_demand() -> None:
    s = _server_with(3)  # demand 1
    s.send_next(3, b"x")
    with pytest.raises(LocalProtocolError, match=r"1\.1"):
        s.send_next(3, b"y")
    s.receive_data(b"\x11\x03\x02")  # request 2
    assert s.events() == [ev.RequestReceived(subscriber_id=3, demand=2)]
    s.send_next(3, b"y")
    s.send_next(3, b"z")
    with pytest.raises(LocalProtocolError, match=r"1\.1"):
        s.send_next(3, b"w")


def test_rsio_5_3_initial_demand_counts_like_a_request() -> None:
    c, sid = subscribed_client(demand=3)
    assert c.demand_of(sid) == 3
    c.request(sid, 4)
    assert c.demand_of(sid) == 7
    assert messages(c.data_to_send()) == [messages(b"\x11\x01\x04")[0]]


def test_rs_3_9_request_zero_is_answered_with_on_error() -> None:
    s = _server_with(3)
    s.receive_data(b"\x11\x03\x00")
    (event,) = s.events()
    assert isinstance(event, ev.InvalidRequestReceived)
    (msg,) = messages(s.data_to_send())
    assert isinstance(msg, OnError)
    assert msg.error.startswith("Rule 3.9")
    assert s.state is ConnectionState.OPEN  # not a connection error
    with pytest.raises(LocalProtocolError):
        s.send_next(3, b"x")


def test_rs_3_9_request_zero_before_on_subscribe_sends_on_subscribe_first() -> None:
    s = Connection(Role.SERVER)
    s.receive_data(CLIENT_HELLO + encode_message(Subscribe("p", 2)))
    s.data_to_send()
    s.receive_data(b"\x11\x02\x00")
    out = messages(s.data_to_send())
    assert isinstance(out[0], OnSubscribe)
    assert isinstance(out[1], OnError)


@pytest.mark.parametrize("n", [0, -1, 1.5, None, True])
def test_rs_3_9_non_positive_request_cannot_be_encoded(n: object) -> None:
    c, sid = subscribed_client()
    with pytest.raises(LocalProtocolError):
        c.request(sid, n)  # type: ignore[arg-type]


def test_rs_3_17_demand_saturates_at_2_63_minus_1_and_is_unbounded() -> None:
    p = Pair()
    sid = p.subscribed(demand=MAX_VARINT - 1)
    p.client.request(sid, MAX_VARINT)
    p.client.request(sid, 5)  # already unbounded: nothing more is sent
    p.pump()
    assert p.client.demand_of(sid) == MAX_VARINT
    assert p.server.demand_of(sid) == MAX_VARINT
    for _ in range(3):
        p.server.send_next(sid, b"x")
    p.pump()
    assert p.client.demand_of(sid) == p.server.demand_of(sid) == MAX_VARINT
    assert [m for d, m in p.wire if d == "c2s"][-1] == b"\x11\x01" + b"\xff" * 8 + b"\x7f"


def test_rs_1_7_nothing_after_a_terminal_signal() -> None:
    s = _server_with(3)
    s.send_complete(3)
    for call in (lambda: s.send_next(3, b"x"), lambda: s.send_complete(3)):
        with pytest.raises(LocalProtocolError):
            call()
    c, sid = subscribed_client()
    c.receive_data(encode_message(OnComplete(sid)) + encode_message(OnNext(sid, b"late")))
    assert c.events() == [ev.CompleteReceived(subscriber_id=sid)]  # the late one is ignored
    with pytest.raises(LocalProtocolError):
        c.request(sid, 1)


def test_rsio_5_3_request_or_cancel_for_unknown_id_is_ignored() -> None:
    s = Connection(Role.SERVER)
    s.receive_data(CLIENT_HELLO + b"\x11\x63\x01\x12\x63")
    assert kinds(s.events()) == ["HelloReceived"]
    assert s.state is ConnectionState.OPEN


def test_rs_3_12_messages_crossing_a_cancel_are_ignored() -> None:
    p = Pair()
    sid = p.subscribed(demand=5)
    p.server.send_next(sid, b"in flight")
    p.client.cancel(sid)
    p.pump()
    c_events, s_events = p.take()
    assert c_events == []
    assert s_events == [ev.CancelReceived(subscriber_id=sid)]
    assert p.client.subscription_state(sid) is SubscriptionState.CLOSED


def test_rsio_5_4_fixed_size_tombstone_keeps_parsing_after_cancel() -> None:
    c, sid = subscribed_client(size=4, demand=5)
    c.cancel(sid)
    assert c.subscription_state(sid) is SubscriptionState.CANCELLED
    late = encode_message(OnNext(sid, b"abcd"), 4) + encode_message(OnNextPacked(sid, b"x" * 8), 4)
    c.receive_data(late + encode_message(OnComplete(sid)))
    assert c.events() == []
    assert c.subscription_state(sid) is SubscriptionState.CLOSED  # tombstone dropped


def test_rsio_5_4_cancel_before_on_subscribe_learns_the_size_later() -> None:
    c = client_after_hello()
    sid = c.subscribe("p", 5)
    c.cancel(sid)
    c.receive_data(encode_message(OnSubscribe(sid, 2)) + encode_message(OnNext(sid, b"ab"), 2))
    assert c.events() == []
    c2 = client_after_hello()
    sid = c2.subscribe("p", 5)
    c2.cancel(sid)
    c2.receive_data(encode_message(OnSubscribe(sid, 0)) + encode_message(OnNext(sid, b"abc")))
    assert c2.subscription_state(sid) is SubscriptionState.CLOSED  # variable: no tombstone


def test_rsio_5_4_tombstones_are_bounded() -> None:
    c = Connection(Role.CLIENT, ConnectionConfig(max_cancelled=2))
    c.receive_data(SERVER_HELLO)
    sids = [c.subscribe("p") for _ in range(3)]
    c.cancel(sids[0])
    c.cancel(sids[1])
    with pytest.raises(LocalProtocolError, match="max_cancelled"):
        c.cancel(sids[2])
    c.receive_data(encode_message(OnSubscribe(sids[0], 0)))  # variable size: freed
    c.cancel(sids[2])


def test_rsio_5_5_message_for_an_id_never_used_is_an_error() -> None:
    c, sid = subscribed_client()
    expect_error(c, encode_message(OnNext(sid + 1, b"x")), ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_5_5_packed_for_a_closed_variable_id_is_an_error() -> None:
    c, sid = subscribed_client()
    c.receive_data(encode_message(OnComplete(sid)))
    expect_error(c, b"\x22" + bytes((sid,)) + b"\x01x", ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_9_subscriptions_beyond_the_limit_are_refused_not_fatal() -> None:
    s = Connection(Role.SERVER, ConnectionConfig(max_subscriptions=1))
    s.data_to_send()
    subscribes = encode_message(Subscribe("p", 1)) + encode_message(Subscribe("p", 2))
    s.receive_data(CLIENT_HELLO + subscribes)
    assert kinds(s.events()) == ["HelloReceived", "SubscribeReceived"]
    assert messages(s.data_to_send()) == [
        OnSubscribe(2, 0),
        OnError(2, "too many subscriptions on this connection"),
    ]
    assert s.state is ConnectionState.OPEN


# -- §6 fixed size, packing, splitting -----------------------------------------------


def test_rsio_6_1_fixed_size_elements_and_packed_count_demand_per_element() -> None:
    p = Pair()
    sid = p.subscribed(demand=10, element_size=8)
    p.server.send_next(sid, b"12345678")
    p.server.send_packed(sid, bytes(range(72)))  # 9 elements
    with pytest.raises(LocalProtocolError, match=r"1\.1"):
        p.server.send_packed(sid, bytes(8))
    p.pump()
    c_events, _ = p.take()
    assert c_events[0] == ev.NextReceived(subscriber_id=sid, element=b"12345678")
    packed = c_events[1]
    assert isinstance(packed, ev.NextPackedReceived)
    assert packed.count == 9
    assert packed.split()[8] == bytes(range(64, 72))
    assert p.client.demand_of(sid) == 0
    assert p.wire[-1][1][:3] == b"\x21\x01" + b"1"  # no length prefix


def test_rsio_6_1_publisher_enforces_the_element_size() -> None:
    p = Pair()
    sid = p.subscribed(demand=10, element_size=8)
    with pytest.raises(LocalProtocolError):
        p.server.send_next(sid, b"short")
    with pytest.raises(LocalProtocolError):
        p.server.send_packed(sid, bytes(12))
    sid2 = p.subscribed(demand=10)
    with pytest.raises(LocalProtocolError, match="fixed-size"):
        p.server.send_packed(sid2, bytes(8))


def test_rsio_6_1_packed_on_a_variable_size_subscription_is_an_error() -> None:
    c, _ = subscribed_client(size=0)
    expect_error(c, b"\x22\x01\x01a", ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_6_1_packed_count_zero_is_malformed() -> None:
    c, _ = subscribed_client(size=2)
    expect_error(c, b"\x22\x01\x00", ErrorCode.MALFORMED)


def test_rsio_6_1_large_packed_payloads_are_sent_in_several_messages() -> None:
    cfg = ConnectionConfig(max_message_size=64)
    p = Pair(server_config=cfg, client_config=cfg)
    sid = p.subscribed(demand=100, element_size=8)
    p.server.send_packed(sid, bytes(8 * 20))  # 8 per message at most
    p.pump()
    c_events, _ = p.take()
    assert [e.count for e in c_events] == [8, 8, 4]  # type: ignore[union-attr]


def test_rsio_draft_subscribers_must_support_split_elements() -> None:
    cfg = ConnectionConfig(split_size=10)
    p = Pair(server_config=cfg)
    sid = p.subscribed(demand=2)
    element = bytes(range(25))
    p.server.send_next(sid, element)
    out = messages(p.server.data_to_send())
    assert out == [
        OnNextPart(sid, 0, element[:10]),
        OnNextPart(sid, 0, element[10:20]),
        OnNextLastPart(sid, 0, element[20:]),
    ]
    p.client.receive_data(b"".join(encode_message(m) for m in out))  # type: ignore[arg-type]
    assert p.client.events() == [ev.NextReceived(subscriber_id=sid, element=element)]
    assert p.client.demand_of(sid) == 1  # one unit for the whole element


def test_rsio_6_2_interleaved_split_elements_and_last_part_alone() -> None:
    c, sid = subscribed_client(demand=3)
    data = b"".join(
        encode_message(m)
        for m in (
            OnNextPart(sid, 1, b"a1"),
            OnNextPart(sid, 2, b"b1"),
            OnNextLastPart(sid, 2, b"b2"),
            OnNextLastPart(sid, 7, b"whole"),
            OnNextLastPart(sid, 1, b"a2"),
        )
    )
    c.receive_data(data)
    assert [e.element for e in c.events()] == [b"b1b2", b"whole", b"a1a2"]  # type: ignore[union-attr]
    assert c.demand_of(sid) == 0


def test_rsio_6_2_fixed_size_split_element_must_join_to_the_size() -> None:
    c, sid = subscribed_client(size=4, demand=3)
    parts = encode_message(OnNextPart(sid, 0, b"ab"))
    parts += encode_message(OnNextLastPart(sid, 0, b"cd"))
    c.receive_data(parts)
    assert c.events() == [ev.NextReceived(subscriber_id=sid, element=b"abcd")]
    expect_error(c, encode_message(OnNextLastPart(sid, 1, b"abc")), ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_6_2_on_complete_with_an_element_in_progress_is_an_error() -> None:
    c, sid = subscribed_client(demand=3)
    c.receive_data(encode_message(OnNextPart(sid, 0, b"ab")))
    expect_error(c, encode_message(OnComplete(sid)), ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_6_2_on_error_discards_elements_in_progress() -> None:
    c, sid = subscribed_client(demand=3)
    c.receive_data(encode_message(OnNextPart(sid, 0, b"ab")) + encode_message(OnError(sid, "x")))
    assert c.events() == [ev.ErrorReceived(subscriber_id=sid, error="x")]
    assert c._reassembly.splits == 0 and c._reassembly.split_bytes == 0


@pytest.mark.parametrize(
    ("cfg", "parts"),
    [
        (ConnectionConfig(max_element_parts=2), [(0, b"a")] * 3),
        (ConnectionConfig(max_split_elements=2), [(0, b"a"), (1, b"a"), (2, b"a")]),
        (ConnectionConfig(max_element_size=5), [(0, b"abc"), (0, b"def")]),
        (ConnectionConfig(max_split_buffer=5), [(0, b"abc"), (1, b"def")]),
    ],
)
def test_rsio_6_2_split_limits(cfg: ConnectionConfig, parts: list[tuple[int, bytes]]) -> None:
    c = Connection(Role.CLIENT, cfg)
    c.receive_data(SERVER_HELLO)
    sid = c.subscribe("p", 10)
    c.receive_data(encode_message(OnSubscribe(sid, 0)))
    data = b"".join(encode_message(OnNextPart(sid, e, d)) for e, d in parts)
    expect_error(c, data, ErrorCode.LIMIT_EXCEEDED)


def test_rsio_6_2_publisher_may_not_complete_with_a_part_open() -> None:
    s = _server_with(3)
    s.send_part(3, 5, b"first")
    with pytest.raises(LocalProtocolError):
        s.send_complete(3)
    s.send_part(3, 5, b"last", last=True)
    s.send_complete(3)


# -- §7 goodbye ------------------------------------------------------------------------


def test_rsio_draft_orderly_close_goodbye_and_acknowledgement() -> None:
    p = Pair()
    p.pump()
    p.take()
    p.client.close("done")
    assert p.client.state is ConnectionState.CLOSING
    p.pump()
    c_events, s_events = p.take()
    assert s_events == [ev.ConnectionTerminated(reason="done", by_peer=True, error_code=0)]
    assert c_events == [ev.ConnectionTerminated(reason="done", by_peer=False, error_code=0)]
    assert p.client.state is p.server.state is ConnectionState.CLOSED
    assert [messages(d) for _, d in p.wire[-2:]] == [[Goodbye("done")], [GoodbyeAck("")]]


def test_rsio_draft_goodbye_closes_every_open_stream() -> None:
    p = Pair()
    mine = p.subscribed(demand=5)
    theirs = p.server.subscribe("x", 1)
    p.pump()
    p.take()
    p.client.send_on_subscribe(theirs)
    p.server.send_next(mine, b"in flight")  # crosses the goodbye: ignored
    p.client.close()
    for call in (lambda: p.client.request(mine, 1), lambda: p.client.send_next(theirs, b"x")):
        with pytest.raises(LocalProtocolError):
            call()
    p.pump()
    c_events, s_events = p.take()
    assert kinds(c_events) == ["ConnectionTerminated"]
    assert kinds(s_events)[-1] == "ConnectionTerminated"
    assert p.client.open_subscriptions == p.server.open_publications == []


def test_rsio_7_simultaneous_goodbyes() -> None:
    p = Pair()
    p.pump()
    p.take()
    p.client.close("a")
    p.server.close("b")
    p.pump()
    c_events, s_events = p.take()
    assert c_events == [ev.ConnectionTerminated(reason="b", by_peer=True, error_code=0)]
    assert s_events == [ev.ConnectionTerminated(reason="a", by_peer=True, error_code=0)]


def test_rsio_7_goodbye_ack_without_goodbye_is_an_error() -> None:
    expect_error(client_after_hello(), encode_message(GoodbyeAck("")), ErrorCode.UNEXPECTED_MESSAGE)


def test_rsio_7_transport_end_without_goodbye_is_a_loss() -> None:
    c, sid = subscribed_client()
    c.receive_data(b"\x21\x01\x05ab")  # ends inside a message
    c.receive_data(b"")
    assert c.events() == [
        ev.ConnectionLost(reason="the transport ended without goodbye (inside a message)")
    ]
    assert c.state is ConnectionState.CLOSED
    c.receive_data(b"more")  # ignored after a clean end
    with pytest.raises(LocalProtocolError):
        c.request(sid, 1)


def test_rsio_7_transport_end_after_our_goodbye_counts_as_the_ack() -> None:
    c = client_after_hello()
    c.close("bye")
    c.receive_data(b"")
    assert c.events() == [ev.ConnectionTerminated(reason="bye", by_peer=False, error_code=0)]


def test_rsio_7_messages_after_our_goodbye_are_parsed_and_ignored() -> None:
    c, sid = subscribed_client(size=2, demand=1)
    c.close()
    late = encode_message(OnNext(sid, b"ab"), 2) + encode_message(OnNext(sid, b"cd"), 2)
    c.receive_data(late + encode_message(Subscribe("x", 4)) + encode_message(GoodbyeAck("")))
    assert kinds(c.events()) == ["ConnectionTerminated"]


# -- §9 errors ------------------------------------------------------------------------


def test_rsio_9_events_before_the_bad_message_are_kept() -> None:
    c, sid = subscribed_client(demand=1)
    with pytest.raises(RemoteProtocolError):
        c.receive_data(encode_message(OnNext(sid, b"ok")) + b"\x7f")
    events = c.events()
    assert events[0] == ev.NextReceived(subscriber_id=sid, element=b"ok")
    assert isinstance(events[1], ev.ConnectionTerminated)


def held_by_parts() -> tuple[Connection, int, int]:
    """A client with a split element in progress and a tombstone."""
    c, sid = subscribed_client(size=0, demand=5)
    other = c.subscribe("q")
    c.cancel(other)  # before its onSubscribe: a tombstone
    c.receive_data(encode_message(OnNextPart(sid, 0, b"ab")))
    assert c._reassembly.splits == 1 and c._reassembly.split_bytes == 2
    assert c._table.tombs == {other: None}
    return c, sid, other


def assert_parts_forgot(c: Connection, *sids: int) -> None:
    assert c._reassembly.splits == 0 and c._reassembly.split_bytes == 0
    assert c._receiver.chunks == [] and c._receiver.buffered == 0
    assert c.open_subscriptions == [] and c._table.tombs == {}
    assert all(c.subscription_state(sid) is SubscriptionState.CLOSED for sid in sids)


def test_rsio_9_protocol_error_forgets_what_every_part_holds() -> None:
    c, sid, other = held_by_parts()
    expect_error(c, b"\x99\x00", ErrorCode.UNKNOWN_MESSAGE)
    assert_parts_forgot(c, sid, other)


def test_rsio_7_transport_end_inside_a_message_forgets_what_every_part_holds() -> None:
    c, sid, other = held_by_parts()
    c.receive_data(encode_message(OnNext(sid, b"x" * 50))[:10])
    assert c._receiver.buffered == 10
    c.connection_lost()
    assert c.events() == [
        ev.ConnectionLost(reason="the transport ended without goodbye (inside a message)")
    ]
    assert_parts_forgot(c, sid, other)


def test_rsio_9_unknown_message_type_goodbye_and_close() -> None:
    err = expect_error(client_after_hello(), b"\x99\x00", ErrorCode.UNKNOWN_MESSAGE)
    assert "0x99" in err.message


def test_rsio_9_after_a_protocol_error_intents_are_refused() -> None:
    c, _ = subscribed_client()
    expect_error(c, b"\x00", ErrorCode.UNKNOWN_MESSAGE)
    with pytest.raises(LocalProtocolError):
        c.subscribe("p")


# -- output back-pressure and API checks -------------------------------------------------


def test_output_blocked_refuses_elements_until_drained() -> None:
    cfg = ConnectionConfig(max_queued_output=100)
    p = Pair(server_config=cfg)
    sid = p.subscribed(demand=100)
    while not p.server.output_blocked:
        p.server.send_next(sid, b"x" * 30)
    with pytest.raises(LocalProtocolError, match="blocked"):
        p.server.send_next(sid, b"x")
    p.server.data_to_send()
    p.server.send_next(sid, b"x")


def test_intent_arguments_are_validated() -> None:
    c = client_after_hello()
    with pytest.raises(LocalProtocolError):
        c.subscribe(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        c.subscribe("p", -1)
    with pytest.raises(LocalProtocolError):
        c.subscribe("\udc80")
    with pytest.raises(LocalProtocolError):
        c.cancel(42)


def test_large_message_arriving_in_small_chunks_is_joined_once() -> None:
    c, sid = subscribed_client(demand=1)
    element = bytes(200_000)
    data = encode_message(OnNext(sid, element))
    for i in range(0, len(data), 1000):
        c.receive_data(data[i : i + 1000])
        if i + 1000 < len(data):
            assert len(c._receiver.chunks) >= 1 and c._receiver.need == len(data)
    assert c.events() == [ev.NextReceived(subscriber_id=sid, element=element)]


def test_rsio_10_sender_refuses_what_a_peer_with_the_same_limits_refuses() -> None:
    cfg = ConnectionConfig(max_string_size=8, max_element_size=10, split_size=4)
    c = Connection(Role.CLIENT, cfg)
    with pytest.raises(LocalProtocolError, match="max_string_size"):
        c.subscribe("a-long-publisher-name")
    p = Pair(server_config=cfg)
    sid = p.subscribed(demand=5)
    with pytest.raises(LocalProtocolError, match="max_element_size"):
        p.server.send_next(sid, bytes(11))
    p.server.send_next(sid, bytes(10))  # split into 4 + 4 + 2
    p.pump()
    assert p.client_events == [ev.NextReceived(subscriber_id=sid, element=bytes(10))]


def test_rsio_6_2_element_id_is_free_again_after_its_last_part() -> None:
    c, sid = subscribed_client(demand=2)
    one = encode_message(OnNextPart(sid, 4, b"a")) + encode_message(OnNextLastPart(sid, 4, b"b"))
    two = encode_message(OnNextPart(sid, 4, b"c")) + encode_message(OnNextLastPart(sid, 4, b"d"))
    c.receive_data(one + two)
    assert [e.element for e in c.events()] == [b"ab", b"cd"]  # type: ignore[union-attr]
    assert c.demand_of(sid) == 0


def test_rsio_3_a_session_written_byte_by_byte_from_the_spec() -> None:
    """The exact bytes of a session, as another implementation would write
    them from docs/protocols/rsio.md alone."""
    s = Connection(Role.SERVER)
    assert s.data_to_send() == bytes.fromhex("02 00 00")  # serverHello v0, no extensions
    s.receive_data(
        bytes.fromhex("01 00 00")  # clientHello
        + b"\x10\x07counter\x01\x00"  # subscribe("counter", 1, 0)
        + bytes.fromhex("11 01 03")  # request(1, 3)
    )
    assert s.events() == [
        ev.HelloReceived(version=0, extensions=()),
        ev.SubscribeReceived(subscriber_id=1, publisher="counter", initial_demand=0),
        ev.RequestReceived(subscriber_id=1, demand=3),
    ]
    s.send_on_subscribe(1, 2)
    s.send_packed(1, b"\x00\x01\x00\x02")
    s.send_next(1, b"\x00\x03")
    s.send_complete(1)
    assert s.data_to_send() == bytes.fromhex("20 01 02  22 01 02 0001 0002  21 01 0003  25 01")
    s.receive_data(b"\x03\x03bye")  # goodbye("bye")
    assert s.events() == [ev.ConnectionTerminated(reason="bye", by_peer=True, error_code=0)]
    assert s.data_to_send() == bytes.fromhex("04 00")  # goodbyeAck("")


def test_rsio_events_built_on_the_hot_path_are_ordinary_frozen_events() -> None:
    """``_fast.next_event`` (slot descriptors) and the one-byte varints
    against the plain constructions they replace."""
    import dataclasses

    from sansrs.rsio import encode_varint
    from sansrs.rsio._fast import VARINT1, next_event
    from sansrs.rsio.events import NextReceived

    fast, plain = next_event(3, b"e"), NextReceived(subscriber_id=3, element=b"e")
    assert type(fast) is NextReceived
    assert fast == plain and hash(fast) == hash(plain) and repr(fast) == repr(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.subscriber_id = 4  # type: ignore[misc]
    assert [encode_varint(n) for n in range(128)] == VARINT1


@pytest.mark.parametrize("length", [11, 127, 300])
def test_rsio_limits_element_beyond_max_message_size_is_refused_on_every_path(length: int) -> None:
    """docs/protocols/rsio.md §10: a bytes field longer than max_message_size
    is LIMIT_EXCEEDED, whether its length takes one varint byte (the
    receive hot path took those unchecked) or more."""
    from sansrs.rsio import ConnectionConfig, ErrorCode, OnNext, OnSubscribe, ServerHello
    from sansrs.rsio import encode_message as enc

    c = Connection(Role.CLIENT, ConnectionConfig(max_message_size=10))
    c.receive_data(enc(ServerHello(0)))
    sid = c.subscribe("p", 5)
    c.receive_data(enc(OnSubscribe(sid, 0)))
    with pytest.raises(RemoteProtocolError) as caught:
        c.receive_data(enc(OnNext(sid, b"x" * length)))
    assert caught.value.error_code == ErrorCode.LIMIT_EXCEEDED
    assert not any(type(e).__name__ == "NextReceived" for e in c.events())

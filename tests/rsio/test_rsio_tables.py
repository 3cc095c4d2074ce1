"""Walk every (state, input) pair of the three rsio tables through a live
connection (docs/protocols/rsio.md §11, state tables)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from sansrs.rsio import (
    CONNECTION_IGNORED,
    CONNECTION_TRANSITIONS,
    PUBLICATION_TRANSITIONS,
    SUBSCRIPTION_IGNORED,
    SUBSCRIPTION_TRANSITIONS,
    ClientHello,
    Connection,
    ConnectionInput,
    ConnectionState,
    Goodbye,
    GoodbyeAck,
    LocalProtocolError,
    OnComplete,
    OnNext,
    OnSubscribe,
    PublicationInput,
    PublicationState,
    RemoteProtocolError,
    Role,
    ServerHello,
    Subscribe,
    SubscriptionInput,
    SubscriptionState,
    encode_message,
)
from sansrs.rsio._tables import hot_path_state

CS, CI = ConnectionState, ConnectionInput


def in_state(state: ConnectionState) -> Connection:
    c = Connection(Role.CLIENT)
    if state is CS.AWAITING_HELLO:
        return c
    c.receive_data(encode_message(ServerHello(0)))
    if state is CS.CLOSING:
        c.close("bye")
    elif state is CS.CLOSED:
        c.receive_data(encode_message(Goodbye("bye")))
    return c


CONNECTION_INPUTS: dict[ConnectionInput, Callable[[Connection], object]] = {
    CI.RECV_HELLO: lambda c: c.receive_data(encode_message(ServerHello(0))),
    CI.RECV_STREAM: lambda c: c.receive_data(encode_message(Subscribe("p", 99))),
    CI.RECV_GOODBYE: lambda c: c.receive_data(encode_message(Goodbye("x"))),
    CI.RECV_GOODBYE_ACK: lambda c: c.receive_data(encode_message(GoodbyeAck(""))),
    CI.SEND_STREAM: lambda c: c.subscribe("p"),
    CI.SEND_GOODBYE: lambda c: c.close(),
    CI.PROTOCOL_ERROR: lambda c: c.receive_data(b"\x00"),
    CI.EOF: lambda c: c.receive_data(b""),
}


def test_every_connection_input_is_exercised() -> None:
    assert set(CONNECTION_INPUTS) == set(ConnectionInput)


@pytest.mark.parametrize(
    ("state", "inp"), list(itertools.product(ConnectionState, ConnectionInput))
)
def test_connection_table(state: ConnectionState, inp: ConnectionInput) -> None:
    conn = in_state(state)
    assert conn.state is state
    conn.events()
    expected = CONNECTION_TRANSITIONS.get((state, inp))
    sending = inp in (CI.SEND_STREAM, CI.SEND_GOODBYE)
    if inp is CI.PROTOCOL_ERROR and expected is not None:
        with pytest.raises(RemoteProtocolError):
            CONNECTION_INPUTS[inp](conn)
    elif expected is None and sending:
        with pytest.raises(LocalProtocolError):
            CONNECTION_INPUTS[inp](conn)
        expected = state
    elif expected is None and state is CS.CLOSED:
        CONNECTION_INPUTS[inp](conn)  # after a clean close input is ignored
        expected = state
    elif expected is None:
        with pytest.raises(RemoteProtocolError):
            CONNECTION_INPUTS[inp](conn)
        expected = CS.CLOSED
    else:
        CONNECTION_INPUTS[inp](conn)
        if (state, inp) in CONNECTION_IGNORED:
            assert conn.events() == []  # parsed and dropped
    assert conn.state is expected


def test_ignored_pairs_are_allowed_pairs_of_their_table() -> None:
    assert CONNECTION_TRANSITIONS.keys() >= CONNECTION_IGNORED
    assert SUBSCRIPTION_TRANSITIONS.keys() >= SUBSCRIPTION_IGNORED


def test_hot_paths_test_the_one_state_their_table_handles_there() -> None:
    """The parse and send hot paths compare a state instead of looking a
    table up; the state they compare is derived from the table."""
    assert hot_path_state(CONNECTION_TRANSITIONS, CONNECTION_IGNORED, CI.RECV_STREAM) is CS.OPEN
    assert (
        hot_path_state(SUBSCRIPTION_TRANSITIONS, SUBSCRIPTION_IGNORED, SI.RECV_NEXT) is SS.ACTIVE
    )
    assert hot_path_state(PUBLICATION_TRANSITIONS, frozenset(), PI.SEND_NEXT) is PS.ACTIVE
    with pytest.raises(ValueError, match="2 states"):
        hot_path_state(CONNECTION_TRANSITIONS, frozenset(), CI.RECV_STREAM)  # CLOSING too
    with pytest.raises(ValueError, match="leaves"):
        hot_path_state(CONNECTION_TRANSITIONS, CONNECTION_IGNORED, CI.RECV_HELLO)


# -- subscriptions we made --------------------------------------------------------

SS, SI = SubscriptionState, SubscriptionInput


def subscription(state: SubscriptionState, inp: SubscriptionInput) -> tuple[Connection, int]:
    c = in_state(CS.OPEN)
    sid = c.subscribe("p", 5)
    if state is SS.ACTIVE:
        c.receive_data(encode_message(OnSubscribe(sid, 1)))
    elif state is SS.CANCELLED:
        if inp is not SI.RECV_ON_SUBSCRIBE:  # cancelled after onSubscribe: a tombstone of size 1
            c.receive_data(encode_message(OnSubscribe(sid, 1)))
        c.cancel(sid)
    c.events()
    return c, sid


SUBSCRIPTION_INPUTS: dict[SubscriptionInput, Callable[[Connection, int], object]] = {
    SI.RECV_ON_SUBSCRIBE: lambda c, s: c.receive_data(encode_message(OnSubscribe(s, 1))),
    SI.RECV_NEXT: lambda c, s: c.receive_data(encode_message(OnNext(s, b"x"), 1)),
    SI.RECV_TERMINAL: lambda c, s: c.receive_data(encode_message(OnComplete(s))),
    SI.SEND_REQUEST: lambda c, s: c.request(s, 1),
    SI.SEND_CANCEL: lambda c, s: c.cancel(s),
}


@pytest.mark.parametrize(
    ("state", "inp"),
    list(itertools.product([SS.SUBSCRIBING, SS.ACTIVE, SS.CANCELLED], SubscriptionInput)),
)
def test_subscription_table(state: SubscriptionState, inp: SubscriptionInput) -> None:
    conn, sid = subscription(state, inp)
    assert conn.subscription_state(sid) is state
    expected = SUBSCRIPTION_TRANSITIONS.get((state, inp))
    if expected is None and inp in (SI.SEND_REQUEST, SI.SEND_CANCEL):
        with pytest.raises(LocalProtocolError):
            SUBSCRIPTION_INPUTS[inp](conn, sid)
        assert conn.subscription_state(sid) is state
    elif expected is None:
        with pytest.raises(RemoteProtocolError):
            SUBSCRIPTION_INPUTS[inp](conn, sid)
        assert conn.state is CS.CLOSED
    else:
        SUBSCRIPTION_INPUTS[inp](conn, sid)
        assert conn.subscription_state(sid) is expected
        assert conn.events() == [] or state is not SS.CANCELLED  # a tombstone is silent


# -- the peer's subscriptions to us ---------------------------------------------

PS, PI = PublicationState, PublicationInput


def publication(state: PublicationState) -> Connection:
    s = Connection(Role.SERVER)
    s.receive_data(encode_message(ClientHello(0)) + encode_message(Subscribe("p", 3, 5)))
    if state is PS.ACTIVE:
        s.send_on_subscribe(3)
    return s


PUBLICATION_INPUTS: dict[PublicationInput, Callable[[Connection], object]] = {
    PI.SEND_ON_SUBSCRIBE: lambda s: s.send_on_subscribe(3),
    PI.SEND_NEXT: lambda s: s.send_next(3, b"x"),
    PI.SEND_TERMINAL: lambda s: s.send_complete(3),
    PI.RECV_REQUEST: lambda s: s.receive_data(b"\x11\x03\x01"),
    PI.RECV_CANCEL: lambda s: s.receive_data(b"\x12\x03"),
}


@pytest.mark.parametrize(
    ("state", "inp"), list(itertools.product([PS.SUBSCRIBED, PS.ACTIVE], PublicationInput))
)
def test_publication_table(state: PublicationState, inp: PublicationInput) -> None:
    conn = publication(state)
    assert conn.publication_state(3) is state
    expected = PUBLICATION_TRANSITIONS.get((state, inp))
    if expected is None:
        with pytest.raises(LocalProtocolError):
            PUBLICATION_INPUTS[inp](conn)
        expected = state
    else:
        PUBLICATION_INPUTS[inp](conn)
    assert conn.publication_state(3) is expected
    assert conn.state is CS.OPEN

"""The state tables, walked pair by pair through a real Connection.

Every (stream state x stream input) pair is driven on a live channel, as
requester and as responder: an allowed pair must land in the table's next
state; a missing pair must raise ``LocalProtocolError`` (local intents) or
be ignored (received frames, spec: Handling the Unexpected 9). The
connection table is checked for completeness of its terminal paths.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sansrs import LocalProtocolError
from sansrs.rsocket import (
    CONNECTION_TRANSITIONS,
    STREAM_TRANSITIONS,
    CancelFrame,
    Connection,
    ConnectionConfig,
    ConnectionInput,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
    Frame,
    PayloadFrame,
    RequestNFrame,
    ResumeOkFrame,
    Role,
    StreamInput,
    StreamState,
    encode_frame_prefixed,
)
from sansrs.rsocket._context import Context
from sansrs.rsocket._fragmentation import Fragmenter
from sansrs.rsocket._streams import OPENING_STATES, Stream, StreamKind, StreamTable
from tests.rsocket.pair import Pair
from tests.rsocket.resume_pair import ResumePair

S = StreamState
I = StreamInput  # noqa: E741


def channel_in(state: StreamState, requester: bool) -> tuple[Pair, Connection, int]:
    """A pair with a channel whose ``requester``/responder end is in ``state``."""
    pair = Pair.established()
    sid = pair.client.request_channel(b"first", initial_n=5)
    pair.pump()
    pair.server.request_n(sid, 5)
    pair.pump()
    me, peer = (pair.client, pair.server) if requester else (pair.server, pair.client)
    if state is S.IN_ONLY:
        me.send_complete(sid)
    elif state is S.OUT_ONLY:
        peer.send_complete(sid)
    elif state is S.CLOSED:
        me.send_complete(sid)
        peer.send_complete(sid)
    pair.pump()
    pair.take()
    assert me.stream_state(sid) is (None if state is S.CLOSED else state)
    return pair, me, sid


def feed(conn: Connection, frame: Frame) -> None:
    conn.receive_data(encode_frame_prefixed(frame))


LOCAL: dict[StreamInput, Callable[[Connection, int], None]] = {
    I.SEND_PAYLOAD: lambda c, sid: c.send_payload(sid, b"x"),
    I.SEND_COMPLETE: lambda c, sid: c.send_complete(sid),
    I.SEND_ERROR: lambda c, sid: c.send_error(sid, ErrorCode.APPLICATION_ERROR, "e"),
    I.SEND_CANCEL: lambda c, sid: c.cancel(sid),
    I.SEND_CANCEL_INBOUND: lambda c, sid: c.cancel(sid),
    I.SEND_REQUEST_N: lambda c, sid: c.request_n(sid, 1),
}
REMOTE: dict[StreamInput, Callable[[int], Frame]] = {
    I.RECV_PAYLOAD: lambda sid: PayloadFrame(sid, b"x", next=True),
    I.RECV_COMPLETE: lambda sid: PayloadFrame(sid, b"", complete=True),
    I.RECV_ERROR: lambda sid: ErrorFrame(sid, ErrorCode.APPLICATION_ERROR, b"e"),
    I.RECV_CANCEL: lambda sid: CancelFrame(sid),
    I.RECV_CANCEL_OUTBOUND: lambda sid: CancelFrame(sid),
    I.RECV_REQUEST_N: lambda sid: RequestNFrame(sid, 1),
}
# Which end produces an input: the requester's CANCEL terminates, the
# responder's only closes the requester's flow (and vice versa on reception).
REQUESTER_ONLY = {I.SEND_CANCEL, I.RECV_CANCEL_OUTBOUND}
RESPONDER_ONLY = {I.SEND_CANCEL_INBOUND, I.RECV_CANCEL}

CASES = [
    (state, inp, requester)
    for state in StreamState
    for inp in StreamInput
    for requester in (True, False)
    if not (inp in REQUESTER_ONLY and not requester) and not (inp in RESPONDER_ONLY and requester)
]


def test_every_stream_state_input_pair_is_walked() -> None:
    walked = {(state, inp) for state, inp, _ in CASES}
    assert walked == {(s, i) for s in StreamState for i in StreamInput}
    assert all(
        (s, i) in walked and nxt in StreamState for (s, i), nxt in STREAM_TRANSITIONS.items()
    )
    assert not any(state is S.CLOSED for state, _ in STREAM_TRANSITIONS)


@pytest.mark.parametrize(("state", "inp", "requester"), CASES)
def test_stream_table_pair(state: StreamState, inp: StreamInput, requester: bool) -> None:
    _, me, sid = channel_in(state, requester)
    expected = STREAM_TRANSITIONS.get((state, inp))
    if requester and inp is I.SEND_ERROR and state is not S.BOTH_OPEN and state is not S.OUT_ONLY:
        expected = None  # a requester errors only its own open flow (else it cancels)
    if inp in LOCAL:
        if expected is None:
            with pytest.raises(LocalProtocolError):
                LOCAL[inp](me, sid)
            assert me.stream_state(sid) is (None if state is S.CLOSED else state)
            return
        LOCAL[inp](me, sid)
    else:
        feed(me, REMOTE[inp](sid))
        if expected is None:
            assert me.events() == []
            assert me.stream_state(sid) is (None if state is S.CLOSED else state)
            return
        assert me.events() != []
    assert me.stream_state(sid) is (None if expected is S.CLOSED else expected)
    assert me.state is ConnectionState.ESTABLISHED


def test_connection_table_every_state_reaches_closed() -> None:
    """From every non-terminal state a fatal error and the transport's end
    close the connection, and nothing leaves CLOSED."""
    for state in ConnectionState:
        if state is ConnectionState.CLOSED:
            assert not any(s is state for s, _ in CONNECTION_TRANSITIONS)
            continue
        assert CONNECTION_TRANSITIONS[(state, ConnectionInput.FATAL)] is ConnectionState.CLOSED
        if state is ConnectionState.DISCONNECTED:
            # No transport to lose; it ends by FATAL (closed, expired).
            assert (state, ConnectionInput.EOF) not in CONNECTION_TRANSITIONS
        elif state is ConnectionState.RESUMING:
            # The transport carrying RESUME ended: back to DISCONNECTED.
            assert (state, ConnectionInput.EOF) not in CONNECTION_TRANSITIONS
            assert (
                CONNECTION_TRANSITIONS[(state, ConnectionInput.DETACH)]
                is ConnectionState.DISCONNECTED
            )
        else:
            assert CONNECTION_TRANSITIONS[(state, ConnectionInput.EOF)] is ConnectionState.CLOSED


RESUME_STATES = {ConnectionState.DISCONNECTED, ConnectionState.RESUMING}
RESUME_INPUTS = {
    ConnectionInput.DETACH,
    ConnectionInput.SEND_RESUME,
    ConnectionInput.RESUMED,
    ConnectionInput.HANDOFF,
}


def _resume_table_pair(state: ConnectionState, inp: ConnectionInput) -> None:
    """The resumption rows, driven through a resumable pair (test_resume.py
    covers each rule in depth)."""
    nxt = CONNECTION_TRANSITIONS[(state, inp)]
    p = ResumePair()
    if state is ConnectionState.AWAITING_SETUP:  # HANDOFF
        p.cut(0, 0)
        p.client.resume()
        fresh = Connection(Role.SERVER, sessions=p.store)
        assert fresh.state is state
        fresh.receive_data(p.client.data_to_send())
        assert fresh.state is nxt
        return
    conn = p.client
    if state is not ConnectionState.ESTABLISHED:
        p.cut(0, 0)
        if state is ConnectionState.RESUMING:
            p.client.resume()
            p.client.data_to_send()
    assert conn.state is state
    if inp is ConnectionInput.DETACH:
        conn.connection_lost()
    elif inp is ConnectionInput.SEND_RESUME:
        conn.resume()
    elif inp is ConnectionInput.RESUMED and state is ConnectionState.DISCONNECTED:
        conn = p.server
        p.client.resume()
        Connection(Role.SERVER, sessions=p.store).receive_data(p.client.data_to_send())
    elif inp is ConnectionInput.RESUMED:
        feed(conn, ResumeOkFrame(p.client.sent_position))
    elif inp is ConnectionInput.REJECT:
        feed(conn, ErrorFrame(0, ErrorCode.REJECTED_RESUME, b"no"))
    elif inp is ConnectionInput.FATAL:
        conn.close("x", error_code=ErrorCode.CONNECTION_ERROR)
    else:  # pragma: no cover - every resumption pair is listed above
        raise AssertionError((state, inp))
    assert conn.state is nxt


@pytest.mark.parametrize("state", list(ConnectionState))
@pytest.mark.parametrize("inp", list(ConnectionInput))
def test_connection_table_pair(state: ConnectionState, inp: ConnectionInput) -> None:
    """Each allowed pair is reachable through the public API and lands where
    the table says; disallowed local intents raise."""
    nxt = CONNECTION_TRANSITIONS.get((state, inp))
    if nxt is None:
        return  # checked by the intent tests: e.g. accept_setup without SETUP raises
    if state in RESUME_STATES or inp in RESUME_INPUTS:
        _resume_table_pair(state, inp)
        return
    pair = Pair()
    conn = {
        ConnectionInput.SEND_SETUP: pair.client,
    }.get(inp, pair.server)
    # Reach ``state``.
    if state is ConnectionState.AWAITING_SETUP:
        pass
    else:
        pair.client.setup()
        pair.pump()
        if state is not ConnectionState.SETUP_RECEIVED:
            pair.server.accept_setup()
            pair.pump()
            if inp is ConnectionInput.REJECT:
                conn = pair.client
            if state is ConnectionState.CLOSING:
                sid = pair.client.request_stream(b"", initial_n=1)
                pair.pump()
                pair.server.close("bye")
                pair.pump()
                # REJECT: a client whose SETUP the server has not shown it
                # accepted (CONNECTION_CLOSE is no sign of acceptance).
                conn = pair.client if inp is ConnectionInput.REJECT else pair.server
    assert conn.state is state
    if inp is ConnectionInput.SEND_SETUP:
        conn.setup()
    elif inp is ConnectionInput.RECV_SETUP:
        pair.client.setup()
        pair.pump()
    elif inp is ConnectionInput.ACCEPT:
        conn.accept_setup()
    elif inp is ConnectionInput.REJECT:
        if conn is pair.client:
            feed(conn, ErrorFrame(0, ErrorCode.REJECTED_SETUP, b""))
        elif state is ConnectionState.AWAITING_SETUP:
            from sansrs.rsocket import SetupFrame

            feed(conn, SetupFrame(1, 1, "a", "b", major_version=9))
        else:
            conn.reject_setup()
    elif inp is ConnectionInput.CLOSE:
        if state is ConnectionState.CLOSING:
            feed(conn, ErrorFrame(0, ErrorCode.CONNECTION_CLOSE, b"again"))
        else:
            sid = pair.client.request_stream(b"", initial_n=1)
            pair.pump()
            conn.close()
    elif inp is ConnectionInput.DRAINED:
        conn.send_payload(sid, b"", complete=True)
    elif inp is ConnectionInput.FATAL:
        conn.close("x", error_code=ErrorCode.CONNECTION_ERROR)
    elif inp is ConnectionInput.EOF:
        conn.receive_data(b"")
    assert conn.state is nxt


@pytest.mark.parametrize("state", list(ConnectionState))
@pytest.mark.parametrize("inp", list(ConnectionInput))
def test_connection_table_is_what_runs(state: ConnectionState, inp: ConnectionInput) -> None:
    """Every pair, through the one function that changes a connection's
    state: an allowed pair lands where the table says, a missing one is
    refused and changes nothing."""
    ctx = Context(Role.SERVER, ConnectionConfig())
    ctx.state = state
    closed: list[bool] = []
    ctx.on_closed.append(lambda: closed.append(True))
    nxt = CONNECTION_TRANSITIONS.get((state, inp))
    if nxt is None:
        with pytest.raises(LocalProtocolError):
            ctx.transition(inp)
        assert ctx.state is state and closed == []
        return
    ctx.transition(inp)
    assert ctx.state is nxt
    assert closed == ([True] if nxt is ConnectionState.CLOSED else [])


def _stream(state: StreamState, requester: bool) -> tuple[StreamTable, Stream]:
    """A channel stream in ``state``, with credit on each flow still open."""
    config = ConnectionConfig()
    ctx = Context(Role.CLIENT, config)
    table = StreamTable(ctx, Fragmenter(config, ctx.output).reassemblies)
    s = table.by_id[1] = Stream(1, StreamKind.REQUEST_CHANNEL, requester, state, 0, 0)
    s.out_credit = 7 if s.out_open else 0
    s.in_credit = 7 if s.in_open else 0
    return table, s


@pytest.mark.parametrize("state", [s for s in StreamState if s is not S.CLOSED])
@pytest.mark.parametrize("inp", list(StreamInput))
def test_stream_table_step_is_the_table(state: StreamState, inp: StreamInput) -> None:
    """``StreamTable.step`` (the one place a stream's state changes) for every
    pair; a closed flow keeps no credit, a closed stream leaves the table."""
    table, s = _stream(state, requester=True)
    nxt = STREAM_TRANSITIONS.get((state, inp))
    assert table.step(s, inp) is (nxt is not None)
    assert s.state is (state if nxt is None else nxt)
    if not s.out_open:
        assert s.out_credit == 0
    if not s.in_open:
        assert s.in_credit == 0
    assert (1 in table.by_id) is (s.state is not S.CLOSED)


def test_stream_table_payloads_and_request_n_never_change_the_state() -> None:
    """What lets the hot paths test credit instead of looking the table up:
    items and REQUEST_N are allowed exactly where their flow is open, and
    leave the state as it is."""
    for (state, inp), nxt in STREAM_TRANSITIONS.items():
        if inp in (I.SEND_PAYLOAD, I.RECV_REQUEST_N):
            assert nxt is state
            assert state in (S.BOTH_OPEN, S.OUT_ONLY)
        if inp in (I.RECV_PAYLOAD, I.SEND_REQUEST_N):
            assert nxt is state
            assert state in (S.BOTH_OPEN, S.IN_ONLY)
    for state in StreamState:
        assert ((state, I.SEND_PAYLOAD) in STREAM_TRANSITIONS) is _stream(state, True)[1].out_open
        assert ((state, I.RECV_PAYLOAD) in STREAM_TRANSITIONS) is _stream(state, True)[1].in_open


OPENERS: dict[StreamKind, Callable[[Connection], int]] = {
    StreamKind.REQUEST_RESPONSE: lambda c: c.request_response(b"q"),
    StreamKind.REQUEST_STREAM: lambda c: c.request_stream(b"q", initial_n=1),
    StreamKind.REQUEST_CHANNEL: lambda c: c.request_channel(b"q", initial_n=1),
}


@pytest.mark.parametrize(("kind", "requester"), list(OPENING_STATES))
def test_stream_opening_states_are_what_runs(kind: StreamKind, requester: bool) -> None:
    """Each new stream starts in its OPENING_STATES state, requester and
    responder, through the public API (a fire-and-forget only while its
    fragments are reassembled)."""
    pair = Pair.established(client_config=ConnectionConfig(fragment_size=64))
    if kind is StreamKind.FIRE_AND_FORGET:
        pair.client.request_fnf(b"x" * 200)  # fragmented
        frames = pair.client.data_to_send()
        pair.server.receive_data(frames[:70])  # the first fragment only
        assert pair.server._streams.by_id[1].state is OPENING_STATES[kind, requester]
        return
    sid = OPENERS[kind](pair.client)
    pair.pump()
    me = pair.client if requester else pair.server
    assert me.stream_state(sid) is OPENING_STATES[kind, requester]


@pytest.mark.parametrize("requester", [True, False])
def test_stream_channel_opened_complete_takes_complete_through_the_table(requester: bool) -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"only", initial_n=1, complete=True)
    pair.pump()
    me, inp = (pair.client, I.SEND_COMPLETE) if requester else (pair.server, I.RECV_COMPLETE)
    assert me.stream_state(sid) is STREAM_TRANSITIONS[S.BOTH_OPEN, inp]

"""``Connection.take_answer`` and ``Connection.take_request`` (the reads of
a sequential request-response's latency path, client and server,
docs/performance.md) must be ``receive_data`` for the one read each takes
and nothing at all for every other read: the same state after, the same
events (the answer's data or the request instead of its event), the same
bytes out, the same errors. Checked against a twin connection fed with
``receive_data``, for reads built from every kind of frame, cut and joined
anyhow."""

from __future__ import annotations

import struct

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    ConnectionState,
    LocalProtocolError,
    RemoteProtocolError,
    SessionStore,
)
from sansrs.rsocket.events import PayloadReceived, RequestResponseReceived
from tests.rsocket.pair import Pair
from tests.rsocket.resume_pair import ResumePair

NOW = 5.0
PAYLOAD, ERROR, KEEPALIVE, REQUEST_N, CANCEL = 0x0A, 0x0B, 0x03, 0x08, 0x09
REQUEST_RESPONSE, REQUEST_FNF, REQUEST_STREAM = 0x04, 0x05, 0x06
M, F, C, N, IGNORE = 0x100, 0x80, 0x40, 0x20, 0x200


def _frame(sid: int, ftype: int, flags: int, body: bytes) -> bytes:
    frame = struct.pack(">IH", sid, ftype << 10 | flags) + body
    return len(frame).to_bytes(3, "big") + frame


def _twins() -> tuple[Connection, Connection, int]:
    """Two clients in the same state, each with the request-response ``sid``
    sent and unanswered."""
    a, b = Pair.established().client, Pair.established().client
    sid = a.request_response(b"q")
    assert b.request_response(b"q") == sid
    assert a.data_to_send() == b.data_to_send()
    return a, b, sid


def _feed(conn: Connection, data: bytes) -> str | None:
    try:
        conn.receive_data(data, NOW)
    except RemoteProtocolError as exc:
        return repr(exc)
    return None


def _assert_same(a: Connection, b: Connection, sid: int) -> None:
    assert a.state is b.state
    assert a.stream_state(sid) == b.stream_state(sid)
    assert a.open_streams == b.open_streams
    assert a.received_position == b.received_position
    assert a.next_deadline() == b.next_deadline()
    assert a.data_to_send() == b.data_to_send()
    if a.state is b.state and a.next_deadline() is not None:
        # What the clock does next (KEEPALIVE due, or the peer's silence)
        # depends on what each saw.
        later = NOW + 1000.0
        a.handle_timeout(later)
        b.handle_timeout(later)
        assert a.events() == b.events()
        assert a.data_to_send() == b.data_to_send()


@st.composite
def _frames(draw: st.DrawFn, sid: int) -> bytes:
    """One frame: mostly the answer (flags varied), or something else on
    its stream or another, or the connection's."""
    kind = draw(st.sampled_from(["answer", "answer", "answer", "other", "raw"]))
    data = draw(st.binary(max_size=24))
    if kind == "answer":
        flags = draw(st.sampled_from([N, N | C, N | IGNORE, N | C | IGNORE, C, N | M, N | F]))
        stream = draw(st.sampled_from([sid, sid, sid + 2, 0]))
        body = data
        if flags & M:
            body = len(data[:3]).to_bytes(3, "big") + data
        return _frame(stream, PAYLOAD, flags, body)
    if kind == "other":
        ftype = draw(st.sampled_from([ERROR, KEEPALIVE, REQUEST_N, CANCEL]))
        if ftype == ERROR:
            return _frame(sid, ERROR, 0, struct.pack(">I", 0x201) + data)
        if ftype == KEEPALIVE:
            respond = draw(st.sampled_from([0, 0x80]))
            return _frame(0, KEEPALIVE, respond, struct.pack(">Q", 0) + data)
        if ftype == REQUEST_N:
            return _frame(sid, REQUEST_N, 0, struct.pack(">I", 1))
        return _frame(sid, CANCEL, 0, b"")
    return draw(st.binary(min_size=1, max_size=16))


@st.composite
def _reads(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 3)) == 0:  # the read the path is for, often
        flags = draw(st.sampled_from([N, N | C, N | IGNORE, N | C | IGNORE]))
        return _frame(1, PAYLOAD, flags, draw(st.binary(max_size=24)))
    frames = draw(st.lists(_frames(1), min_size=1, max_size=3))
    data = b"".join(frames)
    cut = draw(st.sampled_from(["whole", "whole", "prefix", "suffix"]))
    if cut == "prefix" and len(data) > 1:
        data = data[: draw(st.integers(1, len(data) - 1))]
    elif cut == "suffix" and len(data) > 1:
        data = data[draw(st.integers(1, len(data) - 1)) :]
    return data


@settings(max_examples=400, deadline=None)
@given(read=_reads())
def test_take_answer_is_receive_data_for_the_answer_and_nothing_for_the_rest(read: bytes) -> None:
    a, b, sid = _twins()
    taken = a.take_answer(read, sid, NOW)
    b_error = _feed(b, read)
    event("taken" if taken is not None else "left")
    if taken is None:
        assert a.events() == []
        assert _feed(a, read) == b_error  # nothing changed: now as its twin
        assert a.events() == b.events()
    else:
        assert b_error is None
        answer = PayloadReceived(stream_id=sid, data=taken, metadata=None, complete=True, next=True)
        assert b.events() == [answer]
        assert a.events() == []
    _assert_same(a, b, sid)


@pytest.mark.parametrize("flags", [N, N | C, N | C | IGNORE])
def test_the_whole_answer_alone_is_taken(flags: int) -> None:
    a, b, sid = _twins()
    read = _frame(sid, PAYLOAD, flags, b"answer")
    assert a.take_answer(read, sid, NOW) == b"answer"
    assert a.stream_state(sid) is None  # the answer completes the stream (spec 5)
    b.receive_data(read, NOW)
    assert b.events() == [
        PayloadReceived(stream_id=sid, data=b"answer", metadata=None, complete=True, next=True)
    ]
    _assert_same(a, b, sid)


@pytest.mark.parametrize(
    "read",
    [
        _frame(1, PAYLOAD, N | M, b"\x00\x00\x01m" + b"answer"),  # metadata
        _frame(1, PAYLOAD, N | F, b"part"),  # a fragment
        _frame(1, PAYLOAD, N | C, b"a") + _frame(0, KEEPALIVE, 0, bytes(8)),  # and more
        _frame(1, PAYLOAD, N | C, b"answer")[:-1],  # not all of it yet
        _frame(3, PAYLOAD, N | C, b"answer"),  # another stream
        _frame(1, ERROR, 0, struct.pack(">I", 0x201) + b"no"),  # an error
    ],
)
def test_anything_but_the_whole_answer_alone_is_left_alone(read: bytes) -> None:
    a, _, sid = _twins()
    assert sid == 1
    assert a.take_answer(read, sid, NOW) is None
    assert a.events() == []
    assert a.stream_state(sid) is not None


def test_a_partial_frame_buffered_before_is_left_alone() -> None:
    a, _, sid = _twins()
    whole = _frame(sid, PAYLOAD, N | C, b"answer")
    a.receive_data(whole[:4], NOW)
    assert a.take_answer(whole[4:], sid, NOW) is None
    a.receive_data(whole[4:], NOW)
    assert a.events() == [
        PayloadReceived(stream_id=sid, data=b"answer", metadata=None, complete=True, next=True)
    ]


def test_a_closed_connection_takes_nothing() -> None:
    a, _, sid = _twins()
    with pytest.raises(RemoteProtocolError):
        a.receive_data(_frame(0, 0x3F, 0, b""), NOW)  # a reserved frame type: protocol error
    assert a.take_answer(_frame(sid, PAYLOAD, N | C, b"x"), sid, NOW) is None


def test_events_not_taken_yet_leave_the_answer_alone() -> None:
    """The answer's event would come after them: taking it whole does
    not jump the queue."""
    a, _, sid = _twins()
    a.receive_data(_frame(0, KEEPALIVE, 0, bytes(8) + b"ping"), NOW)  # an event, not taken
    answer = _frame(sid, PAYLOAD, N | C, b"answer")
    assert a.take_answer(answer, sid, NOW) is None
    a.receive_data(answer, NOW)
    events = a.events()
    assert events[-1] == PayloadReceived(
        stream_id=sid, data=b"answer", metadata=None, complete=True, next=True
    )
    assert len(events) == 2


# -- the server's side: take_request ------------------------------------------


def _server_twins(**config: int) -> tuple[Connection, Connection]:
    """Two servers in the same state, established, no stream open."""
    server_config = ConnectionConfig(**config) if config else None  # type: ignore[arg-type]
    a = Pair.established(server_config=server_config).server
    b = Pair.established(server_config=server_config).server
    return a, b


def _assert_same_server(a: Connection, b: Connection) -> None:
    assert a.state is b.state
    assert a.open_streams == b.open_streams
    assert a.received_position == b.received_position
    assert a.next_deadline() == b.next_deadline()
    for sid in a.open_streams:  # both answer alike
        a.send_payload(sid, b"answer", complete=True)
        b.send_payload(sid, b"answer", complete=True)
    assert a.data_to_send() == b.data_to_send()
    assert a.open_streams == b.open_streams == []


@st.composite
def _requests(draw: st.DrawFn) -> bytes:
    """A read: mostly one request (kinds, IDs, metadata varied), or several
    frames, or a part of them."""
    def one() -> bytes:
        ftype = draw(st.sampled_from([REQUEST_RESPONSE] * 4 + [REQUEST_FNF, REQUEST_STREAM]))
        sid = draw(st.sampled_from([1, 1, 3, 2, 0]))
        data = draw(st.binary(max_size=24))
        flags = draw(st.sampled_from([0, 0, M, F, C, N]))
        body = data
        if ftype == REQUEST_STREAM:
            body = struct.pack(">I", 1) + data
        if flags & M:
            md = draw(st.binary(max_size=6))
            md_len = draw(st.sampled_from([len(md), len(md), len(md) + 40]))
            body = md_len.to_bytes(3, "big") + md + body
        return _frame(sid, ftype, flags, body)

    if draw(st.integers(0, 3)) == 0:  # the read the path is for, often
        md = draw(st.none() | st.binary(max_size=6))
        data = draw(st.binary(max_size=24))
        if md is None:
            return _frame(1, REQUEST_RESPONSE, 0, data)
        return _frame(1, REQUEST_RESPONSE, M, len(md).to_bytes(3, "big") + md + data)
    frames = [one() for _ in range(draw(st.integers(1, 3)))]
    data = b"".join(frames)
    if draw(st.integers(0, 3)) == 0 and len(data) > 1:
        data = data[: draw(st.integers(1, len(data) - 1))]
    return data


@settings(max_examples=400, deadline=None)
@given(read=_requests())
def test_take_request_is_receive_data_for_a_lone_request_and_nothing_for_the_rest(
    read: bytes,
) -> None:
    a, b = _server_twins()
    taken = a.take_request(read, NOW)
    b_error = _feed(b, read)
    event("taken" if taken is not None else "left")
    if taken is None:
        assert a.events() == []
        assert _feed(a, read) == b_error
        assert a.events() == b.events()
    else:
        assert b_error is None
        sid, data, metadata = taken
        assert b.events() == [RequestResponseReceived(stream_id=sid, data=data, metadata=metadata)]
        assert a.events() == []
    _assert_same_server(a, b)


def test_a_request_for_an_open_stream_is_left_to_receive_data() -> None:
    """Spec 9.1 (a stream ID in use): not a new request; receive_data
    decides what it is."""
    a, _ = _server_twins()
    request = _frame(1, REQUEST_RESPONSE, 0, b"q")
    assert a.take_request(request, NOW) == (1, b"q", None)
    assert a.take_request(request, NOW) is None
    assert a.open_streams == [1]


def test_a_request_beyond_the_stream_limit_is_left_to_receive_data() -> None:
    a, b = _server_twins(max_concurrent_streams=1)
    assert a.take_request(_frame(1, REQUEST_RESPONSE, 0, b"q"), NOW) is not None
    b.receive_data(_frame(1, REQUEST_RESPONSE, 0, b"q"), NOW)
    b.events()
    second = _frame(3, REQUEST_RESPONSE, 0, b"r")
    assert a.take_request(second, NOW) is None
    assert _feed(a, second) == _feed(b, second)
    assert a.events() == b.events()
    assert a.data_to_send() == b.data_to_send()  # the refusal, alike


# -- the client's request written whole: request_response_frame ---------------


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=64),
    metadata=st.none() | st.binary(max_size=8),
    fragment_size=st.sampled_from([64, (1 << 24) - 1]),
    queued=st.booleans(),
)
def test_request_response_frame_is_request_response_then_data_to_send(
    data: bytes, metadata: bytes | None, fragment_size: int, queued: bool
) -> None:
    """The request alone, one frame: what ``request_response`` then
    ``data_to_send`` give (ID, bytes, stream and positions alike); anything
    else (output queued first, a fragmented request): None, and nothing
    changed."""
    config = ConnectionConfig(fragment_size=fragment_size)
    a = Pair.established(client_config=config).client
    b = Pair.established(client_config=config).client
    if queued:
        for conn in (a, b):
            conn.metadata_push(b"first")
    framed = a.request_response_frame(data, metadata)
    event("framed" if framed is not None else "left")
    if framed is None:
        assert a.open_streams == []
        assert a.sent_position == 0
        a.request_response(data, metadata)
        b.request_response(data, metadata)
        assert a.data_to_send() == b.data_to_send()
        assert a.sent_position == b.sent_position
        return
    sid, wire = framed
    assert b.request_response(data, metadata) == sid
    assert b.data_to_send() == wire
    assert a.sent_position == b.sent_position
    _assert_same(a, b, sid)
    answer = _frame(sid, PAYLOAD, N | C, b"a")  # and answered alike
    a.receive_data(answer, NOW)
    b.receive_data(answer, NOW)
    assert a.events() == b.events()
    _assert_same(a, b, sid)


def test_request_response_frame_is_none_for_a_resumable_session() -> None:
    """Every frame of a resumable session is retained (spec: Resuming
    Operation): that is the general path's to do."""
    store = SessionStore(keep_detached=30.0, max_retained=1 << 20)
    pair = ResumePair(None, ConnectionConfig(resume_buffer_size=1 << 20), store)
    assert pair.client.request_response_frame(b"q") is None
    sid = pair.client.request_response(b"q")  # retained, and answered, the general way
    pair.pump()
    _, requests = pair.take()
    assert [type(e).__name__ for e in requests] == ["RequestResponseReceived"]
    pair.server.send_payload(sid, b"a", complete=True)
    pair.pump()
    answers, _ = pair.take()
    assert [(type(e).__name__, e.data) for e in answers] == [("PayloadReceived", b"a")]  # type: ignore[attr-defined]


def test_request_response_frame_is_none_under_a_lease() -> None:
    client = Pair.established(lease=(60_000, 5)).client
    assert client.request_response_frame(b"q") is None
    client.request_response(b"q")  # the general path counts it against the lease


def test_request_response_frame_is_none_before_establishment() -> None:
    client = Pair(ConnectionConfig(), ConnectionConfig()).client
    assert client.request_response_frame(b"q") is None


def test_request_response_frame_takes_bytes_only() -> None:
    """An adapter may pass what its caller gave (a str): not this path's."""
    client = Pair.established().client
    assert client.request_response_frame("q") is None  # type: ignore[arg-type]
    assert client.request_response_frame(b"q", "md") is None  # type: ignore[arg-type]
    assert client.open_streams == []


# -- the server's answer: send_payload on a request-response ----------------


@pytest.mark.parametrize("data", [b"", b"answer", bytes(200)])
def test_rsocket_answer_to_a_request_response_is_one_payload_next_complete(data: bytes) -> None:
    """Spec (REQUEST_RESPONSE): the responder answers with one PAYLOAD,
    NEXT and COMPLETE; the stream is closed and forgotten at once, and no
    longer counts against ``max_concurrent_streams``."""
    a, _ = _server_twins(max_concurrent_streams=1)
    assert a.take_request(_frame(1, REQUEST_RESPONSE, 0, b"q"), NOW) is not None
    a.send_payload(1, data, complete=True)
    assert a.data_to_send() == _frame(1, PAYLOAD, N | C, data)
    assert a.open_streams == []
    with pytest.raises(LocalProtocolError):
        a.send_payload(1, b"again", complete=True)
    assert a.take_request(_frame(3, REQUEST_RESPONSE, 0, b"r"), NOW) is not None


def test_answering_the_last_stream_of_a_closing_connection_completes_the_close() -> None:
    """A graceful close waits for the open streams to drain: the answer to
    the last one ends it, whether the answer takes the one-frame path
    (``a``) or the general one (``b``: with metadata)."""
    a, b = _server_twins()
    for conn in (a, b):
        conn.receive_data(_frame(1, REQUEST_RESPONSE, 0, b"q"), NOW)
        conn.events()
        conn.close("bye")
    assert a.state is b.state is ConnectionState.CLOSING
    a.send_payload(1, b"answer", complete=True)
    b.send_payload(1, b"answer", b"md", complete=True)
    assert a.state is b.state is not ConnectionState.CLOSING
    assert a.events() == b.events()

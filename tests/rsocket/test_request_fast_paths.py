"""The hot paths for REQUEST_FNF / REQUEST_RESPONSE (sending and receiving)
and for a request-response answer must behave exactly as the general path:
same bytes on the wire, same events, same stream bookkeeping, same implied
positions, and the same spec rules (9.1 reused IDs, parity, stream limit,
leases, a response PAYLOAD completes the stream)."""

from __future__ import annotations

import pytest

from sansrs.rsocket import (
    ConnectionConfig,
    ErrorCode,
    ErrorFrame,
    PayloadFrame,
    RemoteProtocolError,
    RequestFnfFrame,
    RequestResponseFrame,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import (
    FireAndForgetReceived,
    PayloadReceived,
    RequestResponseReceived,
)
from tests.rsocket.pair import Pair, bytewise, whole


def _established(**config: int) -> Pair:
    server_config = ConnectionConfig(**config) if config else None  # type: ignore[arg-type]
    return Pair.established(server_config=server_config)


@pytest.mark.parametrize(
    ("send", "frame"),
    [
        (lambda c: c.request_fnf(b"hello"), lambda sid: RequestFnfFrame(sid, b"hello", None)),
        (lambda c: c.request_response(b""), lambda sid: RequestResponseFrame(sid, b"", None)),
        (
            lambda c: c.request_fnf(b"d", b"md"),
            lambda sid: RequestFnfFrame(sid, b"d", b"md"),
        ),
        (
            lambda c: c.request_response(b"d", b"\xfe\x00\x00\x05\x04echo"),
            lambda sid: RequestResponseFrame(sid, b"d", b"\xfe\x00\x00\x05\x04echo"),
        ),
        (lambda c: c.request_response(b"", b""), lambda sid: RequestResponseFrame(sid, b"", b"")),
        (lambda c: c.request_fnf(b"x", b""), lambda sid: RequestFnfFrame(sid, b"x", b"")),
    ],
)
def test_rsocket_request_frames_encoded_directly_match_the_codec(
    send: object, frame: object
) -> None:
    pair = _established()
    before = pair.client.sent_position
    sid = send(pair.client)  # type: ignore[operator]
    expected = encode_frame_prefixed(frame(sid))  # type: ignore[operator]
    assert pair.client.data_to_send() == expected
    assert pair.client.sent_position - before == len(expected) - 3


@pytest.mark.parametrize("chunker", [whole, bytewise])
def test_rsocket_fire_and_forget_and_request_response_received_on_the_fast_path(
    chunker: object,
) -> None:
    pair = Pair.established(chunker=chunker)  # type: ignore[arg-type]
    before = pair.server.received_position
    f1 = pair.client.request_fnf(b"a")
    r1 = pair.client.request_response(b"b")
    f2 = pair.client.request_fnf(b"c", b"m")  # metadata (a routed request's)
    sent = pair.client.sent_position
    pair.pump()
    assert pair.server_events == [
        FireAndForgetReceived(stream_id=f1, data=b"a", metadata=None),
        RequestResponseReceived(stream_id=r1, data=b"b", metadata=None),
        FireAndForgetReceived(stream_id=f2, data=b"c", metadata=b"m"),
    ]
    assert pair.server.received_position - before == sent - before
    assert pair.server.open_streams == [r1]
    pair.server.send_payload(r1, b"answer", complete=True)
    pair.pump()
    assert pair.client_events == [
        PayloadReceived(stream_id=r1, data=b"answer", metadata=None, complete=True, next=True)
    ]
    assert pair.client.open_streams == [] and pair.server.open_streams == []


def test_rsocket_request_response_answer_with_n_only_completes_the_stream() -> None:
    # Spec (Request Response): the response PAYLOAD completes the stream even
    # without the C flag; the hot path agrees with the general one.
    pair = _established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    pair.client.receive_data(encode_frame_prefixed(PayloadFrame(sid, b"r", None, next=True)))
    assert pair.client.events() == [
        PayloadReceived(stream_id=sid, data=b"r", metadata=None, complete=True, next=True)
    ]
    assert pair.client.open_streams == []
    # A second answer on the finished stream is ignored (spec 9.4).
    pair.client.receive_data(encode_frame_prefixed(PayloadFrame(sid, b"x", None, next=True)))
    assert pair.client.events() == []


def test_rsocket_request_on_a_stream_id_in_use_ignored_on_the_fast_path() -> None:
    pair = _established()
    sid = pair.client.request_response(b"first")
    pair.pump()
    assert pair.server.open_streams == [sid]
    before = pair.server.received_position
    again = encode_frame_prefixed(RequestResponseFrame(sid, b"again", None))
    fnf = encode_frame_prefixed(RequestFnfFrame(sid, b"fnf", None))
    pair.server.receive_data(again + fnf)
    assert pair.server.events() == []  # spec 9.1
    # Both still count for resumption positions.
    assert pair.server.received_position - before == len(again) + len(fnf) - 6


def test_rsocket_request_of_our_own_parity_rejected_not_announced() -> None:
    pair = _established()
    even = 2  # the server's own parity
    pair.server.receive_data(
        encode_frame_prefixed(RequestResponseFrame(even, b"x", None))
        + encode_frame_prefixed(RequestFnfFrame(even + 2, b"y", None))
    )
    assert pair.server.events() == []
    # REJECTED for the request-response, nothing for the FNF.
    assert pair.server.data_to_send() == encode_frame_prefixed(
        ErrorFrame(even, ErrorCode.REJECTED, b"stream ID has the wrong parity")
    )


def test_rsocket_request_beyond_max_concurrent_streams_rejected_on_the_fast_path() -> None:
    pair = _established(max_concurrent_streams=2)
    sids = [pair.client.request_response(b"r") for _ in range(3)]
    fnf = pair.client.request_fnf(b"f")  # not a stream: never limited
    pair.pump()
    received = pair.server_events
    assert [e.stream_id for e in received if isinstance(e, RequestResponseReceived)] == sids[:2]
    assert any(isinstance(e, FireAndForgetReceived) and e.stream_id == fnf for e in received)
    rejected = [
        e for e in pair.client_events if getattr(e, "stream_id", None) == sids[2]
    ]
    assert [getattr(e, "error_code", None) for e in rejected] == [ErrorCode.REJECTED]


def test_rsocket_requests_under_lease_take_the_general_path() -> None:
    # With leases the responder must count every request against its lease.
    pair = Pair.established(lease=(60_000, 1))
    first = pair.client.request_response(b"1")
    pair.pump()
    assert any(isinstance(e, RequestResponseReceived) for e in pair.server_events)
    # The lease allowed one request: a second one sent anyway is rejected.
    extra = pair.client.open_streams[-1] + 2 if pair.client.open_streams else first + 2
    pair.server.receive_data(encode_frame_prefixed(RequestResponseFrame(extra, b"2", None)))
    assert pair.server.events() == []
    out = pair.server.data_to_send()
    assert out == encode_frame_prefixed(
        ErrorFrame(extra, ErrorCode.REJECTED, b"request beyond the lease")
    )


def test_events_built_on_the_hot_paths_are_ordinary_frozen_events() -> None:
    # The hot paths fill a same-layout builder and assign __class__: the
    # result must be indistinguishable from the dataclass constructor's.
    import dataclasses

    from sansrs.rsocket._fast import fnf_event, payload_event, rr_event

    built = [
        (payload_event(3, b"d", b"m", True, False),
         PayloadReceived(stream_id=3, data=b"d", metadata=b"m", complete=True, next=False)),
        (fnf_event(5, b"f", None), FireAndForgetReceived(stream_id=5, data=b"f", metadata=None)),
        (rr_event(7, b"r", b"m"), RequestResponseReceived(stream_id=7, data=b"r", metadata=b"m")),
    ]
    for fast, normal in built:
        assert type(fast) is type(normal)
        assert fast == normal and hash(fast) == hash(normal) and repr(fast) == repr(normal)
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.stream_id = 9  # type: ignore[misc]
    # and what the parser itself builds for stream items
    pair = _established()
    sid = pair.client.request_stream(b"s", initial_n=2)
    pair.pump()
    pair.server.send_payload(sid, b"one")
    pair.pump()
    (item,) = [e for e in pair.take()[0] if isinstance(e, PayloadReceived)]
    assert type(item) is PayloadReceived
    assert item == PayloadReceived(stream_id=sid, data=b"one", metadata=None, complete=False,
                                   next=True)


def test_payload_frames_built_from_their_header_equal_the_constructed_ones() -> None:
    """``_fast.payload_frame`` (the decoder's and FrameReader's PAYLOAD path)
    against the dataclass constructor, for every value of the flag bits."""
    from sansrs.rsocket import FLAG_COMPLETE, FLAG_FOLLOWS, FLAG_IGNORE, FLAG_NEXT, PayloadFrame
    from sansrs.rsocket._fast import T_PAYLOAD, payload_frame

    for flags in range(0x400):
        built = payload_frame(9, b"x", T_PAYLOAD | flags)
        assert type(built) is PayloadFrame
        assert built == PayloadFrame(
            9,
            b"x",
            None,
            bool(flags & FLAG_FOLLOWS),
            bool(flags & FLAG_COMPLETE),
            bool(flags & FLAG_NEXT),
            bool(flags & FLAG_IGNORE),
        )


def test_enums_hashed_by_identity_behave_as_enums() -> None:
    """``_fast.identity_hash`` changes the speed of table lookups, nothing else."""
    import pickle

    from sansrs.rsocket import ConnectionState, StreamState

    for member in [*ConnectionState, *StreamState]:
        assert {member: 1}[member] == 1
        assert hash(member) == hash(member)
        assert pickle.loads(pickle.dumps(member)) is member
    assert len({*ConnectionState}) == len(ConnectionState)

@pytest.mark.parametrize("chunker", [whole, bytewise])
def test_rsocket_requests_with_metadata_received_on_the_fast_path(chunker: object) -> None:
    # Routed requests carry composite metadata: the same events as the codec gives.
    pair = Pair.established(chunker=chunker)  # type: ignore[arg-type]
    before = pair.server.received_position
    r1 = pair.client.request_response(b"data", b"meta")
    r2 = pair.client.request_response(b"", b"")
    f1 = pair.client.request_fnf(b"", b"only-metadata")
    sent = pair.client.sent_position
    pair.pump()
    assert pair.server_events == [
        RequestResponseReceived(stream_id=r1, data=b"data", metadata=b"meta"),
        RequestResponseReceived(stream_id=r2, data=b"", metadata=b""),
        FireAndForgetReceived(stream_id=f1, data=b"", metadata=b"only-metadata"),
    ]
    assert pair.server.received_position - before == sent - before
    assert pair.server.open_streams == [r1, r2]


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00\x00\x01\x11\x00\x00\x00\x09abc",  # metadata longer than the frame
        b"\x00\x00\x00\x01\x11\x00\x00\x00",  # no room for the metadata length
    ],
)
def test_rsocket_request_with_bad_metadata_length_is_a_connection_error(body: bytes) -> None:
    # The fast path leaves a malformed frame to the codec, which rejects it.
    pair = _established()
    with pytest.raises(RemoteProtocolError) as info:
        pair.server.receive_data(len(body).to_bytes(3, "big") + body)
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    assert not any(isinstance(e, RequestResponseReceived) for e in pair.server.events())

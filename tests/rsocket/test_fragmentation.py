"""Spec: Fragmentation And Reassembly."""

from __future__ import annotations

import pytest

from sansrs import RemoteProtocolError
from sansrs.rsocket import (
    CancelFrame,
    ConnectionConfig,
    ErrorCode,
    ErrorFrame,
    Frame,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import (
    FireAndForgetReceived,
    PayloadReceived,
    RequestChannelReceived,
    RequestResponseReceived,
    RequestStreamReceived,
)
from tests.rsocket.pair import Pair, bytewise, sized, whole

SMALL = ConnectionConfig(fragment_size=64)


def frames_of(data: bytes) -> list[Frame]:
    out = []
    off = 0
    while off < len(data):
        n = int.from_bytes(data[off : off + 3], "big")
        out.append(decode_frame(data[off + 3 : off + 3 + n]))
        off += 3 + n
    return out


def test_rsocket_fragmentation_payload_metadata_before_data() -> None:
    pair = Pair.established(server_config=SMALL)
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.pump()
    pair.server.send_payload(sid, b"D" * 100, metadata=b"M" * 100, complete=True)
    frames = frames_of(pair.server.data_to_send())
    assert len(frames) > 2
    assert all(isinstance(f, PayloadFrame) for f in frames)
    assert all(len(encode_frame_prefixed(f)) - 3 <= 64 for f in frames)
    seen_data = False
    for f in frames:
        assert isinstance(f, PayloadFrame)
        if seen_data:  # metadata goes completely before data
            assert f.metadata is None
        seen_data = seen_data or bool(f.data)
    assert [f.follows for f in frames] == [True] * (len(frames) - 1) + [False]  # type: ignore[union-attr]
    assert [f.complete for f in frames] == [False] * (len(frames) - 1) + [True]  # type: ignore[union-attr]
    assert b"".join(f.metadata or b"" for f in frames) == b"M" * 100  # type: ignore[union-attr]
    assert b"".join(f.data for f in frames) == b"D" * 100  # type: ignore[union-attr]


@pytest.mark.parametrize("chunker", [whole, bytewise, sized(7)])
@pytest.mark.parametrize(
    ("metadata", "data"),
    [(None, b"d" * 300), (b"m" * 300, b""), (b"m" * 150, b"d" * 150), (b"", b"d" * 200)],
)
def test_rsocket_fragmentation_payload_reassembled_and_counts_one_credit(
    chunker: object, metadata: bytes | None, data: bytes
) -> None:
    pair = Pair.established(server_config=SMALL, chunker=chunker)  # type: ignore[arg-type]
    sid = pair.client.request_stream(b"q", initial_n=2)
    pair.pump()
    pair.server.send_payload(sid, data, metadata=metadata)
    pair.server.send_payload(sid, b"second")  # a second credit was left
    pair.pump()
    assert pair.client_events == [
        PayloadReceived(stream_id=sid, data=data, metadata=metadata, complete=False, next=True),
        PayloadReceived(stream_id=sid, data=b"second", metadata=None, complete=False, next=True),
    ]


@pytest.mark.parametrize("kind", ["response", "fnf", "stream", "channel"])
def test_rsocket_fragmentation_request_as_request_then_payload_fragments(kind: str) -> None:
    pair = Pair.established(client_config=SMALL)
    md, data = b"M" * 90, b"D" * 90
    if kind == "response":
        sid = pair.client.request_response(data, md)
        first_type: type = RequestResponseFrame
        expected: object = RequestResponseReceived(stream_id=sid, data=data, metadata=md)
    elif kind == "fnf":
        sid = pair.client.request_fnf(data, md)
        first_type = RequestFnfFrame
        expected = FireAndForgetReceived(stream_id=sid, data=data, metadata=md)
    elif kind == "stream":
        sid = pair.client.request_stream(data, md, initial_n=4)
        first_type = RequestStreamFrame
        expected = RequestStreamReceived(stream_id=sid, data=data, metadata=md, initial_n=4)
    else:
        sid = pair.client.request_channel(data, md, initial_n=4, complete=True)
        first_type = RequestChannelFrame
        expected = RequestChannelReceived(
            stream_id=sid, data=data, metadata=md, initial_n=4, complete=True
        )
    out = pair.client.data_to_send()
    frames = frames_of(out)
    assert type(frames[0]) is first_type and frames[0].follows  # type: ignore[union-attr]
    assert all(type(f) is PayloadFrame for f in frames[1:])
    assert not frames[-1].follows  # type: ignore[union-attr]
    pair.server.receive_data(out)
    assert pair.server.events() == [expected]


def test_rsocket_fragmentation_cancel_during_fragmented_request() -> None:
    """The requester may CANCEL without finishing the fragments: the
    responder drops what it had and never announces the request."""
    pair = Pair.established()
    first = RequestResponseFrame(1, b"part", follows=True)
    pair.server.receive_data(encode_frame_prefixed(first))
    pair.server.receive_data(encode_frame_prefixed(CancelFrame(1)))
    pair.server.receive_data(encode_frame_prefixed(PayloadFrame(1, b"rest", next=True)))
    assert pair.server.events() == []
    assert pair.server.data_to_send() == b""
    assert pair.server.stream_state(1) is None


def test_rsocket_fragmentation_cancel_during_fragmented_payload() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    pair.client.receive_data(
        encode_frame_prefixed(PayloadFrame(sid, b"part", follows=True, next=True))
    )
    pair.client.cancel(sid)
    pair.client.receive_data(encode_frame_prefixed(PayloadFrame(sid, b"rest", next=True)))
    assert pair.client.events() == []


def test_rsocket_fragmentation_follows_and_complete_ends_reassembly() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    pair.client.receive_data(
        encode_frame_prefixed(PayloadFrame(sid, b"a", follows=True, next=True))
        + encode_frame_prefixed(PayloadFrame(sid, b"b", follows=True, complete=True, next=True))
    )
    assert pair.client.events() == [
        PayloadReceived(stream_id=sid, data=b"ab", metadata=None, complete=True, next=True)
    ]


def test_rsocket_fragmentation_max_reassembly_size_payload_is_connection_error() -> None:
    pair = Pair.established(client_config=ConnectionConfig(max_reassembly_size=100))
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    pair.client.receive_data(
        encode_frame_prefixed(PayloadFrame(sid, b"a" * 60, follows=True, next=True))
    )
    with pytest.raises(RemoteProtocolError) as info:
        pair.client.receive_data(
            encode_frame_prefixed(PayloadFrame(sid, b"a" * 60, follows=True, next=True))
        )
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_fragmentation_max_reassembly_size_request_rejected() -> None:
    pair = Pair.established(server_config=ConnectionConfig(max_reassembly_size=100))
    pair.server.receive_data(
        encode_frame_prefixed(RequestResponseFrame(1, b"a" * 60, follows=True))
    )
    pair.server.receive_data(
        encode_frame_prefixed(PayloadFrame(1, b"a" * 60, follows=True, next=True))
    )
    pair.server.receive_data(encode_frame_prefixed(PayloadFrame(1, b"a" * 60, next=True)))
    assert pair.server.events() == []
    frames = frames_of(pair.server.data_to_send())
    assert len(frames) == 1 and isinstance(frames[0], ErrorFrame)
    assert (frames[0].stream_id, frames[0].error_code) == (1, ErrorCode.REJECTED)


def test_rsocket_fragmentation_metadata_after_data_is_connection_error() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    pair.client.receive_data(
        encode_frame_prefixed(PayloadFrame(sid, b"d", follows=True, next=True))
    )
    with pytest.raises(RemoteProtocolError):
        pair.client.receive_data(encode_frame_prefixed(PayloadFrame(sid, b"d", b"m", next=True)))


def test_rsocket_fragmentation_message_framing() -> None:
    from sansrs.rsocket import Framing

    config = ConnectionConfig(framing=Framing.MESSAGES, fragment_size=64)
    pair = Pair.established(client_config=config, server_config=config)
    sid = pair.client.request_channel(b"x" * 500, initial_n=3)
    pair.pump()
    pair.server.request_n(sid, 1)
    pair.server.send_payload(sid, b"y" * 500, metadata=b"z" * 70, complete=True)
    pair.pump()
    pair.client.send_payload(sid, b"w" * 200, complete=True)
    pair.pump()
    assert pair.server_events[0] == RequestChannelReceived(
        stream_id=sid, data=b"x" * 500, metadata=None, initial_n=3, complete=False
    )
    assert pair.server_events[-1] == PayloadReceived(
        stream_id=sid, data=b"w" * 200, metadata=None, complete=True, next=True
    )
    assert pair.client_events[-1] == PayloadReceived(
        stream_id=sid, data=b"y" * 500, metadata=b"z" * 70, complete=True, next=True
    )


def test_rsocket_fragmentation_config_validates_fragment_size() -> None:
    with pytest.raises(ValueError):
        ConnectionConfig(fragment_size=10)
    with pytest.raises(ValueError):
        ConnectionConfig(max_frame_size=3)
    with pytest.raises(ValueError):
        ConnectionConfig(max_concurrent_streams=0)

"""What a peer can make a connection hold (docs/security.md): fragments
counted with what holding them costs, fragments per payload, reassemblies
in progress and their bytes per connection (spec: Fragmentation And
Reassembly leaves these limits to the implementation); the frames every
resumable session of a server retains, together (spec: Resuming
Operation)."""

from __future__ import annotations

import pytest

from sansrs import RemoteProtocolError
from sansrs.rsocket import (
    CancelFrame,
    ConnectionConfig,
    ErrorCode,
    ErrorFrame,
    PayloadFrame,
    RequestFnfFrame,
    RequestResponseFrame,
    SessionStore,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket._fragmentation import FRAGMENT_GRACE
from sansrs.rsocket.events import FireAndForgetReceived, RequestResponseReceived
from tests.rsocket.pair import Pair
from tests.rsocket.resume_pair import ResumePair
from tests.rsocket.resume_workload import item


def wire(*frames: object) -> bytes:
    return b"".join(encode_frame_prefixed(f) for f in frames)  # type: ignore[arg-type]


def errors_sent(pair: Pair) -> list[tuple[int, int]]:
    data = pair.server.data_to_send()
    out = []
    while data:
        n = int.from_bytes(data[:3], "big")
        frame = decode_frame(data[3 : 3 + n])
        if isinstance(frame, ErrorFrame):
            out.append((frame.stream_id, frame.error_code))
        data = data[3 + n :]
    return out


def test_rsocket_fragmentation_fragments_per_request_limited_rejected() -> None:
    pair = Pair.established(server_config=ConnectionConfig(max_fragments=10))
    fragments = [PayloadFrame(1, b"a", follows=True, next=True) for _ in range(10)]
    pair.server.receive_data(wire(RequestResponseFrame(1, b"a", follows=True), *fragments))
    assert errors_sent(pair) == [(1, ErrorCode.REJECTED)]
    assert pair.server.events() == []
    # The rest of that request is ignored; the connection goes on.
    pair.server.receive_data(wire(PayloadFrame(1, b"z", next=True), RequestResponseFrame(3, b"x")))
    assert pair.server.events() == [RequestResponseReceived(stream_id=3, data=b"x", metadata=None)]


def test_rsocket_fragmentation_fragments_per_payload_limited_connection_error() -> None:
    pair = Pair.established(client_config=ConnectionConfig(max_fragments=10))
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    with pytest.raises(RemoteProtocolError, match="more than 10 fragments") as info:
        for _ in range(11):
            pair.client.receive_data(wire(PayloadFrame(sid, b"a", follows=True, next=True)))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_fragmentation_tiny_fragments_are_charged_their_overhead() -> None:
    """100 one-byte fragments hold far more than 100 bytes: the connection's
    budget charges each its overhead (FRAGMENT_OVERHEAD)."""
    config = ConnectionConfig(max_reassembly_total=5000)
    pair = Pair.established(server_config=config)
    tiny = [PayloadFrame(1, b"a", follows=True, next=True) for _ in range(100)]
    with pytest.raises(RemoteProtocolError, match="hold more than 5000 bytes") as info:
        pair.server.receive_data(wire(RequestResponseFrame(1, b"a", follows=True), *tiny))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_fragmentation_reassemblies_in_progress_limited_fnf_included() -> None:
    pair = Pair.established(server_config=ConnectionConfig(max_reassemblies=3))
    pair.server.receive_data(wire(*(RequestFnfFrame(s, b"f", follows=True) for s in (1, 3, 5))))
    with pytest.raises(RemoteProtocolError, match="more than 3 fragmented") as info:
        pair.server.receive_data(wire(RequestFnfFrame(7, b"f", follows=True)))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_fragmentation_connection_wide_reassembly_bytes() -> None:
    """Unfinished requests, each within its own limit, are bounded together."""
    config = ConnectionConfig(max_reassembly_size=1000, max_reassembly_total=2000)
    pair = Pair.established(server_config=config)
    pair.server.receive_data(wire(RequestResponseFrame(1, b"a" * 900, follows=True)))
    pair.server.receive_data(wire(RequestResponseFrame(3, b"a" * 900, follows=True)))
    with pytest.raises(RemoteProtocolError, match="hold more than 2000 bytes"):
        pair.server.receive_data(wire(RequestResponseFrame(5, b"a" * 900, follows=True)))


def test_rsocket_fragmentation_finished_and_abandoned_reassemblies_free_their_share() -> None:
    config = ConnectionConfig(max_reassemblies=2, max_reassembly_total=3000)
    pair = Pair.established(server_config=config)
    for _ in range(20):  # far more than the budgets, one after the other
        pair.server.receive_data(
            wire(
                RequestFnfFrame(1, b"a" * 900, follows=True),
                PayloadFrame(1, b"b" * 900, next=True),  # completes
                RequestResponseFrame(3, b"c" * 900, follows=True),
                CancelFrame(3),  # the requester abandons it
                RequestFnfFrame(5, b"d", follows=True),
                PayloadFrame(5, b"e", next=True),
            )
        )
        events = pair.server.events()
        assert events == [
            FireAndForgetReceived(stream_id=1, data=b"a" * 900 + b"b" * 900, metadata=None),
            FireAndForgetReceived(stream_id=5, data=b"de", metadata=None),
        ]


def test_rsocket_resume_sessions_share_the_stores_retained_budget() -> None:
    """Sessions that read nothing back (no acknowledgement) retain, all
    together, what the store allows; past it the growing session is no
    longer resumable, the others stay resumable."""
    store = SessionStore(keep_detached=30.0, max_retained=200_000)
    config = ConnectionConfig(resume_buffer_size=10_000_000)
    pairs = [ResumePair(None, config, store) for _ in range(3)]
    sids = []
    for p in pairs:
        sid = p.client.request_stream(b"q", initial_n=100_000)
        p.pump()
        p.take()
        sids.append(sid)
    for i in range(4000):  # ~200 KB per session, never delivered nor acknowledged
        for p, sid in zip(pairs, sids, strict=True):
            if p.server.resumable:
                p.server.send_payload(sid, item(b"x" * 40, i))
    resumable = [p.server.resumable for p in pairs]
    assert resumable.count(True) >= 1 and resumable.count(False) >= 1
    assert store.retained.held <= store.retained.limit + 3 * 64 * 1024
    assert sum(p.server.retained_bytes for p in pairs) <= store.retained.limit + 3 * 64 * 1024
    # Sessions that end (here: never resumed after their transports died)
    # give their share back.
    for p in pairs:
        p.cut(0, 0)
    assert len(store.expire(1000.0)) == 3
    assert store.retained.held == 0


def test_rsocket_fragmentation_tiny_fragments_fail_the_connection_below_the_mean_size() -> None:
    """Finding: 2-byte FOLLOWS fragments cost 75 ms of CPU per MiB, and
    went on being parsed after their request was REJECTED. Fragments must
    average ``min_mean_fragment_size`` bytes (after FRAGMENT_GRACE of
    them), counted on every stream, the ignored ones too."""
    pair = Pair.established(server_config=ConnectionConfig(max_fragments=10))
    tiny = [PayloadFrame(1, b"ab", follows=True, next=True) for _ in range(FRAGMENT_GRACE)]
    pair.server.receive_data(wire(RequestResponseFrame(1, b"ab", follows=True), *tiny[:20]))
    assert errors_sent(pair) == [(1, ErrorCode.REJECTED)]  # max_fragments, as before
    # The rest arrive for a stream that is gone: ignored, but still charged
    # (the request's own frame with F and these: the grace, not beyond).
    pair.server.receive_data(wire(*tiny[20:-1]))
    with pytest.raises(RemoteProtocolError, match="min_mean_fragment_size") as info:
        pair.server.receive_data(wire(*tiny[:10]))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    assert errors_sent(pair) == [(0, ErrorCode.CONNECTION_ERROR)]
    assert "1025 fragments averaging 8 bytes, below min_mean_fragment_size (256)" in str(
        info.value
    )


def test_rsocket_fragmentation_fragments_at_the_mean_size_go_on() -> None:
    """A sender fragmenting at 256 bytes (frames of 256) is served however
    many fragments it sends; with the minimum at 0, any size is."""
    requests = FRAGMENT_GRACE  # 4 FOLLOWS fragments each: 4 x the grace
    for config, size in (
        (ConnectionConfig(), 256 - 6),
        (ConnectionConfig(min_mean_fragment_size=0), 2),
    ):
        pair = Pair.established(server_config=config)
        for sid in range(1, 2 * requests, 2):
            frames: list[object] = [RequestFnfFrame(sid, b"a" * size, follows=True)]
            frames += [PayloadFrame(sid, b"a" * size, follows=True, next=True) for _ in range(3)]
            frames.append(PayloadFrame(sid, b"z", next=True))
            pair.server.receive_data(wire(*frames))
        events = pair.server.events()
        assert len(events) == requests
        assert all(isinstance(e, FireAndForgetReceived) for e in events)


def test_rsocket_config_min_mean_fragment_size_is_validated() -> None:
    with pytest.raises(ValueError, match="min_mean_fragment_size"):
        ConnectionConfig(min_mean_fragment_size=-1)

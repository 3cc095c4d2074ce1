"""Length-prefix framing (TCP): FrameReader, LengthPrefixSplitter, encoders."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs.rsocket import (
    MAX_FRAME_LENGTH,
    CancelFrame,
    ErrorCode,
    FrameReader,
    FramingError,
    LengthPrefixSplitter,
    LocalProtocolError,
    PayloadFrame,
    RemoteProtocolError,
    RequestNFrame,
    SetupFrame,
    decode_frame,
    encode_frame,
    encode_frame_prefixed,
    encode_frames_prefixed,
    prefix_frames,
)
from tests.rsocket.strategies import frames, length_prefixed_stream, split_points

CONNECTION_ERROR = ErrorCode.CONNECTION_ERROR

FRAMES = [
    SetupFrame(500, 90000, "a/b", "t/p"),
    PayloadFrame(1, b"hello", None, next=True),
    PayloadFrame(1, b"x", b"meta", next=True, complete=True),
    RequestNFrame(3, 7),
    CancelFrame(5),
]


def test_prefix_layout() -> None:
    assert encode_frame_prefixed(CancelFrame(9)) == bytes.fromhex("000006 00000009 2400")
    assert encode_frame_prefixed(PayloadFrame(1, b"hi", next=True)) == bytes.fromhex(
        "000008 00000001 2820 6869"
    )


def test_encoders_agree() -> None:
    bodies = [encode_frame(f) for f in FRAMES]
    joined = b"".join(encode_frame_prefixed(f) for f in FRAMES)
    assert encode_frames_prefixed(FRAMES) == joined
    assert prefix_frames(bodies) == joined
    assert prefix_frames([]) == b"" == encode_frames_prefixed([])


@pytest.mark.parametrize("size", [0xFFFF - 7, 0xFFFF - 6, 0xFFFF - 5, 0xFFFF - 4])
@pytest.mark.parametrize("sid", [0, 1, 0x7FFFFFFF])
def test_rsocket_payload_copies_agree_at_their_limits(size: int, sid: int) -> None:
    """encode_frame, encode_frame_prefixed and encode_frames_prefixed each
    have their own PAYLOAD path (the prefixed ones only below 64 KiB);
    around that limit and at the stream-ID bounds all give the same bytes,
    and decode_frame / FrameReader.feed give the frame back."""
    frame = PayloadFrame(sid, bytes(size), None, follows=True, complete=True, next=True)
    body = encode_frame(frame)
    assert body[:6] == bytes.fromhex(f"{sid:08x}") + bytes.fromhex("28e0")  # PAYLOAD, F C N
    prefixed = len(body).to_bytes(3, "big") + body
    assert encode_frame_prefixed(frame) == prefixed
    assert encode_frames_prefixed([frame, CancelFrame(1), frame]) == b"".join(
        (prefixed, encode_frame_prefixed(CancelFrame(1)), prefixed)
    )
    assert decode_frame(body) == frame
    assert FrameReader().feed(prefixed * 2) == [frame, frame]


@pytest.mark.parametrize("sid", [-1, 0x80000000])
def test_rsocket_stream_id_out_of_range_rejected_by_every_payload_encoder(sid: int) -> None:
    """The 31-bit stream ID (spec: Frame Header Format): each PAYLOAD copy
    leaves an out-of-range ID to the checked path, which raises."""
    frame = PayloadFrame(sid, b"x", None, next=True)
    for encode in (encode_frame, encode_frame_prefixed, lambda f: encode_frames_prefixed([f])):
        with pytest.raises(LocalProtocolError, match="stream ID"):
            encode(frame)


def test_encode_prefixed_rejects_frame_over_24_bits() -> None:
    big = PayloadFrame(1, bytes(MAX_FRAME_LENGTH - 6 + 1))
    with pytest.raises(LocalProtocolError):
        encode_frame_prefixed(big)
    with pytest.raises(LocalProtocolError):
        encode_frames_prefixed([big])
    with pytest.raises(LocalProtocolError):
        prefix_frames([bytes(MAX_FRAME_LENGTH + 1)])
    with pytest.raises(LocalProtocolError):
        encode_frame_prefixed(PayloadFrame(1, bytes(MAX_FRAME_LENGTH - 9), b"m"))
    exact = PayloadFrame(1, bytes(MAX_FRAME_LENGTH - 6))
    assert len(encode_frame_prefixed(exact)) == MAX_FRAME_LENGTH + 3


def test_reader_whole_buffer_and_byte_by_byte() -> None:
    data = encode_frames_prefixed(FRAMES)
    assert FrameReader().feed(data) == FRAMES
    reader = FrameReader()
    out: list[Any] = []
    for i in range(len(data)):
        out += reader.feed(data[i : i + 1])
        assert reader.pending == (len(data[: i + 1]) - len(encode_frames_prefixed(out)))
    assert out == FRAMES
    assert reader.pending == 0


def test_splitter_whole_buffer_and_byte_by_byte() -> None:
    bodies = [encode_frame(f) for f in FRAMES]
    data = prefix_frames(bodies)
    assert LengthPrefixSplitter().feed(data) == bodies
    splitter = LengthPrefixSplitter()
    out: list[bytes] = []
    for i in range(len(data)):
        out += splitter.feed(data[i : i + 1])
    assert out == bodies
    assert all(type(b) is bytes for b in out)


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_reader_accepts_bytes_like(kind: type) -> None:
    data = encode_frames_prefixed(FRAMES)
    reader = FrameReader()
    assert reader.feed(kind(data[:10])) + reader.feed(kind(data[10:])) == FRAMES
    frame = FrameReader().feed(kind(data))[1]
    assert isinstance(frame, PayloadFrame) and type(frame.data) is bytes


def test_empty_feed() -> None:
    reader = FrameReader()
    assert reader.feed(b"") == []
    assert reader.feed(b"\x00") == []
    assert reader.feed(b"") == []
    assert reader.pending == 1


@pytest.mark.parametrize("cls", [FrameReader, LengthPrefixSplitter])
def test_oversize_length_raises_as_soon_as_the_prefix_arrives(cls: Any) -> None:
    reader = cls(max_frame_size=1024)
    assert reader.feed(b"\x00") == []
    with pytest.raises(FramingError) as info:
        reader.feed(b"\x04\x01")  # 1025
    assert info.value.error_code == CONNECTION_ERROR
    assert "exceeds the maximum frame size 1024" in info.value.message
    assert reader.pending == 0


@pytest.mark.parametrize("cls", [FrameReader, LengthPrefixSplitter])
def test_length_shorter_than_header_raises(cls: Any) -> None:
    with pytest.raises(FramingError) as info:
        cls().feed(b"\x00\x00\x05\x00\x00\x00\x01\x24")
    assert info.value.error_code == CONNECTION_ERROR
    assert "shorter than the 6-byte frame header" in info.value.message


@pytest.mark.parametrize("cls", [FrameReader, LengthPrefixSplitter])
def test_default_limit_is_the_24_bit_maximum(cls: Any) -> None:
    reader = cls()
    assert reader.max_frame_size == MAX_FRAME_LENGTH
    assert reader.feed(b"\xff\xff\xff\x00") == []  # 16 MiB - 1 is allowed
    assert reader.pending == 4


@pytest.mark.parametrize("size", [0, 5, MAX_FRAME_LENGTH + 1])
def test_invalid_max_frame_size(size: int) -> None:
    with pytest.raises(ValueError):
        FrameReader(max_frame_size=size)


def test_error_carries_the_frames_before_it_and_breaks_the_reader() -> None:
    good = encode_frames_prefixed(FRAMES[:2])
    bad = bytes.fromhex("00000a 00000001 2000 00000000")  # REQUEST_N with n = 0
    reader = FrameReader()
    with pytest.raises(FramingError) as info:
        reader.feed(good + bad + encode_frame_prefixed(FRAMES[3]))
    assert isinstance(info.value, RemoteProtocolError)
    assert info.value.frames == FRAMES[:2]
    assert info.value.error_code == CONNECTION_ERROR
    assert "request N must be > 0" in info.value.message
    with pytest.raises(FramingError) as again:
        reader.feed(encode_frame_prefixed(FRAMES[3]))
    assert again.value.frames == []
    assert again.value.message == info.value.message


def test_invalid_setup_code_passes_through() -> None:
    bad_setup = bytes.fromhex("000014 00000000 0400 0001 0000 00000000 00000001 00 00")
    with pytest.raises(FramingError) as info:
        FrameReader().feed(bad_setup)
    assert info.value.error_code == ErrorCode.INVALID_SETUP


def test_splitter_error_carries_bodies_before_it() -> None:
    bodies = [encode_frame(f) for f in FRAMES[:2]]
    with pytest.raises(FramingError) as info:
        LengthPrefixSplitter(max_frame_size=100).feed(prefix_frames(bodies) + b"\x00\x01\x00")
    assert info.value.frames == bodies


def test_reader_fast_path_falls_back_for_odd_payloads() -> None:
    """PAYLOAD frames the inline path does not take still decode right."""
    odd = [
        PayloadFrame(0, b"", None, complete=True),  # stream 0, empty data
        PayloadFrame(7, b"d", b"", next=True),  # with (empty) metadata
        PayloadFrame(0x7FFFFFFF, bytes(300), None, True, False, True, True),  # all flags
    ]
    assert FrameReader().feed(encode_frames_prefixed(odd)) == odd
    with pytest.raises(FramingError) as info:
        FrameReader().feed(bytes.fromhex("000007 80000001 2820 64"))  # reserved stream bit
    assert "reserved bit" in info.value.message


def test_large_frame_in_small_chunks() -> None:
    frame = PayloadFrame(1, bytes(range(256)) * 8192, None, next=True)  # 2 MiB
    data = encode_frame_prefixed(frame)
    reader = FrameReader()
    out: list[Any] = []
    for i in range(0, len(data), 4096):
        out += reader.feed(data[i : i + 4096])
        if not out:
            assert reader.pending == min(i + 4096, len(data))
    assert out == [frame]


# -- properties --------------------------------------------------------------


@given(st.data(), length_prefixed_stream())
def test_any_chunking_gives_the_same_frames(data: Any, stream: tuple[list[Any], bytes]) -> None:
    expected, encoded = stream
    chunks = data.draw(split_points(encoded))
    reader = FrameReader()
    splitter = LengthPrefixSplitter()
    got: list[Any] = []
    bodies: list[bytes] = []
    for chunk in chunks:
        got += reader.feed(chunk)
        bodies += splitter.feed(chunk)
    assert got == expected
    assert [decode_frame(b) for b in bodies] == expected
    assert reader.pending == splitter.pending == 0


def _run(reader: Any, chunks: list[bytes]) -> tuple[list[Any], tuple[str, int] | None]:
    out: list[Any] = []
    for chunk in chunks:
        try:
            out += reader.feed(chunk)
        except FramingError as exc:
            return out + exc.frames, (exc.message, exc.error_code)
    return out, None


@given(st.data(), st.binary(max_size=200))
def test_arbitrary_bytes_any_chunking_same_result_only_remote_errors(data: Any, raw: bytes) -> None:
    """Arbitrary bytes: nothing but RemoteProtocolError (FramingError) escapes,
    and any chunking gives the same frames followed by the same error."""
    chunks = data.draw(split_points(raw))
    limit = data.draw(st.sampled_from([6, 64, MAX_FRAME_LENGTH]))
    for cls in (FrameReader, LengthPrefixSplitter):
        whole = _run(cls(max_frame_size=limit), [raw])
        pieces = _run(cls(max_frame_size=limit), chunks)
        assert pieces == whole


@given(st.data(), st.lists(frames(), max_size=6), st.binary(max_size=40))
def test_valid_frames_then_garbage(data: Any, good: list[Any], garbage: bytes) -> None:
    raw = encode_frames_prefixed(good) + garbage
    chunks = data.draw(split_points(raw))
    out, _ = _run(FrameReader(), chunks)
    assert out[: len(good)] == good


@pytest.mark.parametrize("size", [0xFFFF - 7, 0xFFFF - 6, 0xFFFF - 5, 0x10000, 0x12345])
def test_prefixed_payload_around_the_16_bit_boundary(size: int) -> None:
    """encode_frame_prefixed packs short PAYLOADs with a 16-bit length; longer
    ones take the 24-bit path. Both must give the same layout."""
    frame = PayloadFrame(3, bytes(size), None, next=True)
    data = encode_frame_prefixed(frame)
    assert data[:3] == (size + 6).to_bytes(3, "big")
    assert data[3:] == encode_frame(frame)
    assert FrameReader().feed(data) == [frame]


@given(st.lists(frames(), max_size=10))
def test_bulk_encoder_matches_per_frame_encoder(many: list[Any]) -> None:
    joined = b"".join(encode_frame_prefixed(f) for f in many)
    assert encode_frames_prefixed(many) == joined
    assert encode_frames_prefixed(iter(many)) == joined
    assert prefix_frames(encode_frame(f) for f in many) == joined

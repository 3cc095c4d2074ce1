"""The rsio codec (docs/protocols/rsio.md §2, §3, §10)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs.rsio import (
    MAX_VARINT,
    Cancel,
    ClientHello,
    DecodeLimits,
    ErrorCode,
    Goodbye,
    GoodbyeAck,
    Incomplete,
    MessageType,
    OnComplete,
    OnError,
    OnNext,
    OnNextLastPart,
    OnNextPacked,
    OnNextPart,
    OnSubscribe,
    RemoteProtocolError,
    Request,
    ServerHello,
    Subscribe,
    decode_message,
    decode_varint,
    encode_message,
    encode_varint,
)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**63 - 1, b"\xff" * 8 + b"\x7f"),
    ],
)
def test_rsio_2_1_varint_is_unsigned_leb128(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize("encoded", [b"\x80\x00", b"\x81\x80\x00", b"\xff\x80\x80\x00"])
def test_rsio_2_1_overlong_varint_is_malformed(encoded: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_varint(encoded, 0)
    assert info.value.error_code == ErrorCode.MALFORMED


@pytest.mark.parametrize(
    "encoded",
    [b"\x80" * 8 + b"\x80\x01", b"\xff" * 9 + b"\x01", b"\xff" * 10 + b"\x7f"],
)
def test_rsio_2_1_varint_above_2_63_is_malformed(encoded: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_varint(encoded, 0)
    assert info.value.error_code == ErrorCode.MALFORMED


def test_rsio_2_1_varint_truncated_is_incomplete() -> None:
    with pytest.raises(Incomplete):
        decode_varint(b"\x80\x80", 0)


@pytest.mark.parametrize("value", [-1, 2**63, 2**64])
def test_rsio_2_1_encode_refuses_values_outside_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varint(value)


@pytest.mark.parametrize("raw", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"abc\xe2\x82"])
def test_rsio_2_2_invalid_utf8_is_malformed(raw: bytes) -> None:
    data = b"\x10" + encode_varint(len(raw)) + raw + b"\x01\x00"
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(data)
    assert info.value.error_code == ErrorCode.MALFORMED


def test_rsio_3_documented_examples() -> None:
    assert encode_message(OnNext(5, b"hi")) == bytes.fromhex("21050268 69".replace(" ", ""))
    assert encode_message(OnNext(5, b"hi"), 2) == bytes.fromhex("21056869")
    packed = OnNextPacked(5, b"\x00\x01\x00\x02")
    assert encode_message(packed, 2) == bytes.fromhex("22050200010002")
    assert encode_message(Request(300, 1)) == bytes.fromhex("11ac0201")


def test_rsio_3_message_codes() -> None:
    assert {m.name: m.value for m in MessageType} == {
        "CLIENT_HELLO": 0x01,
        "SERVER_HELLO": 0x02,
        "GOODBYE": 0x03,
        "GOODBYE_ACK": 0x04,
        "SUBSCRIBE": 0x10,
        "REQUEST": 0x11,
        "CANCEL": 0x12,
        "ON_SUBSCRIBE": 0x20,
        "ON_NEXT": 0x21,
        "ON_NEXT_PACKED": 0x22,
        "ON_NEXT_PART": 0x23,
        "ON_NEXT_LAST_PART": 0x24,
        "ON_COMPLETE": 0x25,
        "ON_ERROR": 0x26,
    }


@pytest.mark.parametrize("code", [0x00, 0x05, 0x0F, 0x13, 0x27, 0x7F, 0x80, 0xFF])
def test_rsio_8_unknown_or_reserved_type_cannot_be_skipped(code: int) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(bytes((code, 0, 0, 0)))
    assert info.value.error_code == ErrorCode.UNKNOWN_MESSAGE


def test_rsio_6_1_fixed_size_on_next_has_no_length() -> None:
    msg, end = decode_message(b"\x21\x07abcd\x25\x07", 0, lambda sid: 4)
    assert msg == OnNext(7, b"abcd")
    assert end == 6


def test_rsio_6_1_packed_needs_fixed_size_and_count() -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(b"\x22\x01\x01a", 0, lambda sid: 0)
    assert info.value.error_code == ErrorCode.UNEXPECTED_MESSAGE
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(b"\x22\x01\x00", 0, lambda sid: 1)
    assert info.value.error_code == ErrorCode.MALFORMED
    with pytest.raises(ValueError):
        encode_message(OnNextPacked(1, b"abc"), 2)


LIMITS = DecodeLimits(max_message_size=100, max_string_size=10, max_extensions=2)


@pytest.mark.parametrize(
    "data",
    [
        b"\x10\x0b" + b"a" * 11,  # publisher name
        b"\x03\x0b",  # goodbye reason, refused before the bytes arrive
        b"\x26\x01\x0b",  # onError message
        b"\x21\x01\x65",  # onNext of 101 bytes
        b"\x23\x01\x01\x65",  # part of 101 bytes
        b"\x20\x01\x65",  # elementSize 101
        b"\x01\x00\x03",  # 3 extension Ids
    ],
)
def test_rsio_10_limits_checked_as_soon_as_the_length_is_known(data: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(data, 0, lambda sid: 0, LIMITS)
    assert info.value.error_code == ErrorCode.LIMIT_EXCEEDED


def test_rsio_10_packed_size_limit() -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(b"\x22\x01\x0d", 0, lambda sid: 8, LIMITS)  # 13 * 8 > 100
    assert info.value.error_code == ErrorCode.LIMIT_EXCEEDED


ids = st.integers(0, MAX_VARINT)
text = st.text(max_size=20)
data = st.binary(max_size=40)
messages = st.one_of(
    st.builds(ClientHello, st.integers(0, 255), st.lists(ids, max_size=3).map(tuple)),
    st.builds(ServerHello, st.integers(0, 255), st.lists(ids, max_size=3).map(tuple)),
    st.builds(Goodbye, text),
    st.builds(GoodbyeAck, text),
    st.builds(Subscribe, text, ids, ids),
    st.builds(Request, ids, ids),
    st.builds(Cancel, ids),
    st.builds(OnSubscribe, ids, st.integers(0, 1000)),
    st.builds(OnNext, ids, data),
    st.builds(OnNextPart, ids, ids, data),
    st.builds(OnNextLastPart, ids, ids, data),
    st.builds(OnComplete, ids),
    st.builds(OnError, ids, text),
)


@given(messages)
def test_rsio_round_trip_every_message(msg: object) -> None:
    encoded = encode_message(msg)  # type: ignore[arg-type]
    assert decode_message(encoded) == (msg, len(encoded))
    for cut in range(len(encoded)):  # every strict prefix is incomplete
        with pytest.raises(Incomplete):
            decode_message(encoded[:cut])


@given(st.integers(1, 16), st.integers(1, 20), ids, st.data())
def test_rsio_round_trip_fixed_size(size: int, count: int, sid: int, d: st.DataObject) -> None:
    elements = d.draw(st.binary(min_size=size * count, max_size=size * count))
    packed = OnNextPacked(sid, elements)
    encoded = encode_message(packed, size)
    assert decode_message(encoded, 0, lambda s: size) == (packed, len(encoded))
    one = OnNext(sid, elements[:size])
    encoded = encode_message(one, size)
    assert decode_message(encoded, 0, lambda s: size) == (one, len(encoded))


@given(ids)
def test_rsio_2_1_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= 9
    assert decode_varint(b"x" + encoded, 1) == (value, len(encoded) + 1)

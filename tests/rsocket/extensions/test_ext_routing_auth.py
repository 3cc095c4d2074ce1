"""Routing and authentication metadata (RSocket extensions: Routing,
Authentication, Well-known Authentication Types, Simple, Bearer)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs.rsocket import FrameType
from sansrs.rsocket.extensions import (
    ALLOWED_FRAMES,
    AUTHENTICATION,
    ROUTING,
    Authentication,
    BearerAuth,
    CustomAuth,
    MetadataDecodeError,
    MetadataEncodeError,
    SimpleAuth,
    decode_authentication,
    decode_routing,
    encode_authentication,
    encode_routing,
)
from tests.rsocket.extensions.ext_strategies import auths, tags

REQUESTS = {
    FrameType.REQUEST_FNF,
    FrameType.REQUEST_RESPONSE,
    FrameType.REQUEST_STREAM,
    FrameType.REQUEST_CHANNEL,
}

# -- routing ------------------------------------------------------------------


def test_rsocket_routing_golden_bytes() -> None:
    # | Tag Length | Tag ... | per tag, no terminator
    assert encode_routing(["/person/1", "ios-client"]) == b"\x09/person/1\x0aios-client"
    assert decode_routing(b"\x08person.1") == ("person.1",)
    assert encode_routing("é") == b"\x02\xc3\xa9"  # UTF-8, length in bytes


def test_rsocket_routing_must_only_be_used_in_initiating_frames() -> None:
    assert ALLOWED_FRAMES[ROUTING] == REQUESTS


def test_rsocket_routing_tag_must_not_be_null_terminated() -> None:
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_routing(["echo\x00"])
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        decode_routing(b"\x05echo\x00")


def test_rsocket_routing_tag_longer_than_255_bytes_is_refused() -> None:
    encode_routing(["x" * 255])
    with pytest.raises(MetadataEncodeError, match="exceeds 255"):
        encode_routing(["x" * 256])
    with pytest.raises(MetadataEncodeError, match="exceeds 255"):
        encode_routing(["é" * 128])  # 256 bytes


def test_rsocket_routing_truncated_or_non_utf8_tag_is_rejected() -> None:
    with pytest.raises(MetadataDecodeError, match="truncated"):
        decode_routing(b"\x05echo")
    with pytest.raises(MetadataDecodeError, match="UTF-8"):
        decode_routing(b"\x02\xff\xfe")


def test_routing_encode_refuses_no_tag_and_non_text() -> None:
    with pytest.raises(MetadataEncodeError):
        encode_routing([])
    with pytest.raises(MetadataEncodeError):
        encode_routing([b"bytes"])  # type: ignore[list-item]
    with pytest.raises(MetadataEncodeError):
        encode_routing(["\ud800"])  # a lone surrogate is not UTF-8 encodable


@given(st.lists(tags, min_size=1, max_size=8))
def test_routing_round_trip(tag_list: list[str]) -> None:
    assert decode_routing(encode_routing(tag_list)) == tuple(tag_list)


@given(st.binary(max_size=300))
def test_routing_decoder_raises_only_decode_errors(data: bytes) -> None:
    try:
        decoded = decode_routing(data)
    except MetadataDecodeError:
        return
    assert encode_routing(decoded) == data if decoded else data == b""


# -- authentication -------------------------------------------------------------


def test_rsocket_authentication_golden_bytes() -> None:
    # |A| Auth ID/Len | payload: simple = 0x80, u16 user length, user, password
    assert encode_authentication(SimpleAuth("user", "pass")) == b"\x80\x00\x04userpass"
    # bearer = 0x81, the token
    assert encode_authentication(BearerAuth("t0ken")) == b"\x81t0ken"
    # custom: length - 1, the US-ASCII type name, the payload
    assert encode_authentication(CustomAuth("x-hmac", b"\x01\x02")) == b"\x05x-hmac\x01\x02"
    assert decode_authentication(b"\x80\x00\x04userpass") == SimpleAuth("user", "pass")
    assert decode_authentication(b"\x81t0ken") == BearerAuth("t0ken")
    assert decode_authentication(b"\x05x-hmac\x01\x02") == CustomAuth("x-hmac", b"\x01\x02")


def test_rsocket_authentication_must_only_be_used_in_setup_and_initiating_frames() -> None:
    assert ALLOWED_FRAMES[AUTHENTICATION] == REQUESTS | {FrameType.SETUP}


def test_rsocket_authentication_type_must_not_be_null_terminated() -> None:
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_authentication(CustomAuth("x-a\x00", b""))
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        decode_authentication(b"\x03x-a\x00")


def test_rsocket_authentication_reserved_well_known_id_is_rejected() -> None:
    with pytest.raises(MetadataDecodeError, match="reserved"):
        decode_authentication(b"\x82token")


def test_rsocket_authentication_custom_spelling_of_well_known_type_decodes_as_it() -> None:
    assert decode_authentication(b"\x05simple\x00\x01ab") == SimpleAuth("a", "b")
    assert decode_authentication(b"\x05bearer" + b"tok") == BearerAuth("tok")
    with pytest.raises(MetadataEncodeError, match="SimpleAuth"):
        encode_authentication(CustomAuth("simple", b""))


def test_rsocket_simple_username_and_password_must_not_be_null_terminated() -> None:
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_authentication(SimpleAuth("user\x00", "p"))
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_authentication(SimpleAuth("user", "p\x00"))
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        decode_authentication(b"\x80\x00\x02u\x00p")
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        decode_authentication(b"\x80\x00\x01up\x00")


def test_rsocket_simple_username_length_is_16_bits() -> None:
    encode_authentication(SimpleAuth("u" * 0xFFFF, ""))
    with pytest.raises(MetadataEncodeError, match="exceeds 65535"):
        encode_authentication(SimpleAuth("u" * 0x10000, ""))


def test_rsocket_simple_truncated_payload_is_rejected() -> None:
    for bad in (b"\x80", b"\x80\x00", b"\x80\x00\x05abc"):
        with pytest.raises(MetadataDecodeError, match="truncated"):
            decode_authentication(bad)


def test_rsocket_simple_utf8_is_checked() -> None:
    assert decode_authentication(b"\x80\x00\x02\xc3\xa9\xe2\x82\xac") == SimpleAuth("é", "€")
    with pytest.raises(MetadataDecodeError, match="UTF-8"):
        decode_authentication(b"\x80\x00\x01\xffp")


def test_rsocket_bearer_token_must_not_be_null_terminated() -> None:
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_authentication(BearerAuth("t\x00"))
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        decode_authentication(b"\x81t\x00")


def test_authentication_repr_hides_secrets() -> None:
    assert "hunter2" not in repr(SimpleAuth("ann", "hunter2"))
    assert "tok" not in repr(BearerAuth("tok"))
    assert "secret" not in repr(CustomAuth("x", b"secret"))


def test_authentication_encode_refuses_non_authentication() -> None:
    with pytest.raises(MetadataEncodeError):
        encode_authentication("user:pass")  # type: ignore[arg-type]


@given(auths)
def test_authentication_round_trip(auth: Authentication) -> None:
    assert decode_authentication(encode_authentication(auth)) == auth


@given(st.binary(max_size=200))
def test_authentication_decoder_raises_only_decode_errors(data: bytes) -> None:
    try:
        auth = decode_authentication(data)
    except MetadataDecodeError:
        return
    assert isinstance(auth, SimpleAuth | BearerAuth | CustomAuth)

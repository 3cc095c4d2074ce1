"""Well-known MIME types and authentication types: every id of the spec
tables, both directions; the ``M|ID/Len`` header's rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.rsocket.extensions import (
    ID_BY_MIME,
    MIME_BY_ID,
    MetadataDecodeError,
    MetadataEncodeError,
    WellKnownAuthType,
    WellKnownMimeType,
    decode_data_mime,
    encode_data_mime,
    mime_id,
    mime_name,
)
from sansrs.rsocket.extensions.mime import decode_name, encode_name

# The table of the spec (RSocket extension: Well-known MIME Types), row by row.
SPEC_TABLE = """
application/avro 0x00
application/cbor 0x01
application/graphql 0x02
application/gzip 0x03
application/javascript 0x04
application/json 0x05
application/octet-stream 0x06
application/pdf 0x07
application/vnd.apache.thrift.binary 0x08
application/vnd.google.protobuf 0x09
application/xml 0x0A
application/zip 0x0B
audio/aac 0x0C
audio/mp3 0x0D
audio/mp4 0x0E
audio/mpeg3 0x0F
audio/mpeg 0x10
audio/ogg 0x11
audio/opus 0x12
audio/vorbis 0x13
image/bmp 0x14
image/gif 0x15
image/heic-sequence 0x16
image/heic 0x17
image/heif-sequence 0x18
image/heif 0x19
image/jpeg 0x1A
image/png 0x1B
image/tiff 0x1C
multipart/mixed 0x1D
text/css 0x1E
text/csv 0x1F
text/html 0x20
text/plain 0x21
text/xml 0x22
video/H264 0x23
video/H265 0x24
video/VP8 0x25
application/x-hessian 0x26
application/x-java-object 0x27
application/cloudevents+json 0x28
application/x-capnp 0x29
application/x-flatbuffers 0x2A
message/x.rsocket.mime-type.v0 0x7A
message/x.rsocket.accept-mime-types.v0 0x7b
message/x.rsocket.authentication.v0 0x7C
message/x.rsocket.tracing-zipkin.v0 0x7D
message/x.rsocket.routing.v0 0x7E
message/x.rsocket.composite-metadata.v0 0x7F
"""
ROWS = [(name, int(ident, 16)) for name, ident in (r.split() for r in SPEC_TABLE.split("\n") if r)]
RESERVED = sorted(set(range(128)) - {i for _, i in ROWS})


def test_rsocket_well_known_mime_table_is_the_spec_table() -> None:
    assert dict(MIME_BY_ID) == {i: n for n, i in ROWS}
    assert dict(ID_BY_MIME) == dict(ROWS)
    assert len(WellKnownMimeType) == len(ROWS) == 49
    assert {m.value: m.mime for m in WellKnownMimeType} == {i: n for n, i in ROWS}


@pytest.mark.parametrize(("name", "ident"), ROWS, ids=[n for n, _ in ROWS])
def test_rsocket_well_known_mime_every_id_both_directions(name: str, ident: int) -> None:
    assert mime_name(ident) == name
    assert mime_id(name) == ident
    assert WellKnownMimeType(ident).mime == name
    # On the wire: the one-byte form with the M flag, and back.
    assert encode_data_mime(name) == bytes((0x80 | ident,))
    assert encode_data_mime(ident) == bytes((0x80 | ident,))
    assert decode_data_mime(bytes((0x80 | ident,))) == name


@pytest.mark.parametrize("ident", RESERVED)
def test_rsocket_well_known_mime_reserved_id_is_rejected(ident: int) -> None:
    with pytest.raises(MetadataDecodeError, match="reserved") as info:
        decode_name(bytes((0x80 | ident,)), 0, MIME_BY_ID, "x")
    assert isinstance(info.value, RemoteProtocolError)
    with pytest.raises(KeyError):
        mime_name(ident)
    with pytest.raises(MetadataEncodeError):
        encode_data_mime(ident)


def test_rsocket_well_known_mime_lookup_is_exact() -> None:
    # The table's spelling, as rsocket-java matches it.
    assert mime_id("video/H264") == 0x23
    assert mime_id("video/h264") is None
    assert mime_id("application/x-unknown") is None


def test_rsocket_well_known_auth_types_are_the_spec_table() -> None:
    assert {t.auth_type: t.value for t in WellKnownAuthType} == {"simple": 0x00, "bearer": 0x01}


def test_rsocket_mime_header_custom_name_length_is_stored_minus_one() -> None:
    assert encode_name("a/b", ID_BY_MIME, MIME_BY_ID, "x") == b"\x02a/b"
    assert decode_name(b"\x02a/b", 0, MIME_BY_ID, "x") == ("a/b", False, 4)
    longest = "x/" + "y" * 126
    assert encode_name(longest, ID_BY_MIME, MIME_BY_ID, "x") == b"\x7f" + longest.encode()


@pytest.mark.parametrize("name", ["", "x/" + "y" * 127, "text/pläin"])
def test_rsocket_mime_header_unencodable_names_raise_encode_error(name: str) -> None:
    with pytest.raises(MetadataEncodeError) as info:
        encode_name(name, ID_BY_MIME, MIME_BY_ID, "x")
    assert isinstance(info.value, LocalProtocolError) and isinstance(info.value, ValueError)


def test_rsocket_mime_header_name_must_not_be_null_terminated() -> None:
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_name("text/x\x00", ID_BY_MIME, MIME_BY_ID, "x")
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        decode_name(b"\x02a/\x00", 0, MIME_BY_ID, "x")


def test_rsocket_mime_header_non_ascii_name_is_rejected() -> None:
    with pytest.raises(MetadataDecodeError, match="US-ASCII"):
        decode_name(b"\x02a/\xe9", 0, MIME_BY_ID, "x")


def test_rsocket_mime_header_truncated_name_is_rejected() -> None:
    with pytest.raises(MetadataDecodeError, match="truncated"):
        decode_name(b"\x05a/b", 0, MIME_BY_ID, "x")
    with pytest.raises(MetadataDecodeError, match="truncated"):
        decode_name(b"", 0, MIME_BY_ID, "x")


@given(st.binary(max_size=200), st.integers(0, 10))
def test_mime_header_decoder_raises_only_decode_errors(data: bytes, offset: int) -> None:
    try:
        name, known, end = decode_name(data, offset, MIME_BY_ID, "x")
    except MetadataDecodeError:
        return
    assert offset < end <= len(data)
    assert known == bool(data[offset] & 0x80)
    assert 1 <= len(name) <= 128

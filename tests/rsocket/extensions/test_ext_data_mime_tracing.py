"""Per-stream data MIME types (RSocket extension: Stream Data MIME Types
Metadata) and Zipkin tracing (RSocket extension: Tracing (Zipkin))."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs.rsocket import FrameType
from sansrs.rsocket.extensions import (
    ACCEPT_MIME_TYPES,
    ALLOWED_FRAMES,
    DATA_MIME_TYPE,
    TRACING_ZIPKIN,
    MetadataDecodeError,
    MetadataEncodeError,
    Sampling,
    ZipkinTrace,
    compose,
    decode_accept_mimes,
    decode_data_mime,
    decode_metadata,
    decode_zipkin,
    effective_data_mime,
    encode_accept_mimes,
    encode_data_mime,
    encode_zipkin,
    needs_response_mime,
    response_data_mime,
)
from tests.rsocket.extensions.ext_strategies import mimes, traces

REQUESTS = {
    FrameType.REQUEST_FNF,
    FrameType.REQUEST_RESPONSE,
    FrameType.REQUEST_STREAM,
    FrameType.REQUEST_CHANNEL,
}

# -- per-stream data MIME ------------------------------------------------------


def test_rsocket_data_mime_golden_bytes() -> None:
    # |M| MIME ID/Len | name ... ; one for "one", several for "accept"
    assert encode_data_mime("application/json") == b"\x85"
    assert encode_data_mime("text/x-a") == b"\x07text/x-a"
    assert encode_accept_mimes(["application/json", "text/x-a"]) == b"\x85\x07text/x-a"
    assert decode_accept_mimes(b"\x85\x07text/x-a\xa1") == (
        "application/json",
        "text/x-a",
        "text/plain",
    )


def test_rsocket_data_mime_must_only_be_used_in_initiating_frames() -> None:
    assert ALLOWED_FRAMES[DATA_MIME_TYPE] == REQUESTS
    assert ALLOWED_FRAMES[ACCEPT_MIME_TYPES] == REQUESTS


def test_rsocket_data_mime_absent_setup_mime_must_be_used() -> None:
    none = decode_metadata(compose("r"))
    assert effective_data_mime(none, "application/cbor") == "application/cbor"
    declared = decode_metadata(compose("r", data_mime="application/json"))
    assert effective_data_mime(declared, "application/cbor") == "application/json"


def test_rsocket_data_mime_responder_other_type_must_be_declared() -> None:
    accept = decode_metadata(compose("r", accept=["application/json", "text/plain"]))
    assert not needs_response_mime(accept, "application/cbor", "text/plain")
    assert needs_response_mime(accept, "application/cbor", "application/xml")
    plain = decode_metadata(compose("r", data_mime="application/json"))
    assert not needs_response_mime(plain, "application/cbor", "application/json")
    assert needs_response_mime(plain, "application/cbor", "application/cbor")
    bare = decode_metadata(compose("r"))
    assert not needs_response_mime(bare, "application/cbor", "application/cbor")


def test_rsocket_data_mime_responder_accept_must_be_ignored_by_requester() -> None:
    answer = compose(accept=["application/xml"], entries=[(DATA_MIME_TYPE, b"\x85")])
    assert response_data_mime(answer, "text/plain") == "application/json"
    only_accept = compose(accept=["application/xml"])
    assert response_data_mime(only_accept, "text/plain") == "text/plain"
    assert response_data_mime(None, "text/plain") == "text/plain"


def test_rsocket_data_mime_order_must_be_preserved() -> None:
    order = ["text/x-b", "application/json", "text/x-a"]
    assert decode_accept_mimes(encode_accept_mimes(order)) == tuple(order)
    two = compose(accept=["a/1"], entries=[(ACCEPT_MIME_TYPES, encode_accept_mimes(["b/2"]))])
    assert decode_metadata(two).accept == ("a/1", "b/2")


def test_rsocket_data_mime_must_not_be_null_terminated() -> None:
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_data_mime("text/x\x00")
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        decode_data_mime(b"\x01a\x00")


def test_rsocket_data_mime_reserved_id_and_trailing_bytes_are_rejected() -> None:
    with pytest.raises(MetadataDecodeError, match="reserved"):
        decode_data_mime(b"\xab")
    with pytest.raises(MetadataDecodeError, match="reserved"):
        decode_accept_mimes(b"\x85\xab")
    with pytest.raises(MetadataDecodeError, match="after the MIME type"):
        decode_data_mime(b"\x85\x85")
    with pytest.raises(MetadataDecodeError, match="truncated"):
        decode_data_mime(b"")
    with pytest.raises(MetadataEncodeError):
        encode_accept_mimes([])


@given(st.lists(mimes, min_size=1, max_size=6))
def test_data_mime_round_trips(mime_list: list[str]) -> None:
    assert decode_data_mime(encode_data_mime(mime_list[0])) == mime_list[0]
    assert decode_accept_mimes(encode_accept_mimes(mime_list)) == tuple(mime_list)


# -- tracing (zipkin) -----------------------------------------------------------


def test_rsocket_tracing_zipkin_must_only_be_used_in_initiating_frames_and_payload() -> None:
    assert ALLOWED_FRAMES[TRACING_ZIPKIN] == REQUESTS | {FrameType.PAYLOAD}


def test_rsocket_tracing_zipkin_golden_bytes() -> None:
    # flags I|S|P, 64-bit trace id, span id, parent span id
    wire = bytes([0x80 | 0x20 | 0x04]) + (1).to_bytes(8, "big") + (2).to_bytes(8, "big") + (
        3
    ).to_bytes(8, "big")
    trace = decode_zipkin(wire)
    assert trace == ZipkinTrace(
        sampling=Sampling.SAMPLED, trace_id=1, span_id=2, parent_span_id=3
    )
    assert encode_zipkin(trace) == wire
    # I|D|T: a 128-bit trace id (high then low 64 bits), no parent
    wide = bytes([0x80 | 0x40 | 0x08]) + (2**100 + 7).to_bytes(16, "big") + (9).to_bytes(8, "big")
    assert decode_zipkin(wide) == ZipkinTrace(
        sampling=Sampling.DEBUG, trace_id=2**100 + 7, span_id=9, trace_id_128=True
    )


def test_rsocket_tracing_zipkin_without_ids_carries_only_sampling() -> None:
    # "a health check might set only the Not Sampled flag without generating IDs"
    assert decode_zipkin(b"\x10") == ZipkinTrace(sampling=Sampling.NOT_SAMPLED)
    assert encode_zipkin(ZipkinTrace(sampling=Sampling.NOT_SAMPLED)) == b"\x10"
    assert decode_zipkin(b"\x00").sampling is Sampling.UNDECIDED


def test_rsocket_tracing_zipkin_sampled_is_ignored_when_debug_is_set() -> None:
    assert decode_zipkin(b"\x60").sampling is Sampling.DEBUG
    assert decode_zipkin(b"\x70").sampling is Sampling.DEBUG


def test_rsocket_tracing_zipkin_not_sampled_is_ignored_when_sampled_or_debug_is_set() -> None:
    assert decode_zipkin(b"\x30").sampling is Sampling.SAMPLED
    assert decode_zipkin(b"\x50").sampling is Sampling.DEBUG


def test_rsocket_tracing_zipkin_lengths_must_match_the_flags() -> None:
    for bad in (b"", b"\x80" + bytes(15), b"\x88" + bytes(16), b"\x84" + bytes(16), b"\x10\x00"):
        with pytest.raises(MetadataDecodeError):
            decode_zipkin(bad)
    with pytest.raises(MetadataDecodeError, match="too long"):
        decode_zipkin(b"\x80" + bytes(17))


def test_tracing_zipkin_encode_refuses_inconsistent_ids() -> None:
    with pytest.raises(MetadataEncodeError):
        encode_zipkin(ZipkinTrace(span_id=1))
    with pytest.raises(MetadataEncodeError):
        encode_zipkin(ZipkinTrace(trace_id=1))
    with pytest.raises(MetadataEncodeError, match="out of range"):
        encode_zipkin(ZipkinTrace(trace_id=2**64, span_id=1))
    with pytest.raises(MetadataEncodeError, match="out of range"):
        encode_zipkin(ZipkinTrace(trace_id=1, span_id=-1))


@given(traces())
def test_tracing_zipkin_round_trip(trace: ZipkinTrace) -> None:
    assert decode_zipkin(encode_zipkin(trace)) == trace


@given(st.binary(max_size=40))
def test_tracing_zipkin_decoder_raises_only_decode_errors(data: bytes) -> None:
    try:
        trace = decode_zipkin(data)
    except MetadataDecodeError:
        return
    assert encode_zipkin(trace)[1:] == data[1:]

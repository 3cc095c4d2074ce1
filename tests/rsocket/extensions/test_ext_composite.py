"""Composite metadata (RSocket extension: Composite Metadata): golden bytes
from the spec's layout, strict decoding, a lazy zero-copy iterator, round
trips of arbitrary entry mixes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs import RemoteProtocolError
from sansrs.rsocket import FrameType
from sansrs.rsocket.extensions import (
    ALLOWED_FRAMES,
    COMPOSITE_METADATA,
    CompositeEntry,
    MetadataDecodeError,
    MetadataEncodeError,
    encode_composite,
    iter_composite,
)
from tests.rsocket.extensions.ext_strategies import mimes

# |M| MIME ID/Len | MIME name ... | 24-bit length | content ...
GOLDEN = [
    # well-known application/json (0x05): M flag set, no name
    ([("application/json", b'{"a":1}')], b"\x85\x00\x00\x07" + b'{"a":1}'),
    # custom "text/x-a" (8 bytes, stored as 7), then the routing well-known id 0x7E
    (
        [("text/x-a", b"hi"), ("message/x.rsocket.routing.v0", b"\x04echo")],
        b"\x07text/x-a\x00\x00\x02hi" + b"\xfe\x00\x00\x05\x04echo",
    ),
    # an empty content is a zero length
    ([("application/cbor", b"")], b"\x81\x00\x00\x00"),
]


@pytest.mark.parametrize(("entries", "wire"), GOLDEN)
def test_rsocket_composite_metadata_golden_bytes(
    entries: list[tuple[str, bytes]], wire: bytes
) -> None:
    assert encode_composite(entries) == wire
    assert [(e.mime, bytes(e.content)) for e in iter_composite(wire)] == entries


def test_rsocket_composite_metadata_well_known_mime_is_sent_as_its_id() -> None:
    assert encode_composite([("application/json", b"")]) == b"\x85\x00\x00\x00"
    assert encode_composite([(0x05, b"")]) == b"\x85\x00\x00\x00"
    (entry,) = iter_composite(b"\x85\x00\x00\x00")
    assert entry.well_known
    # A custom spelling of a well-known name is read as that name.
    (entry,) = iter_composite(b"\x0fapplication/json\x00\x00\x00")
    assert entry.mime == "application/json" and not entry.well_known


def test_rsocket_composite_metadata_order_must_be_preserved() -> None:
    entries = [("a/1", b"x"), ("application/json", b"y"), ("a/1", b"z"), ("b/2", b"")]
    wire = encode_composite(entries)
    assert [(e.mime, bytes(e.content)) for e in iter_composite(wire)] == entries


def test_rsocket_composite_metadata_same_mime_several_times_is_allowed() -> None:
    wire = encode_composite([("text/plain", b"1"), ("text/plain", b"2")])
    assert [bytes(e.content) for e in iter_composite(wire)] == [b"1", b"2"]


def test_rsocket_composite_metadata_must_only_be_used_in_initiating_frames() -> None:
    assert ALLOWED_FRAMES[COMPOSITE_METADATA] == {
        FrameType.REQUEST_FNF,
        FrameType.REQUEST_RESPONSE,
        FrameType.REQUEST_STREAM,
        FrameType.REQUEST_CHANNEL,
        FrameType.SETUP,  # as the SETUP's metadata MIME type
    }
    for frame in (FrameType.PAYLOAD, FrameType.METADATA_PUSH, FrameType.LEASE, FrameType.ERROR):
        assert frame not in ALLOWED_FRAMES[COMPOSITE_METADATA]


def test_rsocket_composite_metadata_mime_must_not_be_null_terminated() -> None:
    with pytest.raises(MetadataEncodeError, match="null terminated"):
        encode_composite([("text/x\x00", b"")])
    with pytest.raises(MetadataDecodeError, match="null terminated"):
        list(iter_composite(b"\x06text/\x00\x00\x00\x00"))


def test_rsocket_composite_metadata_reserved_id_is_rejected() -> None:
    with pytest.raises(MetadataDecodeError, match="reserved well-known id 0x2b"):
        list(iter_composite(b"\xab\x00\x00\x00"))


def test_rsocket_composite_metadata_over_long_mime_name_is_rejected() -> None:
    with pytest.raises(MetadataEncodeError, match=r"1\.\.128"):
        encode_composite([("x/" + "y" * 127, b"")])
    # The longest name the 7-bit length allows still encodes.
    longest = "x/" + "y" * 126
    (entry,) = iter_composite(encode_composite([(longest, b"v")]))
    assert entry.mime == longest


def test_rsocket_composite_metadata_content_longer_than_24_bits_is_refused() -> None:
    with pytest.raises(MetadataEncodeError, match="exceeds"):
        encode_composite([("a/b", memoryview(bytearray(0x1000000)))])


def test_rsocket_composite_metadata_truncated_entry_is_rejected_at_every_cut() -> None:
    wire = encode_composite([("text/x-a", b"hello"), ("application/json", b"{}")])
    boundaries = {0, len(wire), 17}  # 17: after the first entry
    for cut in range(len(wire) + 1):
        data = wire[:cut]
        if cut in boundaries:
            list(iter_composite(data))
            continue
        with pytest.raises(MetadataDecodeError, match="truncated") as info:
            list(iter_composite(data))
        assert isinstance(info.value, RemoteProtocolError)
        assert info.value.error_code == 0x204  # INVALID: what a responder answers


def test_composite_iterator_is_lazy_and_yields_entries_before_a_bad_one() -> None:
    good = encode_composite([("a/b", b"1"), ("c/d", b"2")])
    entries = iter_composite(good + b"\xab")  # then a reserved id
    assert bytes(next(entries).content) == b"1"
    assert bytes(next(entries).content) == b"2"
    with pytest.raises(MetadataDecodeError):
        next(entries)


def test_composite_iterator_is_zero_copy() -> None:
    wire = encode_composite([("a/b", b"x" * 1000)])
    (entry,) = iter_composite(wire)
    assert isinstance(entry.content, memoryview)
    assert entry.content.obj is wire  # a view of the input, not a copy
    # bytearray and memoryview inputs too, any memoryview format
    (entry,) = iter_composite(bytearray(wire))
    assert bytes(entry.content) == b"x" * 1000
    (entry,) = iter_composite(memoryview(wire).cast("c"))
    assert bytes(entry.content) == b"x" * 1000


def test_composite_entry_repr_hides_credentials_and_equality_ignores_the_form() -> None:
    (auth,) = iter_composite(b"\xfc\x00\x00\x04\x81tok")
    assert "tok" not in repr(auth)
    a = CompositeEntry("application/json", memoryview(b"1"), well_known=True)
    b = CompositeEntry("application/json", memoryview(b"1"), well_known=False)
    assert a == b and hash(a) == hash(b)


entry_lists = st.lists(st.tuples(mimes, st.binary(max_size=64)), max_size=12)


@given(entry_lists)
def test_composite_round_trip_of_arbitrary_entry_mixes(entries: list[tuple[str, bytes]]) -> None:
    wire = encode_composite(entries)
    decoded = list(iter_composite(wire))
    assert [(e.mime, bytes(e.content)) for e in decoded] == entries
    assert encode_composite(decoded) == wire


@given(st.binary(max_size=300))
def test_composite_decoder_raises_only_decode_errors(data: bytes) -> None:
    try:
        entries = list(iter_composite(data))
    except MetadataDecodeError:
        return
    # What decodes re-encodes to something that decodes the same.
    assert list(iter_composite(encode_composite(entries))) == entries

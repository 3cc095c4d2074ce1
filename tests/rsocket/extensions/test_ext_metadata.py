"""Composite metadata decoded and composed as a whole (every well-known
extension at once): round trips of arbitrary mixes, strictness, the
decoded view's rules."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs.rsocket.extensions import (
    AUTHENTICATION,
    ROUTING,
    Authentication,
    BearerAuth,
    CompositeMetadata,
    MetadataDecodeError,
    MetadataEncodeError,
    SimpleAuth,
    ZipkinTrace,
    compose,
    decode_metadata,
    encode_authentication,
    encode_composite,
    encode_routing,
    iter_composite,
)
from tests.rsocket.extensions.ext_strategies import auths, mimes, tags, traces

CUSTOM = st.tuples(
    mimes.filter(lambda m: not m.startswith("message/x.rsocket.")), st.binary(max_size=30)
)


def test_rsocket_composite_metadata_golden_bytes_of_a_routed_request() -> None:
    wire = compose("users.42.get", auth=BearerAuth("t"), data_mime="application/json")
    assert wire == (
        b"\xfe\x00\x00\x0d\x0cusers.42.get"  # routing: one tag
        b"\xfc\x00\x00\x02\x81t"  # authentication: bearer
        b"\xfa\x00\x00\x01\x85"  # data MIME type: application/json
    )
    meta = decode_metadata(wire)
    assert meta.route == "users.42.get"
    assert meta.auth == BearerAuth("t")
    assert meta.data_mime == "application/json"


def test_rsocket_composite_metadata_order_must_be_preserved_when_presented() -> None:
    wire = compose(
        "a", entries=[("x/1", b"1"), (ROUTING, encode_routing("b")), ("x/1", b"2")]
    )
    meta = decode_metadata(wire)
    assert meta.tags == ("a", "b")
    assert [e.mime for e in meta.entries] == [ROUTING, "x/1", ROUTING, "x/1"]
    assert [bytes(e.content) for e in meta.all("x/1")] == [b"1", b"2"]


def test_metadata_first_authentication_counts_and_later_ones_are_still_checked() -> None:
    second = (AUTHENTICATION, encode_authentication(BearerAuth("b")))
    meta = decode_metadata(compose(auth=SimpleAuth("a", "p"), entries=[second]))
    assert meta.auth == SimpleAuth("a", "p")
    with pytest.raises(MetadataDecodeError):
        decode_metadata(compose(auth=SimpleAuth("a", "p"), entries=[(AUTHENTICATION, b"\x80")]))


@pytest.mark.parametrize(
    "content",
    [(ROUTING, b"\x05ab"), (AUTHENTICATION, b"\x80\x00"), ("message/x.rsocket.mime-type.v0",
     b""), ("message/x.rsocket.tracing-zipkin.v0", b"\x80")],
    ids=["routing", "auth", "data-mime", "zipkin"],
)
def test_metadata_malformed_well_known_content_is_a_decode_error(
    content: tuple[str, bytes],
) -> None:
    with pytest.raises(MetadataDecodeError):
        decode_metadata(encode_composite([content]))


def test_metadata_empty_and_none_decode_to_nothing() -> None:
    assert decode_metadata(None) == CompositeMetadata()
    assert decode_metadata(b"").route is None


def test_metadata_compose_refuses_an_empty_route() -> None:
    with pytest.raises(MetadataEncodeError):
        compose([])


@given(
    route=st.none() | st.lists(tags, min_size=1, max_size=3),
    auth=st.none() | auths,
    data_mime=st.none() | mimes,
    accept=st.lists(mimes, max_size=3),
    tracing=st.none() | traces(),
    extra=st.lists(CUSTOM, max_size=4),
)
def test_metadata_round_trip_of_arbitrary_mixes(
    route: list[str] | None,
    auth: Authentication | None,
    data_mime: str | None,
    accept: list[str],
    tracing: ZipkinTrace | None,
    extra: list[tuple[str, bytes]],
) -> None:
    wire = compose(
        route, auth=auth, data_mime=data_mime, accept=accept, tracing=tracing, entries=extra
    )
    meta = decode_metadata(wire)
    assert meta.tags == tuple(route or ())
    assert meta.auth == auth
    assert meta.data_mime == data_mime
    assert meta.accept == tuple(accept)
    assert meta.tracing == tracing
    assert [(e.mime, bytes(e.content)) for e in meta.entries[-len(extra):]] == extra or not extra
    assert encode_composite(meta.entries) == wire
    assert list(iter_composite(wire)) == list(meta.entries)


@given(st.binary(max_size=300))
def test_metadata_decoder_raises_only_decode_errors(data: bytes) -> None:
    with contextlib.suppress(MetadataDecodeError):
        decode_metadata(data)

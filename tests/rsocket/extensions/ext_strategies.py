"""Hypothesis strategies for the RSocket extension values."""

from __future__ import annotations

from hypothesis import strategies as st

from sansrs.rsocket.extensions import (
    MIME_BY_ID,
    BearerAuth,
    CustomAuth,
    Sampling,
    SimpleAuth,
    ZipkinTrace,
)

_ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
#: Custom MIME / auth type names: 1..128 printable US-ASCII bytes.
custom_names = st.text(_ASCII, min_size=1, max_size=128)
well_known_mimes = st.sampled_from(sorted(MIME_BY_ID.values()))
mimes = st.one_of(well_known_mimes, custom_names)
#: Text that is never null terminated (the extensions' rule).
texts = st.text(max_size=40).filter(lambda s: not s.endswith("\x00"))
tags = texts.filter(lambda s: len(s.encode()) <= 255)
simple = st.builds(SimpleAuth, texts, texts)
bearer = st.builds(BearerAuth, texts)
custom_auth = st.builds(
    CustomAuth, custom_names.filter(lambda s: s not in ("simple", "bearer")), st.binary(max_size=40)
)
auths = st.one_of(simple, bearer, custom_auth)
u64 = st.integers(0, 2**64 - 1)


@st.composite
def traces(draw: st.DrawFn) -> ZipkinTrace:
    sampling = draw(st.sampled_from(Sampling))
    if not draw(st.booleans()):
        return ZipkinTrace(sampling=sampling)
    wide = draw(st.booleans())
    return ZipkinTrace(
        sampling=sampling,
        trace_id=draw(st.integers(0, 2**128 - 1) if wide else u64),
        span_id=draw(u64),
        parent_span_id=draw(st.none() | u64),
        trace_id_128=wide,
    )

"""Fuzz target: composite metadata (``sansrs.rsocket.extensions``):
``iter_composite`` and ``decode_metadata`` (every well-known entry decoded).

Rule: nothing but ``MetadataDecodeError`` escapes either; both agree on
whether the input is well formed (a well-known entry with bad content only
fails ``decode_metadata``); what decodes re-encodes, and the re-encoding
decodes to the same entries (well-known names in their one-byte form, so
bytes may differ only there); entry contents are views of the input.
Input: the metadata bytes. Seeds: ``python -m fuzz.fuzz_ext_composite --make-corpus``.
"""

from __future__ import annotations

from fuzz._harness import instrumented, main

with instrumented(__name__):
    from sansrs.rsocket.extensions import (
        BearerAuth,
        CustomAuth,
        MetadataDecodeError,
        Sampling,
        SimpleAuth,
        ZipkinTrace,
        compose,
        decode_metadata,
        encode_composite,
        iter_composite,
    )


def test_one_input(data: bytes) -> None:
    try:
        entries = list(iter_composite(data))
    except MetadataDecodeError:
        refused = True
    else:
        refused = False
    if refused:
        try:
            decode_metadata(data)
        except MetadataDecodeError:
            return
        raise AssertionError(f"decode_metadata accepted what iter_composite refused: {data!r}")
    for entry in entries:
        if entry.content.obj is not data:
            raise AssertionError("entry content is a copy, not a view of the input")
    again = list(iter_composite(encode_composite(entries)))
    if again != entries:
        raise AssertionError(f"unstable round trip: {entries!r} -> {again!r}")
    try:
        meta = decode_metadata(data)
    except MetadataDecodeError:
        return
    if list(meta.entries) != entries:
        raise AssertionError("decode_metadata and iter_composite disagree")


def seeds() -> list[bytes]:
    return [
        compose("echo"),
        compose(["users.42.get", "v2"], auth=SimpleAuth("ann", "secret")),
        compose("r", auth=BearerAuth("token"), data_mime="application/json",
                accept=["application/json", "text/x-custom"]),
        compose(auth=CustomAuth("x-hmac", b"\x01\x02")),
        compose(tracing=ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=2**100, span_id=5,
                                    parent_span_id=6, trace_id_128=True)),
        compose(entries=[("text/x-a", b"hello"), ("application/cbor", b"")]),
        b"\xab\x00\x00\x00",  # a reserved id
        b"\x07text/x-a\x00\x00\x09hi",  # truncated content
    ]


if __name__ == "__main__":
    main(test_one_input, "ext_composite", seeds)

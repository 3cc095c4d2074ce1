"""Fuzz target: Zipkin tracing metadata content (``decode_zipkin``).

Rule: nothing but ``MetadataDecodeError`` escapes; a decoded trace
re-encodes to the same bytes except for flag bits the decision ignores
(S under D, N under S or D, T and P without ids, and bits 0-1), and decodes to itself.
Input: the entry's content. Seeds: ``python -m fuzz.fuzz_ext_zipkin --make-corpus``.
"""

from __future__ import annotations

from fuzz._harness import instrumented, main

with instrumented(__name__):
    from sansrs.rsocket.extensions import (
        MetadataDecodeError,
        Sampling,
        ZipkinTrace,
        decode_zipkin,
        encode_zipkin,
    )


def test_one_input(data: bytes) -> None:
    try:
        trace = decode_zipkin(data)
    except MetadataDecodeError:
        return
    encoded = encode_zipkin(trace)
    if decode_zipkin(encoded) != trace:
        raise AssertionError(f"unstable: {data!r}")
    layout = 0x8C if data[0] & 0x80 else 0x80  # T and P count only with ids
    if encoded[1:] != data[1:] or encoded[0] & layout != data[0] & layout:
        raise AssertionError(f"ids or layout flags changed: {data!r} -> {encoded!r}")


def seeds() -> list[bytes]:
    return [
        encode_zipkin(ZipkinTrace(sampling=Sampling.NOT_SAMPLED)),
        encode_zipkin(ZipkinTrace(sampling=Sampling.SAMPLED, trace_id=1, span_id=2)),
        encode_zipkin(ZipkinTrace(sampling=Sampling.DEBUG, trace_id=2**127, span_id=2,
                                  parent_span_id=3, trace_id_128=True)),
        b"\x80" + bytes(15),  # truncated
    ]


if __name__ == "__main__":
    main(test_one_input, "ext_zipkin", seeds)

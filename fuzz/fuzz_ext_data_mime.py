"""Fuzz target: per-stream data MIME metadata content, both forms
(``decode_data_mime``: one type; ``decode_accept_mimes``: a list).

Rule: nothing but ``MetadataDecodeError`` escapes; decoded types re-encode
and decode to the same; a content the "one" form accepts is a one-element
list for the "accept" form.
Input: the entry's content. Seeds: ``python -m fuzz.fuzz_ext_data_mime --make-corpus``.
"""

from __future__ import annotations

from fuzz._harness import instrumented, main

with instrumented(__name__):
    from sansrs.rsocket.extensions import (
        MetadataDecodeError,
        decode_accept_mimes,
        decode_data_mime,
        encode_accept_mimes,
        encode_data_mime,
    )


def test_one_input(data: bytes) -> None:
    try:
        mimes = decode_accept_mimes(data)
    except MetadataDecodeError:
        mimes = None
    else:
        if mimes and decode_accept_mimes(encode_accept_mimes(mimes)) != mimes:
            raise AssertionError(f"unstable accept list: {data!r}")
    try:
        one = decode_data_mime(data)
    except MetadataDecodeError:
        return
    if mimes != (one,):
        raise AssertionError(f"the two forms disagree on {data!r}: {one!r} vs {mimes!r}")
    if decode_data_mime(encode_data_mime(one)) != one:
        raise AssertionError(f"unstable data MIME: {data!r}")


def seeds() -> list[bytes]:
    return [
        encode_data_mime("application/json"),
        encode_data_mime("text/x-custom"),
        encode_accept_mimes(["application/json", "text/x-custom", "image/png"]),
        b"\xab",  # a reserved id
        b"\x05text/",  # truncated
    ]


if __name__ == "__main__":
    main(test_one_input, "ext_data_mime", seeds)

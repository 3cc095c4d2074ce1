"""Fuzz target: routing metadata content (``decode_routing``).

Rule: nothing but ``MetadataDecodeError`` escapes; decoded tags re-encode
to the same bytes (the format has one spelling), unless there are none.
Input: the routing entry's content. Seeds: ``python -m fuzz.fuzz_ext_routing --make-corpus``.
"""

from __future__ import annotations

from fuzz._harness import instrumented, main

with instrumented(__name__):
    from sansrs.rsocket.extensions import MetadataDecodeError, decode_routing, encode_routing


def test_one_input(data: bytes) -> None:
    try:
        tags = decode_routing(data)
    except MetadataDecodeError:
        return
    if not tags:
        if data:
            raise AssertionError(f"no tags from {data!r}")
        return
    if encode_routing(tags) != data:
        raise AssertionError(f"unstable: {data!r} -> {tags!r}")


def seeds() -> list[bytes]:
    return [
        encode_routing(["echo"]),
        encode_routing(["/person/1", "ios-client", "é"]),
        encode_routing(["x" * 255]),
        b"\x05echo",  # truncated
        b"\x05echo\x00",  # null terminated
    ]


if __name__ == "__main__":
    main(test_one_input, "ext_routing", seeds)

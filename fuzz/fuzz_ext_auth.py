"""Fuzz target: authentication metadata content (``decode_authentication``:
simple, bearer, custom types).

Rule: nothing but ``MetadataDecodeError`` escapes; a decoded value
re-encodes and decodes to itself; simple and bearer re-encode to the same
bytes when they were sent in the well-known form.
Input: the authentication entry's content. Seeds: ``python -m fuzz.fuzz_ext_auth --make-corpus``.
"""

from __future__ import annotations

from fuzz._harness import instrumented, main

with instrumented(__name__):
    from sansrs.rsocket.extensions import (
        BearerAuth,
        CustomAuth,
        MetadataDecodeError,
        SimpleAuth,
        decode_authentication,
        encode_authentication,
    )


def test_one_input(data: bytes) -> None:
    try:
        auth = decode_authentication(data)
    except MetadataDecodeError:
        return
    encoded = encode_authentication(auth)
    if decode_authentication(encoded) != auth:
        raise AssertionError(f"unstable: {data!r}")
    if data[0] & 0x80 and encoded != data:
        raise AssertionError(f"well-known form re-encodes differently: {data!r}")


def seeds() -> list[bytes]:
    return [
        encode_authentication(SimpleAuth("user", "pass")),
        encode_authentication(SimpleAuth("", "")),
        encode_authentication(BearerAuth("t0ken")),
        encode_authentication(CustomAuth("x-hmac", b"\x00\x01")),
        b"\x05simple\x00\x01ab",  # the custom spelling of simple
        b"\x80\x00\x05abc",  # truncated user name
        b"\x82t",  # a reserved id
    ]


if __name__ == "__main__":
    main(test_one_input, "ext_auth", seeds)

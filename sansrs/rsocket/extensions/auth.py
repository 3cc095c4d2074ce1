"""Authentication metadata (RSocket extensions: Authentication, Well-known
Authentication Types, Simple, Bearer).

An entry is an ``A|ID/Len`` header naming the authentication type (a
well-known id or a US-ASCII name, counted as MIME names are) and the
type's payload: for ``simple`` a 16-bit user name length, the user name and
the password (UTF-8, never null terminated); for ``bearer`` the UTF-8 token;
for any other type, bytes the application interprets
(:class:`CustomAuth`). A custom-spelled ``"simple"`` or ``"bearer"`` decodes
as the well-known type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType

from .errors import MetadataDecodeError, MetadataEncodeError
from .mime import decode_name, encode_name

__all__ = [
    "Authentication",
    "BearerAuth",
    "CustomAuth",
    "SimpleAuth",
    "WellKnownAuthType",
    "decode_authentication",
    "encode_authentication",
]

EXTENSION = "authentication"
MAX_USERNAME_LENGTH = 0xFFFF


class WellKnownAuthType(IntEnum):
    """The well-known authentication types; ``.auth_type`` is the name."""

    SIMPLE = 0x00
    BEARER = 0x01

    @property
    def auth_type(self) -> str:
        return self.name.lower()


_NAMES = MappingProxyType({t.value: t.auth_type for t in WellKnownAuthType})
_IDS = MappingProxyType({t.auth_type: t.value for t in WellKnownAuthType})


@dataclass(frozen=True, slots=True)
class SimpleAuth:
    """User name and password (never shown by ``repr``)."""

    username: str
    password: str = field(repr=False)
    auth_type = "simple"


@dataclass(frozen=True, slots=True)
class BearerAuth:
    """A bearer token (never shown by ``repr``)."""

    token: str = field(repr=False)
    auth_type = "bearer"


@dataclass(frozen=True, slots=True)
class CustomAuth:
    """An authentication type this library does not interpret: its name and
    its payload bytes."""

    auth_type: str
    payload: bytes = field(repr=False)


Authentication = SimpleAuth | BearerAuth | CustomAuth


def _text(value: str, what: str) -> bytes:
    try:
        raw = value.encode("utf-8")
    except (UnicodeEncodeError, AttributeError):
        raise MetadataEncodeError(EXTENSION, f"{what} must be valid Unicode text") from None
    if raw.endswith(b"\x00"):
        raise MetadataEncodeError(EXTENSION, f"{what} MUST NOT be null terminated")
    return raw


def encode_authentication(auth: Authentication) -> bytes:
    """The authentication entry content for ``auth``."""
    if isinstance(auth, SimpleAuth):
        user = _text(auth.username, "user name")
        if len(user) > MAX_USERNAME_LENGTH:
            raise MetadataEncodeError(
                EXTENSION, f"user name of {len(user)} bytes exceeds {MAX_USERNAME_LENGTH}"
            )
        password = _text(auth.password, "password")
        return b"".join((b"\x80", len(user).to_bytes(2, "big"), user, password))
    if isinstance(auth, BearerAuth):
        return b"\x81" + _text(auth.token, "bearer token")
    if isinstance(auth, CustomAuth):
        if auth.auth_type in _IDS:
            raise MetadataEncodeError(
                EXTENSION, f"use SimpleAuth / BearerAuth for the well-known {auth.auth_type!r}"
            )
        head = encode_name(auth.auth_type, _IDS, _NAMES, EXTENSION)
        return head + bytes(auth.payload)
    raise MetadataEncodeError(EXTENSION, f"not an authentication: {type(auth).__name__}")


def _utf8(raw: bytes, what: str) -> str:
    if raw.endswith(b"\x00"):
        raise MetadataDecodeError(EXTENSION, f"{what} is null terminated")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MetadataDecodeError(EXTENSION, f"{what} is not UTF-8") from None


def decode_authentication(content: bytes | memoryview) -> Authentication:
    """The authentication of an entry's content."""
    auth_type, _, offset = decode_name(content, 0, _NAMES, EXTENSION)
    rest = bytes(content[offset:])
    if auth_type == "simple":
        if len(rest) < 2:
            raise MetadataDecodeError(EXTENSION, "truncated: simple has no user name length")
        n = int.from_bytes(rest[:2], "big")
        if 2 + n > len(rest):
            raise MetadataDecodeError(
                EXTENSION, f"truncated: user name of {n} bytes, {len(rest) - 2} left"
            )
        return SimpleAuth(_utf8(rest[2 : 2 + n], "user name"), _utf8(rest[2 + n :], "password"))
    if auth_type == "bearer":
        return BearerAuth(_utf8(rest, "bearer token"))
    return CustomAuth(auth_type, rest)

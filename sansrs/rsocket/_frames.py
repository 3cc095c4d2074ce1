"""RSocket 1.0 frame objects: one slotted value class per frame type.

Frames are plain slotted dataclasses (compared by value) rather than frozen
ones: a frozen dataclass's ``__init__`` goes through ``object.__setattr__``
per field and costs ~4x more, and frames are built once per frame on the
hottest path of every connection. Treat them as immutable values all the same.

Field names follow the spec. Flags that carry meaning are booleans; the
metadata flag (M) is implied by ``metadata is not None``, and the ignore flag
(I) is a field on every frame. Wire layout lives in ``_codec``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class FrameType(IntEnum):
    """Frame type codes (6 bits)."""

    RESERVED = 0x00
    SETUP = 0x01
    LEASE = 0x02
    KEEPALIVE = 0x03
    REQUEST_RESPONSE = 0x04
    REQUEST_FNF = 0x05
    REQUEST_STREAM = 0x06
    REQUEST_CHANNEL = 0x07
    REQUEST_N = 0x08
    CANCEL = 0x09
    PAYLOAD = 0x0A
    ERROR = 0x0B
    METADATA_PUSH = 0x0C
    RESUME = 0x0D
    RESUME_OK = 0x0E
    EXT = 0x3F


class ErrorCode(IntEnum):
    """ERROR frame codes. Unknown codes are kept as plain ``int``."""

    RESERVED = 0x00000000
    INVALID_SETUP = 0x00000001
    UNSUPPORTED_SETUP = 0x00000002
    REJECTED_SETUP = 0x00000003
    REJECTED_RESUME = 0x00000004
    CONNECTION_ERROR = 0x00000101
    CONNECTION_CLOSE = 0x00000102
    APPLICATION_ERROR = 0x00000201
    REJECTED = 0x00000202
    CANCELED = 0x00000203
    INVALID = 0x00000204
    RESERVED_FOR_EXTENSION = 0xFFFFFFFF


#: The SETUP and RESUME rejections (stream 0 only).
SETUP_ERROR_CODES = frozenset(
    {
        ErrorCode.INVALID_SETUP,
        ErrorCode.UNSUPPORTED_SETUP,
        ErrorCode.REJECTED_SETUP,
        ErrorCode.REJECTED_RESUME,
    }
)
#: Codes whose "Stream ID MUST be 0": on a stream they are a frame "not
#: accounted for" and ignored (Handling the Unexpected 9), never a stream error.
CONNECTION_ONLY_ERROR_CODES = SETUP_ERROR_CODES | {
    ErrorCode.RESERVED,
    ErrorCode.CONNECTION_ERROR,
    ErrorCode.CONNECTION_CLOSE,
}
#: What a responder may end a stream with (besides application codes).
STREAM_ERROR_CODES = frozenset(
    {ErrorCode.APPLICATION_ERROR, ErrorCode.REJECTED, ErrorCode.CANCELED, ErrorCode.INVALID}
)
#: What a server may refuse a SETUP with.
REJECT_SETUP_CODES = frozenset(
    {ErrorCode.INVALID_SETUP, ErrorCode.UNSUPPORTED_SETUP, ErrorCode.REJECTED_SETUP}
)


def is_application_error_code(code: int) -> bool:
    """0x301..0xFFFFFFFE: codes the application defines (spec: Error Codes)."""
    return 0x301 <= code <= 0xFFFFFFFE


#: The 16-bit type/flags field of the header: ``frame_type << TYPE_SHIFT | flags``.
TYPE_SHIFT = 10
FLAGS_MASK = 0x3FF
MAX_FRAME_TYPE = 0x3F

# Header flag bits (the low 10 bits of the 16-bit type/flags field).
FLAG_IGNORE = 0x200
FLAG_METADATA = 0x100
FLAG_FOLLOWS = 0x80  # REQUEST_*, PAYLOAD
FLAG_COMPLETE = 0x40  # REQUEST_CHANNEL, PAYLOAD
FLAG_NEXT = 0x20  # PAYLOAD
FLAG_RESUME_ENABLE = 0x80  # SETUP
FLAG_LEASE = 0x40  # SETUP
FLAG_RESPOND = 0x80  # KEEPALIVE

#: Version spoken on the wire in SETUP and RESUME (RSocket 1.0).
MAJOR_VERSION = 1
MINOR_VERSION = 0

MAX_STREAM_ID = 0x7FFFFFFF  # 31 bits
MAX_REQUEST_N = 0x7FFFFFFF  # 31 bits; this value means "unbounded" to 1.0 peers
MAX_U31 = 0x7FFFFFFF
MAX_POSITION = 0x7FFFFFFFFFFFFFFF  # 63 bits
MAX_METADATA_LENGTH = 0xFFFFFF  # 24 bits
MAX_FRAME_LENGTH = 0xFFFFFF  # 24-bit length prefix on byte-stream transports


# Declarations alike in shape by design (the duplicates scan lists them): one
# slotted dataclass per frame type, its fields as the spec names them.


@dataclass(slots=True)
class SetupFrame:
    keepalive_interval: int  # milliseconds, > 0
    max_lifetime: int  # milliseconds, > 0
    metadata_mime_type: str  # ASCII
    data_mime_type: str  # ASCII
    metadata: bytes | None = None
    data: bytes = b""
    # set => R flag; a secret, so never shown in repr (logs)
    resume_token: bytes | None = field(default=None, repr=False)
    lease: bool = False
    major_version: int = MAJOR_VERSION
    minor_version: int = MINOR_VERSION
    ignore: bool = False
    stream_id: int = 0
    frame_type = FrameType.SETUP


@dataclass(slots=True)
class LeaseFrame:
    ttl: int  # milliseconds
    number_of_requests: int
    metadata: bytes | None = None
    ignore: bool = False
    stream_id: int = 0
    frame_type = FrameType.LEASE


@dataclass(slots=True)
class KeepaliveFrame:
    respond: bool
    last_received_position: int = 0
    data: bytes = b""
    ignore: bool = False
    stream_id: int = 0
    frame_type = FrameType.KEEPALIVE


@dataclass(slots=True)
class RequestResponseFrame:
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    ignore: bool = False
    frame_type = FrameType.REQUEST_RESPONSE


@dataclass(slots=True)
class RequestFnfFrame:
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    ignore: bool = False
    frame_type = FrameType.REQUEST_FNF


@dataclass(slots=True)
class RequestStreamFrame:
    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    ignore: bool = False
    frame_type = FrameType.REQUEST_STREAM


@dataclass(slots=True)
class RequestChannelFrame:
    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False
    ignore: bool = False
    frame_type = FrameType.REQUEST_CHANNEL


@dataclass(slots=True)
class RequestNFrame:
    stream_id: int
    request_n: int
    ignore: bool = False
    frame_type = FrameType.REQUEST_N


@dataclass(slots=True)
class CancelFrame:
    stream_id: int
    ignore: bool = False
    frame_type = FrameType.CANCEL


@dataclass(slots=True)
class PayloadFrame:
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False
    next: bool = False
    ignore: bool = False
    frame_type = FrameType.PAYLOAD


@dataclass(slots=True)
class ErrorFrame:
    stream_id: int
    error_code: int  # an ErrorCode member when known, else the raw int
    data: bytes = b""  # UTF-8 error message
    ignore: bool = False
    frame_type = FrameType.ERROR

    @property
    def message(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclass(slots=True)
class MetadataPushFrame:
    metadata: bytes
    ignore: bool = False
    stream_id: int = 0
    frame_type = FrameType.METADATA_PUSH


@dataclass(slots=True)
class ResumeFrame:
    resume_token: bytes = field(repr=False)  # a secret: never in repr (logs)
    last_received_server_position: int
    first_available_client_position: int
    major_version: int = MAJOR_VERSION
    minor_version: int = MINOR_VERSION
    ignore: bool = False
    stream_id: int = 0
    frame_type = FrameType.RESUME


@dataclass(slots=True)
class ResumeOkFrame:
    last_received_client_position: int
    ignore: bool = False
    stream_id: int = 0
    frame_type = FrameType.RESUME_OK


@dataclass(slots=True)
class ExtFrame:
    stream_id: int
    extended_type: int  # 31 bits
    data: bytes = b""
    metadata: bytes | None = None
    ignore: bool = False
    frame_type = FrameType.EXT


@dataclass(slots=True)
class UnknownFrame:
    """A frame this codec does not understand, kept raw.

    Decoding yields it for a frame type sansrs does not know (RESERVED 0x00
    and the unassigned 0x0F-0x3E), and for a known frame type that fails
    validation while its (I)gnore flag is set (the spec lets a receiver ignore
    such a frame instead of failing the connection). The connection ignores it
    when ``ignore`` is set and otherwise answers ERROR[CONNECTION_ERROR].

    ``flags`` holds all 10 flag bits as on the wire, I included, so
    ``ignore == bool(flags & FLAG_IGNORE)``; ``body`` is everything after the
    6-byte frame header. Encoding it gives back the exact bytes.
    """

    stream_id: int
    frame_type: int  # 6 bits; a plain int, not necessarily a FrameType member
    flags: int  # 10 bits, including the I and M bits
    body: bytes = b""
    ignore: bool = False


Frame = (
    SetupFrame
    | LeaseFrame
    | KeepaliveFrame
    | RequestResponseFrame
    | RequestFnfFrame
    | RequestStreamFrame
    | RequestChannelFrame
    | RequestNFrame
    | CancelFrame
    | PayloadFrame
    | ErrorFrame
    | MetadataPushFrame
    | ResumeFrame
    | ResumeOkFrame
    | ExtFrame
    | UnknownFrame
)

RequestFrame = RequestResponseFrame | RequestFnfFrame | RequestStreamFrame | RequestChannelFrame

#: Frame types with an implied position (spec: Implied Position: REQUEST,
#: CANCEL, ERROR and PAYLOAD; REQUEST_N counted with the requests, as
#: rsocket-java does, since losing one would stall a flow), on streams > 0.
POSITIONED = frozenset(
    {
        RequestResponseFrame,
        RequestFnfFrame,
        RequestStreamFrame,
        RequestChannelFrame,
        RequestNFrame,
        CancelFrame,
        ErrorFrame,
        PayloadFrame,
    }
)

"""RSocket extensions, sans-IO (docs/extensions.md): the well-known MIME
and authentication type tables, composite metadata, routing,
authentication (simple, bearer, custom), per-stream data MIME types and
Zipkin tracing. Bytes in, values out and back; a malformed input raises
:class:`MetadataDecodeError` (a ``RemoteProtocolError``), an unencodable
value :class:`MetadataEncodeError` (a ``LocalProtocolError``), and nothing
else.

    from sansrs.rsocket.extensions import compose, decode_metadata, SimpleAuth

    metadata = compose("users.42.get", auth=SimpleAuth("ann", "secret"))
    decode_metadata(metadata).route        # 'users.42.get'
"""

from .auth import (
    Authentication,
    BearerAuth,
    CustomAuth,
    SimpleAuth,
    WellKnownAuthType,
    decode_authentication,
    encode_authentication,
)
from .composite import (
    MAX_CONTENT_LENGTH,
    CompositeEntry,
    composite_framing_error,
    encode_composite,
    iter_composite,
)
from .data_mime import (
    decode_accept_mimes,
    decode_data_mime,
    encode_accept_mimes,
    encode_data_mime,
)
from .errors import MetadataDecodeError, MetadataEncodeError
from .metadata import (
    ALLOWED_FRAMES,
    CompositeMetadata,
    compose,
    decode_metadata,
    effective_data_mime,
    needs_response_mime,
    response_data_mime,
)
from .mime import (
    ACCEPT_MIME_TYPES,
    AUTHENTICATION,
    COMPOSITE_METADATA,
    DATA_MIME_TYPE,
    ID_BY_MIME,
    MAX_NAME_LENGTH,
    MIME_BY_ID,
    ROUTING,
    TRACING_ZIPKIN,
    WellKnownMimeType,
    mime_id,
    mime_name,
)
from .routing import MAX_TAG_LENGTH, decode_routing, encode_routing
from .tracing import Sampling, ZipkinTrace, decode_zipkin, encode_zipkin

__all__ = [
    "ACCEPT_MIME_TYPES",
    "ALLOWED_FRAMES",
    "AUTHENTICATION",
    "COMPOSITE_METADATA",
    "DATA_MIME_TYPE",
    "ID_BY_MIME",
    "MAX_CONTENT_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_TAG_LENGTH",
    "MIME_BY_ID",
    "ROUTING",
    "TRACING_ZIPKIN",
    "Authentication",
    "BearerAuth",
    "CompositeEntry",
    "CompositeMetadata",
    "CustomAuth",
    "MetadataDecodeError",
    "MetadataEncodeError",
    "Sampling",
    "SimpleAuth",
    "WellKnownAuthType",
    "WellKnownMimeType",
    "ZipkinTrace",
    "compose",
    "composite_framing_error",
    "decode_accept_mimes",
    "decode_authentication",
    "decode_data_mime",
    "decode_metadata",
    "decode_routing",
    "decode_zipkin",
    "effective_data_mime",
    "encode_accept_mimes",
    "encode_authentication",
    "encode_composite",
    "encode_data_mime",
    "encode_routing",
    "encode_zipkin",
    "iter_composite",
    "mime_id",
    "mime_name",
    "needs_response_mime",
    "response_data_mime",
]

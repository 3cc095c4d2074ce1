"""Eclipse Ditto's streaming subscription protocol (and the older search protocol), sans-IO.

JSON text messages in, events out; intents in, text messages out. One
``DittoServer`` or ``DittoClient`` per connection (WebSocket). See
docs/protocols/ditto.md.
"""

from .._errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from ._client import DittoClient
from ._config import DittoClientConfig, DittoServerConfig
from ._envelope import (
    ABSENT,
    CONTENT_TYPE_JSON,
    DittoError,
    DittoException,
    DittoRemoteError,
    Envelope,
    Headers,
    MessageError,
    Topic,
    TopicError,
    parse_envelope,
    parse_topic,
)
from ._messages import (
    INTERNAL_ERROR,
    RULE_3_9_MESSAGE,
    Kind,
    SearchOptions,
    SubscribeOptions,
    format_instant,
)
from ._server import DittoServer
from ._tables import (
    CLIENT_TRANSITIONS,
    SERVER_TRANSITIONS,
    ClientInput,
    ClientState,
    ServerInput,
    ServerState,
)

__all__ = [
    "ABSENT",
    "CLIENT_TRANSITIONS",
    "CONTENT_TYPE_JSON",
    "INTERNAL_ERROR",
    "RULE_3_9_MESSAGE",
    "SERVER_TRANSITIONS",
    "ClientInput",
    "ClientState",
    "DittoClient",
    "DittoClientConfig",
    "DittoError",
    "DittoException",
    "DittoRemoteError",
    "DittoServer",
    "DittoServerConfig",
    "Envelope",
    "Headers",
    "Kind",
    "LocalProtocolError",
    "MessageError",
    "ProtocolError",
    "RemoteProtocolError",
    "SearchOptions",
    "ServerInput",
    "ServerState",
    "SubscribeOptions",
    "Topic",
    "TopicError",
    "format_instant",
    "parse_envelope",
    "parse_topic",
]

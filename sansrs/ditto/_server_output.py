"""The messages a :class:`~._server.DittoServer` writes (its methods, bound
in its class): a subscription's ``created``, ``next``, ``complete`` and
``failed`` on its own topic with its latest headers, and Ditto's error
response to a command it cannot take, on an ``errors`` topic."""

from __future__ import annotations

from typing import Any, Final

from . import _envelope as env
from ._fast import message_text
from ._server_state import DittoServerState, ServerSubscription
from .events import InvalidMessage

__all__ = [
    "FALLBACK_TOPIC",
    "encode",
    "error_response",
        "send",
    "send_failed",
    "topic_of",
    "with_content_type",
]


#: Where Ditto answers what it cannot attribute to an entity (text that is
#: not JSON, a message too large to read).
FALLBACK_TOPIC: Final = env.Topic(
    namespace="unknown", entity_name="unknown", group="things", channel="twin", criterion="errors"
)


def topic_of(self: DittoServerState, sub: ServerSubscription, action: str) -> env.Topic:
    return sub.topic.with_action(sub.kind.value, action)


def with_content_type(self: DittoServerState, headers: env.Headers) -> env.Headers:
    if self.config.content_type_header:
        return headers.with_header("content-type", env.CONTENT_TYPE_JSON)
    return headers


def encode(
    self: DittoServerState, sub: ServerSubscription, action: str, value: dict[str, Any]
) -> str:
    return message_text(sub.base + action, self._headers(sub.headers).to_json(), value)


def send(
    self: DittoServerState, sub: ServerSubscription, action: str, value: dict[str, Any]
) -> None:
    self._out.append(self._encode(sub, action, value))


def send_failed(
    self: DittoServerState,
    topic: env.Topic,
    headers: env.Headers,
    sid: str,
    error: env.DittoError,
) -> None:
    value = {"subscriptionId": sid, "error": error.to_json()}
    self._out.append(
        env.Envelope(
            topic=str(topic), headers=self._headers(headers), path="/", value=value
        ).to_text()
    )


def error_response(
    self: DittoServerState,
    envelope: env.Envelope | None,
    headers: env.Headers | None,
    error: env.DittoError,
) -> None:
    """Ditto's answer to a malformed command: an error response on an ``errors`` topic."""
    topic = FALLBACK_TOPIC
    if envelope is not None:
        try:
            parsed = env.parse_topic(envelope.topic)
        except env.TopicError:
            pass
        else:
            topic = parsed.with_action("errors", None)
            if parsed.criterion == "search":
                topic = env.Topic(
                    namespace="_",
                    entity_name="_",
                    group="things",
                    channel=None,
                    criterion="search",
                    action="errors",
                )
    out_headers = env.Headers()
    correlation_id = headers.get("correlation-id") if headers is not None else None
    if correlation_id is not None:
        out_headers = out_headers.with_header("correlation-id", correlation_id)
    self._out.append(
        env.Envelope(
            topic=str(topic),
            headers=out_headers,
            path="/",
            value=error.to_json(),
            status=error.status,
        ).to_text()
    )
    self._events.append(InvalidMessage(error=error))


"""Error responses as the client reads them: the error of an ``errors``
message (also one whose value is not an error object), and which pending
subscribes an error that names none may answer (docs/protocols/ditto.md,
"Errors that name no subscribe")."""

from __future__ import annotations

from typing import Final

from . import _envelope as env
from ._messages import Kind

__all__ = ["UNREADABLE_ERROR", "error_of", "error_scope", "in_scope"]


def error_of(envelope: env.Envelope) -> env.DittoError:
    """The error an ``errors`` message reports. One whose value is not an
    error object is still Ditto reporting an error, for a subscribe that
    must not wait on: what can be read of it (``status`` from the value or
    the envelope, else 500), and a message that says what came."""
    value = envelope.value
    try:
        return env.DittoError.from_json(value)
    except env.MessageError as exc:
        problem = exc.error.message
    got = value if isinstance(value, dict) else {}
    status = got.get("status")
    if type(status) is not int:
        status = envelope.status if type(envelope.status) is int else 500
    code = got.get("error")
    shown = "no value" if value is env.ABSENT else env.show(value)
    return env.DittoError(
        status=status,
        error=code if isinstance(code, str) else UNREADABLE_ERROR,
        message=f"Ditto sent an error that cannot be read ({problem}): {shown}",
    )


#: The code of an error response whose value is not an error object.
UNREADABLE_ERROR: Final = "sansrs:error.unreadable"

#: Error topics whose entity is not known: Ditto's, and the one sansrs's
#: server sent before (``_/_``).
UNKNOWN_ENTITIES: Final = (("unknown", "unknown"), ("_", "_"))


def error_scope(parsed: env.Topic) -> tuple[Kind, str, str, str] | None:
    """Which pending subscribes an error on topic ``parsed`` may answer:
    (kind, namespace, name, group) of an entity's or the search's errors
    topic, None for any (an unknown entity)."""
    if parsed.criterion == "search":  # _/_/things/search/errors
        return Kind.SEARCH, "_", "_", "things"
    if (parsed.namespace, parsed.entity_name) in UNKNOWN_ENTITIES:
        return None
    return Kind.STREAMING, parsed.namespace, parsed.entity_name, parsed.group


def in_scope(kind: Kind, topic: env.Topic, scope: tuple[Kind, str, str, str] | None) -> bool:
    """Whether a subscribe of ``kind`` on ``topic`` is in ``scope`` (``error_scope``)."""
    if scope is None:
        return True
    if kind is not scope[0]:
        return False
    return kind is Kind.SEARCH or (topic.namespace, topic.entity_name, topic.group) == scope[1:]

"""The demo responder's behaviour, as pure functions any binding can serve.

The behaviour is a contract so that any RSocket peer can check a server
started with ``sansrs serve URL``:

- request-response: ``fnf-count`` -> fire-and-forgets received on this
  connection, as decimal text; ``mp-count`` -> METADATA_PUSH frames received;
  ``mp-last`` -> ``last=`` followed by the last pushed metadata; ``stats`` ->
  JSON counters; data starting with ``error`` -> APPLICATION_ERROR (0x201)
  with message ``rejected: <data>``; anything else -> data and metadata echoed.
- fire-and-forget: counted. metadata push: counted and recorded.
- request-stream with data ``{"n": N, "size": S}`` -> N payloads, item ``i``
  (0-based) being ``i`` in decimal zero-padded to S bytes (longer when i has
  more than S digits); the last carries COMPLETE; never more than requested.
- request-channel: every inbound payload (the first included) echoed with its
  metadata, inbound requested :data:`CHANNEL_BATCH` at a time; completes when
  the inbound completes.

State is per connection: one :class:`DemoState` per accepted connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass

__all__ = [
    "CHANNEL_BATCH",
    "DemoRejected",
    "DemoState",
    "parse_stream_request",
    "request_response",
    "stream_items",
]

CHANNEL_BATCH = 32
MAX_STREAM_ITEM_SIZE = 16 * 1024 * 1024


class DemoRejected(Exception):
    """Answer with APPLICATION_ERROR; ``str(exc)`` is the message."""


@dataclass(slots=True)
class DemoState:
    fire_and_forget: int = 0
    metadata_push: int = 0
    last_metadata_push: bytes = b""
    request_response: int = 0
    request_stream: int = 0
    request_channel: int = 0

    def record_fire_and_forget(self, count: int = 1) -> None:
        self.fire_and_forget += count

    def record_metadata_push(self, metadata: bytes) -> None:
        self.metadata_push += 1
        self.last_metadata_push = metadata

    def stats_json(self) -> bytes:
        counters = asdict(self)
        del counters["last_metadata_push"]
        return json.dumps(counters, sort_keys=True).encode()


def request_response(
    state: DemoState, data: bytes, metadata: bytes | None
) -> tuple[bytes, bytes | None]:
    """The reply ``(data, metadata)``; raises :class:`DemoRejected` for ``error*``."""
    state.request_response += 1
    if data == b"fnf-count":
        return str(state.fire_and_forget).encode(), None
    if data == b"mp-count":
        return str(state.metadata_push).encode(), None
    if data == b"mp-last":
        return b"last=" + state.last_metadata_push, None
    if data == b"stats":
        return state.stats_json(), None
    if data.startswith(b"error"):
        raise DemoRejected("rejected: " + data.decode("utf-8", "replace"))
    return data, metadata


def parse_stream_request(data: bytes) -> tuple[int, int]:
    """``{"n": N, "size": S}`` -> ``(N, S)``; raises :class:`DemoRejected` if malformed."""
    try:
        spec = json.loads(data)
        n, size = spec["n"], spec["size"]
    except (ValueError, TypeError, KeyError) as exc:
        raise DemoRejected(f'expected {{"n": N, "size": S}}, got {data[:80]!r}') from exc
    if not (isinstance(n, int) and isinstance(size, int)) or isinstance(n, bool) or isinstance(
        size, bool
    ):
        raise DemoRejected("n and size must be integers")
    if n < 0 or size < 0 or size > MAX_STREAM_ITEM_SIZE:
        raise DemoRejected(f"n must be >= 0 and size in 0..{MAX_STREAM_ITEM_SIZE}")
    return n, size


def stream_items(n: int, size: int) -> Iterator[bytes]:
    """Item ``i`` is ``i`` in decimal, zero-padded to ``size`` bytes. Lazy: memory stays flat."""
    for i in range(n):
        yield str(i).encode().zfill(size)

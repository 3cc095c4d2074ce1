"""Limits and options of the Ditto cores."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DittoClientConfig", "DittoServerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DittoServerConfig:
    """Options of a ``DittoServer`` (one WebSocket connection).

    - ``max_message_size``: characters per incoming text message; larger ones
      get a 413 error response. Default 1 MiB.
    - ``max_subscriptions``: live subscriptions at once; a subscribe beyond it
      gets a 429 error response instead of ``created``. Default 1024.
    - ``max_zombies``: ended subscriptions remembered (for the "considered
      cancelled" answer); the oldest is forgotten first. Default 1024.
    - ``idle_timeout``: seconds without interaction before ``failed`` 408
      (Ditto: ``streaming.search-idle-timeout``, 60 s).
    - ``zombie_timeout``: seconds an ended subscription answers ``request``
      with "considered cancelled" before it is unknown (Ditto: 10 s).
    - ``content_type_header``: add ``content-type: application/json`` to every
      event, as Ditto does. Default True.
    - ``id_factory``: makes subscription IDs; default a decimal counter per
      connection and kind of subscription ("0", "1", ... for histories and
      again for searches), as Ditto's WebSocket does.
    - ``correlation_id_header``: give a subscribe without a
      ``correlation-id`` a generated one, which its ``created`` (and the
      events until a request) carry, as Ditto does. Default True; False
      (with ``content_type_header=False``) writes the documentation's
      abbreviated examples byte for byte.
    - ``correlation_ids``: makes those correlation-ids; default
      ``sansrs-0``, ``sansrs-1``, ... per connection (the adapters pass a
      UUID-based factory).
    """

    max_message_size: int = 1024 * 1024
    max_subscriptions: int = 1024
    max_zombies: int = 1024
    idle_timeout: float = 60.0
    zombie_timeout: float = 10.0
    content_type_header: bool = True
    id_factory: Callable[[], str] | None = None
    correlation_id_header: bool = True
    correlation_ids: Callable[[], str] | None = None

    def __post_init__(self) -> None:
        for name in ("max_message_size", "max_subscriptions", "max_zombies"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        for name in ("idle_timeout", "zombie_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class DittoClientConfig:
    """Options of a ``DittoClient``.

    - ``max_message_size``: characters per incoming text message; larger ones
      raise ``RemoteProtocolError`` (413). Default 16 MiB (pages can be big).
    - ``max_subscriptions``: subscriptions open at once (API limit). Default 1024.
    - ``correlation_ids``: makes a ``correlation-id`` for a subscribe that has
      none, so ``created`` is matched by it; ``None`` (default) sends the
      headers as given and matches ``created`` by entity, oldest first.
    """

    max_message_size: int = 16 * 1024 * 1024
    max_subscriptions: int = 1024
    correlation_ids: Callable[[], str] | None = None

    def __post_init__(self) -> None:
        for name in ("max_message_size", "max_subscriptions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")

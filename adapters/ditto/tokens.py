"""Token refresh on an open Ditto WebSocket.

The ``Authorization`` header goes only into the upgrade request, and Ditto
ends the WebSocket when that token expires (its gateway's session timer,
``GatewayWebsocketSessionExpiredException``: the session's stream completes
and the socket is closed, with no Ditto message first). Ditto accepts a fresh
token on the open socket as the text message ``JWT-TOKEN?jwtToken=<token>``
(a WebSocket binding message, like ``START-SEND-EVENTS``; Ditto's Java client
refreshes this way on a schedule). This module decides when:

- :func:`jwt_expiry`: the ``exp`` claim of a JWT (the payload decoded, not
  verified: the client only needs to know when Ditto will stop accepting it);
- :class:`TokenPolicy`: how far ahead of expiry to refresh, the lifetime of
  tokens that are not JWTs, how soon to retry a provider that failed;
- :class:`TokenRefresher`: the schedule of one connection, on the
  connection's thread, from the engine's ``now`` (no clock of its own
  beyond the injected ``wall`` clock that converts ``exp``).

The provider (``token=`` a callable) is asked for the upgrade token, before
each expiry (on a worker thread, or as a task under asyncio: it may do
network I/O) and again on every reconnect (on demand).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "JWT_TOKEN_PREFIX",
    "Deliver",
    "Fetch",
    "TokenPolicy",
    "TokenProvider",
    "TokenRefresher",
    "jwt_expiry",
    "jwt_token_message",
    "thread_fetch",
]

log = logging.getLogger("sansrs.adapters.ditto")

#: The WebSocket binding message that replaces the session's token.
JWT_TOKEN_PREFIX: Final = "JWT-TOKEN?jwtToken="

#: A token, or something that returns one when asked (sync; or async under asyncio).
TokenProvider = str | Callable[[], str] | Callable[[], Awaitable[str]]
#: What a fetch hands back on the connection's thread: a token or why not.
Deliver = Callable[[str | BaseException], None]
#: Start fetching a token; call ``deliver`` (on the connection's thread) when done.
Fetch = Callable[[Deliver], None]


def jwt_token_message(token: str) -> str:
    """``JWT-TOKEN?jwtToken=<token>``; ``ValueError`` for a token that is
    not one line of printable ASCII (a JWT is base64url and dots)."""
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("a token is printable ASCII without spaces")
    return JWT_TOKEN_PREFIX + token


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim (seconds since the epoch) of ``token`` if it is a
    JWT with one; None for anything else (never raises)."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1] or len(parts[1]) > 64 * 1024:
        return None
    payload = parts[1]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        claims = json.loads(raw)
    except (ValueError, binascii.Error, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    exp = float(exp)
    return exp if math.isfinite(exp) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenPolicy:
    """When a connection refreshes its token.

    - ``refresh_margin`` (60 s): refresh this long before the token expires
      (a token that lives less than twice that is refreshed at half its life);
    - ``lifetime`` (None): the life of a token that is not a JWT with an
      ``exp`` claim; None: such tokens are never refreshed on schedule;
    - ``retry`` (5 s): a provider that failed is asked again this much later
      (while the token has not expired).
    """

    refresh_margin: float = 60.0
    lifetime: float | None = None
    retry: float = 5.0

    def __post_init__(self) -> None:
        if not self.refresh_margin >= 0:
            raise ValueError("refresh_margin must be >= 0")
        if self.lifetime is not None and not self.lifetime > 0:
            raise ValueError("lifetime must be positive")
        if not self.retry > 0:
            raise ValueError("retry must be positive")


class TokenRefresher:
    """One connection's token schedule (connection thread only).

    ``now`` is the engine's monotonic time; ``wall`` the clock that ``exp``
    is read against (``time.time`` in production, injected in tests).
    ``fetch(deliver)`` starts asking the provider; ``deliver`` comes back on
    the connection's thread with a token (sent as ``JWT-TOKEN``) or an
    exception (retried after ``policy.retry``)."""

    def __init__(
        self,
        token: str,
        now: float,
        fetch: Fetch,
        *,
        policy: TokenPolicy | None = None,
        wall: Callable[[], float],
    ) -> None:
        self.policy = policy or TokenPolicy()
        self._fetch = fetch
        self._wall = wall
        self._fetching = False
        #: monotonic time at which the current token expires (None: unknown)
        self.expires_at: float | None = None
        self._refresh_at: float | None = None
        #: tokens sent on the open socket so far (inspection)
        self.refreshed = 0
        self._schedule(token, now)

    def _schedule(self, token: str, now: float) -> None:
        exp = jwt_expiry(token)
        if exp is not None:
            left = exp - self._wall()
        elif self.policy.lifetime is not None:
            left = self.policy.lifetime
        else:
            self.expires_at = self._refresh_at = None
            return
        self.expires_at = now + left
        if left <= 0:
            # Already expired: Ditto will close; the reconnect asks again.
            log.warning("the token provider returned an expired token")
            self._refresh_at = None
            return
        self._refresh_at = now + max(left - self.policy.refresh_margin, left / 2)

    def next_deadline(self) -> float | None:
        return None if self._fetching else self._refresh_at

    def handle_timeout(self, now: float, deliver: Deliver) -> None:
        """Start a fetch if one is due; ``deliver`` gets its result."""
        if self._fetching or self._refresh_at is None or now < self._refresh_at:
            return
        self._fetching = True
        try:
            self._fetch(deliver)
        except Exception as exc:  # a fetch that cannot even start: retry later
            self.failed(exc, now)

    def refresh_now(self, deliver: Deliver) -> bool:
        """Fetch a token now (on demand); False if one is being fetched."""
        if self._fetching:
            return False
        self._fetching = True
        self._fetch(deliver)
        return True

    def fetched(self, token: str, now: float) -> None:
        """A fresh token was sent: schedule the next refresh from it."""
        self._fetching = False
        self.refreshed += 1
        self._schedule(token, now)

    def failed(self, error: BaseException, now: float) -> None:
        """The provider failed: ask again after ``retry`` unless the token expired meanwhile."""
        self._fetching = False
        log.warning("token provider failed: %s", error)
        at = now + self.policy.retry
        self._refresh_at = None if self.expires_at is not None and at >= self.expires_at else at


def thread_fetch(
    provider: Callable[[], str], submit: Callable[[Callable[[], object]], None]
) -> Fetch:
    """A fetch that asks ``provider`` on a worker thread of its own (it may
    block on the network) and hands the result to the connection's thread
    through ``submit``."""

    def fetch(deliver: Deliver) -> None:
        def run() -> None:
            result: str | BaseException
            try:
                result = provider()
            except Exception as exc:
                result = exc
            try:
                submit(lambda: deliver(result))
            except Exception:  # the connection is gone: the token is not needed
                log.debug("token fetched after the connection closed")

        threading.Thread(target=run, name="sansrs-ditto-token", daemon=True).start()

    return fetch

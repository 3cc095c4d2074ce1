"""Where rule 2.13 violations go: a Subscriber method that raised.

Rule 2.13 says the caller "MUST raise this error condition in a fashion that
is adequate for the runtime environment"; raising it out of ``request`` would
break rule 3.16, so sansrs cancels the subscription and hands the exception to
a replaceable hook (default: the ``sansrs.streams`` logger at ERROR level).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["report_cleanup_error", "report_subscriber_error", "set_subscriber_error_hook"]

_log = logging.getLogger("sansrs.streams")


def _default_hook(error: BaseException, subscriber: object) -> None:
    _log.error(
        "Subscriber %r raised from a signal method (rule 2.13); its subscription is cancelled",
        subscriber,
        exc_info=error,
    )


_hook: list[Callable[[BaseException, object], None]] = [_default_hook]


def set_subscriber_error_hook(hook: Callable[[BaseException, object], None] | None) -> None:
    """Install ``hook(error, subscriber)``; ``None`` restores the logging default."""
    _hook[0] = _default_hook if hook is None else hook


def report_subscriber_error(error: BaseException, subscriber: object) -> None:
    try:
        _hook[0](error, subscriber)
    except Exception:  # a failing hook must not break the publisher (3.15, 3.16)
        _log.exception("subscriber error hook failed")


def report_cleanup_error(error: BaseException, resource: object) -> None:
    """Closing a source or cancelling a misbehaving upstream raised; nothing to signal."""
    _log.warning("cleaning up %r failed", resource, exc_info=error)

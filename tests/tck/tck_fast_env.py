"""Timeouts for the project's own TCK runs (2 shared cores).

Waiting for an expected signal ends as soon as it arrives, so that timeout can
be generous (robust on a loaded machine) at no cost when tests pass. The
no-signal window is what every passing run pays for; sansrs's parts signal
synchronously, and the asynchronous test publisher signals within
microseconds, so 40 ms of silence is plenty.
"""

from __future__ import annotations

from sansrs.tck import TestEnvironment

FAST_ENV = TestEnvironment.from_environ(
    default_timeout_ms=1000, default_no_signals_timeout_ms=40, gc_timeout_ms=1000
)

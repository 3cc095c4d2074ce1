"""A deadline per test: a deadlocked implementation fails one test, it never hangs the run.

The test body runs on a kit thread (``tck-test``) while pytest's thread waits
for it up to ``test_deadline_ms``. A body still running then is abandoned (a
Python thread cannot be killed; it is a daemon and stays parked where the
implementation blocked it) and the test fails with what the kit was doing at
that moment (``TestEnvironment.doing``), the rule that says the call must
return, and the stack of every thread. Each test has its own environment, so a
thread left behind cannot disturb the tests that follow.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from ._env import TestEnvironment
from ._trace import format_thread_stacks

__all__ = ["DeadlineExceeded", "run_with_deadline"]

_RETURN_HINTS = (  # first match wins: "on_subscribe(" also contains "subscribe("
    (".on_", "Subscriber signal methods MUST return normally (rule 2.13)"),
    ("request(", "Subscription.request MUST return promptly and normally (rules 3.4, 3.16)"),
    ("cancel(", "Subscription.cancel MUST return promptly and normally (rules 3.5, 3.15)"),
    ("subscribe(", "Publisher.subscribe MUST return normally (rule 1.9)"),
)


class DeadlineExceeded(AssertionError):
    """The test body did not finish within ``test_deadline_ms``."""


def run_with_deadline(env: TestEnvironment, body: Callable[[], None]) -> None:
    """Run ``body``; raise what it raised, or ``DeadlineExceeded`` past the deadline."""
    if env.test_deadline_ms <= 0:
        body()
        return
    outcome: list[BaseException] = []
    finished = threading.Event()

    def target() -> None:
        try:
            body()
        except BaseException as error:  # handed to pytest's thread, skips included
            outcome.append(error)
        finally:
            finished.set()

    switch_interval = sys.getswitchinterval()  # a stress test may lower it
    worker = threading.Thread(target=target, name="tck-test", daemon=True)
    worker.start()
    if not finished.wait(env.test_deadline_ms / 1000):
        sys.setswitchinterval(switch_interval)
        raise DeadlineExceeded(_report(env, worker))
    worker.join()
    if outcome:
        error = outcome[0]
        raise error.with_traceback(error.__traceback__)


def _report(env: TestEnvironment, worker: threading.Thread) -> str:
    activity = env.activity()
    doing = activity.get(worker.ident or -1, "running the test body")
    lines = [f"the test did not finish within its deadline of {env.test_deadline_ms} ms "
             f"(test_deadline_ms); the kit was {doing}"]
    for hint_word, hint in _RETURN_HINTS:
        if doing.startswith("calling") and hint_word in doing:
            lines.append(f"  {hint}")
            break
    others = [f"  kit thread {_name(ident)}: {what}" for ident, what in activity.items()
              if ident != worker.ident]
    lines.extend(others)
    stacks = format_thread_stacks(exclude={threading.get_ident()}, first=worker.ident)
    lines.append("  threads still running (the test's own is first):")
    lines.append(stacks)
    return "\n".join(lines)


def _name(ident: int) -> str:
    for thread in threading.enumerate():
        if thread.ident == ident:
            return f'"{thread.name}"'
    return str(ident)

"""How kit tests are declared: required, optional, stochastic, untested.

- required: a failure is a pytest failure whose message starts with the rule
  text, followed by what went wrong and any asynchronous errors recorded;
- optional: a failure becomes ``pytest.skip`` with the reason (the rule is a
  MAY, or the implementation chose not to support it);
- stochastic: required, but skipped when ``skip_stochastic_tests()`` is true;
- untested: always ``pytest.skip("untested: Rule x.y: <text>")``.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import pytest

from ._env import TestEnvironment
from ._rules import rule_text

__all__ = ["Verification", "optional", "required", "stochastic", "untested"]

F = TypeVar("F", bound=Callable[..., None])


class Verification(ABC):  # noqa: B024 - abstract only via its subclasses
    """Base of the four verifications. pytest collects concrete subclasses only."""

    __test__ = False
    #: Timeouts; override in a subclass, e.g. ``env = TestEnvironment(default_timeout_ms=200)``.
    env: ClassVar[TestEnvironment] = TestEnvironment.from_environ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            # collect a user's concrete subclass; stay quiet on abstract intermediates
            cls.__test__ = not inspect.isabstract(cls)

    def setup_method(self, method: object = None) -> None:
        self.env.clear_async_errors()


def _header(rule: str | None, kind: str) -> str:
    return f"[{kind}] " + (rule_text(rule) if rule else "TCK setup check")


def _failure_message(self: Verification, rule: str | None, kind: str, error: BaseException) -> str:
    detail = str(error) if isinstance(error, AssertionError) else repr(error)
    message = f"{_header(rule, kind)}\n  -> {detail}"
    pending = [e for e in self.env.async_errors if e is not error and str(e) not in detail]
    if pending:
        message += "\n  asynchronous errors:\n" + "\n".join(
            f"    - {e}" if isinstance(e, AssertionError) else f"    - on_error({e!r})"
            for e in pending)
    return message


def _run(self: Verification, function: Callable[[Any], None], rule: str | None,
         kind: str) -> str | None:
    """Run a test body; the failure message, or None. (Reported outside the except
    block, so pytest shows the rule message rather than a chain of exceptions.)"""
    try:
        function(self)
    except Exception as error:
        return _failure_message(self, rule, kind, error)
    return None


def required(rule: str | None) -> Callable[[F], F]:
    """A MUST rule: failing it fails the test, citing the rule."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def run(self: Verification) -> None:
            self.env.clear_async_errors()
            failure = _run(self, function, rule, "required")
            if failure is not None:
                pytest.fail(failure, pytrace=False)

        run.rule = rule  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


def stochastic(rule: str) -> Callable[[F], F]:
    """A required rule that can only be checked by repetition (may pass by luck)."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def run(self: Any) -> None:
            if self.skip_stochastic_tests():
                pytest.skip("Skipping @stochastic test because skip_stochastic_tests() is true")
            self.env.clear_async_errors()
            failure = _run(self, function, rule, "required, stochastic")
            if failure is not None:
                pytest.fail(failure, pytrace=False)

        run.rule = rule  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


def optional(rule: str) -> Callable[[F], F]:
    """A MAY rule (or an optional capability): failing it skips with the reason."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def run(self: Verification) -> None:
            self.env.clear_async_errors()
            failure = _run(self, function, rule, "optional")
            if failure is not None:
                pytest.skip("Skipped because the tested implementation does NOT implement this "
                            f"OPTIONAL requirement: {failure}")

        run.rule = rule  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


def untested(rule: str) -> Callable[[F], F]:
    """A rule the kit cannot verify: always reported as skipped with the rule text."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def run(self: Verification) -> None:
            pytest.skip(f"untested: {rule_text(rule)}")

        run.rule = rule  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate

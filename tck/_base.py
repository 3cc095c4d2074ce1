"""How kit tests are declared and how their failures read.

- required: a failure is a pytest failure whose message starts with the text of
  the rule that was broken, then what went wrong, the implementation's own
  frames (where it signalled, what it raised), hints, and the seed;
- optional: a failure becomes ``pytest.skip`` with the reason (the rule is a
  MAY, or the implementation chose not to support it);
- stochastic: required, but skipped when ``skip_stochastic_tests()`` is true;
- untested: always ``pytest.skip("untested: Rule x.y: <text>")``.

Every test runs on a fresh copy of the class's ``TestEnvironment`` and within
its deadline (``_deadline``).
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from ._deadline import run_with_deadline
from ._env import RuleViolation, TestEnvironment
from ._rules import rule_text
from ._trace import describe_definition, format_exception, format_site

__all__ = ["Verification", "failure_report", "optional", "required", "stochastic", "untested"]

F = TypeVar("F", bound=Callable[..., None])


class Verification(ABC):  # noqa: B024 - abstract only via its subclasses
    """Base of the four verifications. pytest collects concrete subclasses only."""

    __test__ = False
    #: Timeouts, deadline and seed; override in a subclass, e.g.
    #: ``env = TestEnvironment.from_environ(default_timeout_ms=200)``. Each test
    #: runs on a fresh copy (``env.isolated()``), so no state is shared.
    env: TestEnvironment = TestEnvironment.from_environ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            # collect a user's concrete subclass; stay quiet on abstract intermediates
            cls.__test__ = not inspect.isabstract(cls)

    def setup_method(self, method: object = None) -> None:
        self.env = type(self).env.isolated()


def _describe(error: BaseException) -> str:
    if isinstance(error, AssertionError):
        return str(error)
    return f"the implementation raised {error!r}"


def _implementation_frames(primary: BaseException, env: TestEnvironment) -> list[str]:
    """Where the implementation was: its call site, or its traceback."""
    lines: list[str] = []
    if isinstance(primary, RuleViolation):
        if primary.cause is not None:
            trace = format_exception(primary.cause)
            if trace:
                lines += ["  the implementation's traceback (innermost last):", trace]
        if primary.site:
            lines += ["  the implementation's call (innermost last):", format_site(primary.site)]
    elif not isinstance(primary, AssertionError):
        trace = format_exception(primary)
        if trace:
            lines += ["  the implementation's traceback (innermost last):", trace]
    if not lines:
        signalled = [e for e in list(env.async_errors) if not isinstance(e, AssertionError)]
        for error in signalled[:1]:
            trace = format_exception(error)
            if trace:
                lines += [f"  where the implementation raised the error it signalled "
                          f"(on_error({error!r})):", trace]
    if not lines and env.last_signal is not None and env.last_signal[1]:
        signal, site = env.last_signal
        lines += [f"  the implementation's last signal, {signal}, came from:", format_site(site)]
    if not lines and env.subject is not None:
        where = describe_definition(env.subject)
        if where:
            lines += [f"  the implementation under test, {env.subject!r}:", where]
    return lines


def failure_report(env: TestEnvironment, test: str, test_rule: str | None, kind: str,
                   error: BaseException) -> str:
    """The text of a failed test: broken rule, what happened, where, hints, seed.

    (An optional test's skip reason leaves out the frames and the seed.)
    """
    brief = kind == "optional"
    violations = env.violations()
    primary: BaseException = violations[0] if violations else error
    rule = test_rule
    if isinstance(primary, RuleViolation) and primary.rule is not None:
        rule = primary.rule
    lines = [f"[{kind}] " + (rule_text(rule) if rule else "TCK setup check")]
    if rule != test_rule:
        checks = f"Rule {test_rule}" if test_rule else "the test setup"
        lines.append(f"  (found by {test}, which checks {checks})")
    detail = _describe(primary)
    lines.append(f"  -> {detail}")
    if not brief:
        lines += _implementation_frames(primary, env)
    if primary is not error:
        lines.append(f"  then: {_describe(error)}")
    shown = {id(primary), id(error)}
    pending = [e for e in list(env.async_errors)
               if id(e) not in shown and str(e) not in detail and str(e) not in str(error)]
    if pending:
        lines.append("  asynchronous errors:")
        lines += [f"    - {e}" if isinstance(e, AssertionError) else f"    - on_error({e!r})"
                  for e in pending]
    lines += [f"  hint: {hint}" for hint in env.hints]
    if not brief:
        lines.append(f"  seed: {env.seed_used} (TCK_SEED={env.seed_used} repeats this test's "
                     "random choices)")
    return "\n".join(lines)


def _run(self: Verification, function: Callable[[Any], None], rule: str | None,
         kind: str) -> str | None:
    """Run a test body on a fresh environment within its deadline; the failure text, or None.

    (Reported outside the except block, so pytest shows the report rather than a
    chain of exceptions.) A rule violation the implementation swallowed still fails.
    """
    env = self.env = type(self).env.isolated()
    try:
        run_with_deadline(env, lambda: function(self))
        env.raise_if_violated()
    except Exception as error:  # DeadlineExceeded included
        return failure_report(env, function.__name__, rule, kind, error)
    return None


def _declare(rule: str | None, kind: str, on_failure: Callable[[str], None],
             skip_if: Callable[[Any], str | None] | None = None) -> Callable[[F], F]:
    def decorate(function: F) -> F:
        @functools.wraps(function)
        def run(self: Verification) -> None:
            if skip_if is not None:
                reason = skip_if(self)
                if reason:
                    pytest.skip(reason)
            failure = _run(self, function, rule, kind)
            if failure is not None:
                on_failure(failure)

        run.rule = rule  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


def _fail(failure: str) -> None:
    pytest.fail(failure, pytrace=False)


def _skip_optional(failure: str) -> None:
    pytest.skip("Skipped because the tested implementation does NOT implement this "
                f"OPTIONAL requirement: {failure}")


def required(rule: str | None) -> Callable[[F], F]:
    """A MUST rule: failing it fails the test, citing the rule."""
    return _declare(rule, "required", _fail)


def stochastic(rule: str) -> Callable[[F], F]:
    """A required rule that can only be checked by repetition (may pass by luck)."""

    def skip(self: Any) -> str | None:
        if self.skip_stochastic_tests():
            return "Skipping @stochastic test because skip_stochastic_tests() is true"
        return None

    return _declare(rule, "required, stochastic", _fail, skip)


def optional(rule: str) -> Callable[[F], F]:
    """A MAY rule (or an optional capability): failing it skips with the reason."""
    return _declare(rule, "optional", _skip_optional)


def untested(rule: str) -> Callable[[F], F]:
    """A rule the kit cannot verify: always reported as skipped with the rule text."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def run(self: Verification) -> None:
            pytest.skip(f"untested: {rule_text(rule)}")

        run.rule = rule  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate

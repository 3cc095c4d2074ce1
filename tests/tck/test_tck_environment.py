"""TestEnvironment: Java TCK environment variables and the waiting primitives."""

from __future__ import annotations

import contextlib
import threading

import pytest
from sansrs.tck import Latch, ManualSubscriber, Receptacle, RuleViolation, TestEnvironment


def test_environment_reads_the_java_tck_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_TIMEOUT_MILLIS", "321")
    monkeypatch.setenv("PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS", "77")
    monkeypatch.delenv("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", raising=False)
    env = TestEnvironment.from_environ(default_timeout_ms=5, gc_timeout_ms=5)
    assert env.default_timeout_ms == 321
    assert env.default_no_signals_timeout_ms == 321  # follows the default timeout
    assert env.gc_timeout_ms == 77
    monkeypatch.setenv("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", "12")
    assert TestEnvironment.from_environ().default_no_signals_timeout_ms == 12


def test_environment_rejects_unparsable_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_TIMEOUT_MILLIS", "soon")
    with pytest.raises(ValueError, match="DEFAULT_TIMEOUT_MILLIS"):
        TestEnvironment.from_environ()


def test_flop_from_another_thread_is_seen_by_verify() -> None:
    env = TestEnvironment(default_timeout_ms=100, default_no_signals_timeout_ms=10)

    def fail() -> None:
        with contextlib.suppress(AssertionError):
            env.flop("broken on a publisher thread")

    thread = threading.Thread(target=fail)
    thread.start()
    thread.join(5)
    with pytest.raises(AssertionError, match="broken on a publisher thread"):
        env.verify_no_async_errors(delay=False)


def test_latch_waits_for_a_close_from_another_thread() -> None:
    env = TestEnvironment(default_timeout_ms=2000)
    latch = Latch(env)
    threading.Timer(0.01, latch.close).start()
    latch.expect_close("never closed")
    with pytest.raises(AssertionError, match="still open"):
        Latch(TestEnvironment(default_timeout_ms=1)).expect_close("still open")


def test_receptacle_reports_unexpected_signals() -> None:
    env = TestEnvironment(default_timeout_ms=50, default_no_signals_timeout_ms=10)
    received: Receptacle[int] = Receptacle(env)
    received.add(1)
    with pytest.raises(AssertionError, match=r"unexpected on_next\(1\)"):
        received.expect_none(None, "quiet please:")
    received.complete()
    with pytest.raises(AssertionError, match="end-of-stream"):
        received.next(None, "want an element")


class _Sink:
    """A subscription that ignores what it is asked."""

    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


def test_manual_subscriber_flags_over_delivery_with_rule_1_1() -> None:
    env = TestEnvironment()
    sub: ManualSubscriber[int] = ManualSubscriber(env)

    sub.on_subscribe(_Sink())
    sub.request(1)
    sub.on_next(1)
    with pytest.raises(AssertionError, match=r"rule 1\.1"):
        sub.on_next(2)


def test_manual_publisher_sends_only_against_seen_demand() -> None:
    from sansrs.tck import ManualPublisher

    from sansrs.streams import CollectingSubscriber

    env = TestEnvironment(default_timeout_ms=200, default_no_signals_timeout_ms=10)
    publisher: ManualPublisher[int] = ManualPublisher(env)
    sink: CollectingSubscriber[int] = CollectingSubscriber(prefetch=2)
    publisher.subscribe(sink)
    publisher.expect_exact_request(2)
    publisher.expect_no_request()
    publisher.send_next(1)
    publisher.send_next(2)  # the sink replenishes 1 after half its prefetch
    with pytest.raises(AssertionError, match=r"Received request\(1\) but expected request\(5\)"):
        publisher.expect_exact_request(5)
    publisher.send_next(3)
    with pytest.raises(AssertionError, match="no pending demand"):
        publisher.send_next(4)
    assert sink.items == [1, 2, 3]
    sink.cancel()
    publisher.expect_cancelling()
    assert publisher.is_cancelled()


def test_a_rule_violation_on_another_thread_ends_a_wait_at_once() -> None:
    env = TestEnvironment(default_timeout_ms=60_000)
    received: Receptacle[int] = Receptacle(env)
    recorded = threading.Event()

    def violate() -> None:
        env.violation("1.1", "too many elements")
        recorded.set()

    thread = threading.Thread(target=violate)
    thread.start()
    thread.join(5)
    assert recorded.is_set()
    with pytest.raises(RuleViolation, match="too many elements") as info:
        received.next(None, "waiting a minute for nothing")  # returns within a poll
    assert info.value.rule == "1.1"


def test_a_none_element_is_an_element_not_a_timeout() -> None:
    env = TestEnvironment(default_timeout_ms=50)
    received: Receptacle[object] = Receptacle(env)
    received.add(None)
    assert received.next(None, "want None") is None
    with pytest.raises(AssertionError, match="timeout after 50 ms"):
        received.next(None, "nothing left")


def test_manual_subscriber_reports_none_and_a_second_terminal_signal_by_rule() -> None:
    env = TestEnvironment()
    sub: ManualSubscriber[object] = ManualSubscriber(env)

    sub.on_subscribe(_Sink())
    sub.request(1)
    with pytest.raises(RuleViolation, match=r"on_next\(None\)") as none:
        sub.on_next(None)
    assert none.value.rule == "2.13"
    sub.on_error(RuntimeError("boom"))
    with pytest.raises(RuleViolation, match=r"on_complete after on_error\(RuntimeError") as late:
        sub.on_complete()
    assert late.value.rule == "1.7"


def test_isolated_copies_share_the_settings_and_nothing_else() -> None:
    base = TestEnvironment(default_timeout_ms=7, test_deadline_ms=9)
    one, two = base.isolated(), base.isolated()
    with contextlib.suppress(AssertionError):
        one.flop("only here")
    assert (two.default_timeout_ms, two.test_deadline_ms) == (7, 9)
    assert two.async_errors == [] and base.async_errors == []

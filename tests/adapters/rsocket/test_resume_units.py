"""The pieces of resumption that need no socket: the session lifecycle
table, the reconnect policy, the client's RESUME deadline (time passed in),
the count of unconfirmed fire-and-forgets, and the wait for room of a
session's driver (docs/resumption.md)."""

from __future__ import annotations

import random
import threading
from typing import Any, cast

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import core
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.rsocket.resume import (
    EngineLink,
    ReconnectPolicy,
    ResumeOptions,
    SessionEngine,
)
from sansrs.adapters.rsocket.resume.client import Outage
from sansrs.adapters.rsocket.resume.lifecycle import TRANSITIONS, Lifecycle, Phase, Step
from sansrs.adapters.rsocket.resume.session import Session, SessionDriver
from sansrs.adapters.rsocket.types import Payload

from sansrs.rsocket import (
    Connection,
    ConnectionState,
    ResumeFrame,
    ResumeOkFrame,
    Role,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket import events as ev

# -- the lifecycle table ---------------------------------------------------------


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("step", list(Step))
def test_lifecycle_table_runs_every_pair(phase: Phase, step: Step) -> None:
    """Every (phase, step): the table's answer is what ``take`` does; a pair
    not in it changes nothing."""
    life = Lifecycle(0.0)
    life.phase = phase
    generation = life.generation
    took = life.take(step, 1.0)
    want = TRANSITIONS.get((phase, step))
    assert took == (want is not None)
    assert life.phase is (want if want is not None else phase)
    assert life.generation == generation + (1 if took and step is Step.ATTACH else 0)
    assert life.since == (1.0 if took else 0.0)


def test_lifecycle_finished_is_terminal_and_only_detached_sessions_attach() -> None:
    assert all(phase is not Phase.FINISHED for phase, _ in TRANSITIONS)
    assert [p for (p, s) in TRANSITIONS if s is Step.ATTACH] == [Phase.DETACHED]
    # Every live phase can finish: no session is left without a way out.
    assert {p for (p, s) in TRANSITIONS if s is Step.FINISH} == set(Phase) - {Phase.FINISHED}


# -- the reconnect policy ----------------------------------------------------------


def test_reconnect_policy_backs_off_with_jitter_within_the_budget() -> None:
    options = ResumeOptions(reconnect_initial=0.1, reconnect_max=0.4, reconnect_timeout=2.0)
    policy = ReconnectPolicy(options, random.Random(7))
    policy.lost(10.0)
    assert policy.next_delay(10.0) == 0.0  # the first attempt at once
    delays = []
    for _ in range(5):
        policy.attempts += 1
        delay = policy.next_delay(10.0)
        assert delay is not None
        delays.append(delay)
    bases = [0.1, 0.2, 0.4, 0.4, 0.4]
    assert all(0.5 * b <= d <= 1.5 * b for d, b in zip(delays, bases, strict=True))
    assert policy.next_delay(11.9) is not None
    assert policy.next_delay(11.95) <= 0.05 + 1e-9  # never past the budget
    assert policy.next_delay(12.0) is None
    assert "not resumed within 2 s" in policy.give_up_reason()


def test_reconnect_policy_outage_runs_from_the_first_loss_until_resumed() -> None:
    """A RESUME that times out detaches again: the budget keeps running from
    the first loss; RESUME_OK ends the outage and the next loss starts anew."""
    policy = ReconnectPolicy(ResumeOptions(reconnect_timeout=5.0), random.Random(1))
    policy.lost(0.0)
    policy.attempts = 3
    policy.lost(4.0)  # the same outage
    assert policy.next_delay(5.0) is None
    policy.resumed()
    policy.lost(100.0)
    assert policy.attempts == 0
    assert policy.next_delay(100.0) == 0.0


# -- the client's RESUME deadline (time is an argument) ---------------------------------


def detached_client(resume: ResumeOptions) -> SessionEngine:
    options = EngineOptions(keepalive_interval=2.0, max_lifetime=10.0)
    conn = core.client(options, resume_buffer_size=resume.resume_buffer_size)
    engine = SessionEngine(options, conn, resume)
    engine.handle_timeout(0.0)
    conn.connection_lost()
    engine._dispatch_events()
    assert conn.state is ConnectionState.DISCONNECTED
    return engine


def resend(engine: SessionEngine) -> None:
    """What ``Session.attach`` does for a client: a new link, RESUME, the deadline."""
    engine.drive_with(None, EngineLink(engine))
    engine.conn.resume()
    engine.arm_resume_deadline()


def test_rsocket_resume_client_resume_deadline_from_now_passed_in() -> None:
    """Spec: the client MUST NOT send other frames until RESUME_OK; one that
    never comes ends that transport at ``resume_timeout`` (an attempt failed),
    not never."""
    engine = detached_client(ResumeOptions(resume_timeout=3.0))
    resend(engine)
    assert engine.next_deadline() == 0.0  # anchored at the first ``now``
    engine.handle_timeout(50.0)
    assert engine.next_deadline() == 53.0
    engine.handle_timeout(52.9)
    assert not engine.wants_close()
    engine.handle_timeout(53.0)
    assert engine.wants_close()
    reason = engine.close_reason()
    assert reason is not None and "RESUME not answered within 3 s" in str(reason)


def test_rsocket_resume_client_resume_deadline_defaults_to_max_lifetime_plus_interval() -> None:
    engine = detached_client(ResumeOptions())
    assert engine.resume_timeout == 12.0


def test_rsocket_resume_client_resume_deadline_disarmed_by_resume_ok() -> None:
    engine = detached_client(ResumeOptions(resume_timeout=3.0))
    conn = engine.conn
    resend(engine)
    engine.handle_timeout(50.0)
    assert isinstance(decode_frame(conn.data_to_send()[3:]), ResumeFrame)
    engine.receive_data(encode_frame_prefixed(ResumeOkFrame(0)), 51.0)
    assert conn.state is ConnectionState.ESTABLISHED
    assert engine.next_deadline() != 53.0
    engine.handle_timeout(60.0)
    assert not engine.wants_close()


class NoDriver:
    """A transport's driver that is never started: the test passes time in
    and sees the engine reset its transport (``abort``)."""

    transport = None
    aborted = False

    def abort(self, timeout: float | None = 5.0) -> None:
        self.aborted = True


def test_rsocket_resume_client_resume_wait_capped_by_what_is_left_of_reconnect_timeout() -> None:
    """The outage began at 50.0 with ``reconnect_timeout`` 2 s; a RESUME
    sent at 51.0 waits until 52.0, not its ``resume_timeout`` (8 s), and
    says so: the session ends within ``reconnect_timeout`` of the loss."""
    resume = ResumeOptions(resume_timeout=8.0, reconnect_timeout=2.0)
    engine = detached_client(resume)
    session = Session(engine, threading.RLock())
    policy = ReconnectPolicy(resume, random.Random(3))
    session.policy = policy
    session.life.take(Step.DETACH, 50.0)
    policy.lost(50.0)
    assert policy.ends_at() == 52.0
    driver = NoDriver()
    assert session.attach(EngineLink(engine), cast(Any, driver), resume=True)
    engine.handle_timeout(51.0)  # the first turn anchors the deadline
    assert engine.next_deadline() == 52.0
    engine.handle_timeout(51.99)
    assert not engine.wants_close()
    engine.handle_timeout(52.0)
    assert engine.wants_close() and driver.aborted
    reason = engine.close_reason()
    assert reason is not None
    assert "RESUME not answered when reconnect_timeout (2 s) ran out" in str(reason)
    # With more of the outage left than resume_timeout: the whole wait.
    relaxed = detached_client(ResumeOptions(resume_timeout=1.0, reconnect_timeout=2.0))
    resend(relaxed)
    relaxed.arm_resume_deadline(102.0)
    relaxed.handle_timeout(100.0)
    assert relaxed.next_deadline() == 101.0


def test_rsocket_resume_client_connect_capped_by_what_is_left_of_reconnect_timeout() -> None:
    """Opening a transport within an outage may take ``connect_timeout``
    only while that much of ``reconnect_timeout`` is left."""
    resume = ResumeOptions(reconnect_timeout=2.0)
    engine = detached_client(resume)
    session = Session(engine, threading.RLock())
    policy = ReconnectPolicy(resume, random.Random(3))
    session.life.take(Step.DETACH, 0.0)
    outage = Outage(session, policy, lambda transport, link: cast(Any, None))
    ends = policy.ends_at()
    assert ends is not None
    assert outage.attempt(ends - 2.0, 10.0) == 2.0
    assert outage.attempt(ends - 0.25, 10.0) == 0.25
    assert outage.attempt(ends - 1.5, 0.5) == 0.5
    assert policy.attempts == 3


# -- unconfirmed fire-and-forgets ----------------------------------------------------


def pair() -> tuple[SessionEngine, Connection]:
    options = EngineOptions()
    resume = ResumeOptions(resume_buffer_size=1 << 20)
    client = SessionEngine(options, core.client(options, resume_buffer_size=1 << 20), resume)
    Session(client, threading.RLock())
    store = core.session_store(keep_detached=60.0, max_sessions=4)
    server = Connection(Role.SERVER, sessions=store)
    server.receive_data(client.data_to_send(), 0.0)
    setup = [e for e in server.events() if isinstance(e, ev.SetupReceived)]
    assert setup
    server.accept_setup()
    return client, server


def test_unconfirmed_fire_and_forgets_are_trimmed_as_the_peer_confirms_them() -> None:
    client, server = pair()
    client.fire_and_forget_many([Payload(b"f%d" % i) for i in range(10_000)])
    unconfirmed = client.unconfirmed
    assert unconfirmed.count() <= 10_000
    server.receive_data(client.data_to_send(), 0.1)
    server.events()
    # The server's KEEPALIVE answer carries its position: all confirmed.
    server.send_keepalive()
    client.receive_data(server.data_to_send(), 0.2)
    client.fire_and_forget(Payload(b"one more"))
    client.acknowledge()
    assert unconfirmed.count() <= 1
    # Bounded while the peer confirms: at most the retained frames' worth.
    for _ in range(20):
        client.fire_and_forget_many([Payload(b"x" * 100) for _ in range(500)])
        server.receive_data(client.data_to_send(), 0.3)
        server.events()
        server.send_keepalive()
        client.receive_data(server.data_to_send(), 0.3)
    client.acknowledge()
    assert len(unconfirmed.ends) <= 500


def test_unconfirmed_fire_and_forgets_after_the_end_count_as_dropped() -> None:
    client, _ = pair()
    client.fire_and_forget(Payload(b"a"))
    client.close_core("test over")
    client.fire_and_forget_many([Payload(b"b"), Payload(b"c")])
    assert client.unconfirmed.dropped == 2
    loss = client.loss("test over", requests=0)
    assert loss is not None and loss.fire_and_forgets == 3


# -- a session's driver waiting for room -------------------------------------------


class WaitingDriver(NoDriver):
    """A transport's driver whose ``wait_until`` says it was asked and
    returns as if a turn had made ``ready()`` hold."""

    buffered = 0

    def __init__(self) -> None:
        self.asked = threading.Event()

    def call_soon(self, fn: object, timeout: float | None = None) -> None:
        raise AssertionError("no call is queued by a wait")

    def wait_until(self, ready: object, timeout: float | None = None) -> None:
        self.asked.set()


def detached_session() -> Session:
    session = Session(detached_client(ResumeOptions()), threading.RLock())
    assert session.life.take(Step.DETACH, 0.0)
    return session


def test_rsocket_resume_session_driver_waits_out_the_outage_then_on_the_next_transport() -> None:
    session = detached_session()
    driver = SessionDriver(session)
    done: list[BaseException | None] = []

    def wait() -> None:
        try:
            driver.wait_until(lambda: False, 10.0)
            done.append(None)
        except BaseException as exc:
            done.append(exc)

    # The next transport comes only once the waiter waits for one (forced:
    # not a race between the thread's start and the attach).
    waiting = threading.Event()
    original = session._wait_replaced

    def wait_replaced(old: Any, deadline: float | None) -> None:
        waiting.set()
        original(old, deadline)

    session._wait_replaced = wait_replaced  # type: ignore[method-assign]
    waiter = threading.Thread(target=wait)
    waiter.start()
    assert waiting.wait(10.0)
    next_one = WaitingDriver()
    assert session.attach(EngineLink(session.engine), cast(Any, next_one))
    waiter.join(10.0)
    assert next_one.asked.is_set() and done == [None]


def test_rsocket_resume_session_driver_never_waits_on_the_thread_that_attaches() -> None:
    # A selector or asyncio loop runs every transport of the session: waiting
    # there for the next transport would wait for itself.
    session = detached_session()
    session.home = lambda: True
    SessionDriver(session).wait_until(lambda: False, None)  # returns at once


def test_rsocket_resume_session_driver_wait_ends_with_the_session_or_its_timeout() -> None:
    session = detached_session()
    driver = SessionDriver(session)
    with pytest.raises(TimeoutError, match="not ready within"):
        driver.wait_until(lambda: False, 0.01)
    session.finish(ConnectionClosed("gone"), "gone")
    with pytest.raises(ConnectionClosed, match="session ended"):
        driver.wait_until(lambda: False, None)

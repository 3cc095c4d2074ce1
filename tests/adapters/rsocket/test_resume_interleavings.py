"""The server's session race, forced: an old transport's teardown and a new
transport's RESUME interleaved every way, on every driver, with injected
lifecycle hooks (``steps.py``) and a gated proxy (``chaos.py``) deciding
the order; no sleeps. In each, the session is resumed (never finished), the
stream goes on exactly once, and the next RESUME is answered (the issue's
symptom was a session finished under a just-resumed transport, whose next
RESUME went unanswered forever). docs/resumption.md."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pytest
from sansrs.adapters.drive.errors import ConnectionClosed
from sansrs.adapters.drive.selector import Loop
from sansrs.adapters.rsocket.resume import ResumeOptions, connect_resumable, serve_resumable
from sansrs.adapters.rsocket.resume import aio as resume_aio

from sansrs.rsocket import ErrorCode, ErrorFrame, ResumeFrame, decode_frame, encode_frame_prefixed
from tests.adapters.rsocket.chaos import ChaosProxy, Fault
from tests.adapters.rsocket.chaos_workload import ChaosHandler, Progress, Sizes, item
from tests.adapters.rsocket.steps import Steps

WAIT = 20.0
N = 3_000
FNF = 50


@dataclass
class Scenario:
    server: Any
    client: Any
    proxy: ChaosProxy
    handler: ChaosHandler
    steps: Steps

    def only_session(self) -> Any:
        (state,) = self.server.registry.snapshot()
        return state


@contextmanager
def scenario(
    driver: str,
    steps: Steps,
    *,
    handover_timeout: float = 5.0,
    client_steps: Steps | None = None,
) -> Iterator[Scenario]:
    """A server (hooks: ``steps``), the proxy, a resumable client (hooks:
    ``client_steps``); threads or a selector loop per side."""
    handler = ChaosHandler(Sizes(), Progress())
    loops = (Loop(name="il-server").start(), Loop(name="il-client").start())
    server_loop: Any = loops[0] if driver == "selector" else "thread"
    client_loop: Any = loops[1] if driver == "selector" else "thread"
    server_opts = ResumeOptions(on_step=steps, handover_timeout=handover_timeout)
    server = serve_resumable("tcp://127.0.0.1:0", handler, loop=server_loop, resume=server_opts)
    proxy = ChaosProxy(("127.0.0.1", server.endpoint.port))
    client = connect_resumable(
        proxy.url,
        loop=client_loop,
        resume=ResumeOptions(reconnect_initial=0.01, on_step=client_steps),
    )
    try:
        yield Scenario(server, client, proxy, handler, steps)
    finally:
        steps.release_all()
        try:
            client.close()
        finally:
            proxy.close()
            server.close()
            for loop in loops:
                loop.stop(5.0)


def take(stream: Iterator[Any], n: int) -> list[bytes]:
    return [p.data for p in islice(stream, n)]


def expected(n: int = N) -> list[bytes]:
    return [item(b"s", i) for i in range(n)]


def cut_again_and_finish(sc: Scenario, stream: Iterator[Any], got: list[bytes]) -> None:
    """A second cut: its RESUME is answered too; then every item, once, in
    order, and no step finished the session."""
    sc.proxy.inject(Fault.RESET)
    assert sc.steps.wait("resume:attached", 2)
    got += [p.data for p in stream]
    assert got == expected()
    assert sc.steps.count("finish") == 0


def wait_fnf(sc: Scenario) -> bool:
    """The fire-and-forgets reach the handler; the client's answer to a
    request sent after them proves they were read (one ordered transport)."""
    assert sc.client.request_response(b"after", timeout=WAIT) is not None
    return sc.handler.fnf == [item(b"f", i) for i in range(FNF)]


# -- thread per connection: the old transport's thread paused mid-teardown ----------


def test_rsocket_resume_resume_waits_for_an_old_teardown_that_holds_the_lock() -> None:
    """The issue's interleaving: the old transport's thread is inside its
    teardown (the session marked disconnected, events dispatching) when the
    RESUME arrives on a new thread. The RESUME waits for the lock; the old
    thread finishes detaching; then the RESUME takes the session over."""
    steps = Steps()
    with scenario("thread", steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = take(stream, 100)
        steps.hold("detach:locked")
        sc.proxy.gate()  # the RESUME waits at the proxy until the teardown began
        sc.proxy.inject(Fault.RESET)
        assert steps.wait("detach:locked")
        sc.proxy.release()
        assert steps.wait("resume:enter")  # the RESUME is here, on its own thread
        assert steps.count("resume:locked") == 0  # ... and cannot touch the session
        steps.release("detach:locked")
        assert steps.wait("resume:attached")
        assert steps.index("detach:done") < steps.index("resume:locked")
        got += take(stream, 100)
        cut_again_and_finish(sc, stream, got)  # the next RESUME is answered too
        state = sc.only_session()
        assert (state.phase, state.generation) == ("attached", 3)


def test_rsocket_resume_old_thread_paused_after_detaching_cannot_finish_the_resumed_session() -> (
    None
):
    """The old thread has detached the session and is paused before it
    returns; the RESUME takes the session over meanwhile; the old thread then
    returns and must leave the resumed session alone (it used to finish it:
    streams cancelled, transport closed, the next RESUME unanswered)."""
    steps = Steps()
    with scenario("thread", steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = take(stream, 100)
        steps.hold("detach:done")
        sc.proxy.gate()
        sc.proxy.inject(Fault.RESET)
        assert steps.wait("detach:done")
        for i in range(FNF):  # handed over while the session has no transport
            sc.client.fire_and_forget(item(b"f", i), timeout=WAIT)
        sc.proxy.release()
        assert steps.wait("resume:attached")
        steps.release("detach:done")  # the old thread returns now
        got += take(stream, 100)
        cut_again_and_finish(sc, stream, got)
        assert wait_fnf(sc)
        assert sc.only_session().generation == 3


def test_rsocket_resume_half_open_old_transport_lets_go_before_the_resume_touches_the_session() -> (
    None
):
    """Only the client saw the drop: the RESUME finds the session attached
    to a silent old transport on another thread, resets it and waits; that
    thread (held at the start of its teardown) detaches; then the RESUME."""
    steps = Steps()
    with scenario("thread", steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = take(stream, 100)
        steps.hold("detach:enter")
        sc.proxy.inject(Fault.HALF_OPEN_CLIENT)
        assert steps.wait("resume:handover-wait")
        assert steps.wait("detach:enter")
        steps.release("detach:enter")
        assert steps.wait("resume:attached")
        order = [steps.index(s) for s in ("resume:supersede", "detach:locked", "resume:locked")]
        assert order == sorted(order)
        got += [p.data for p in stream]
        assert got == expected()


def test_rsocket_resume_rejected_when_the_old_transport_does_not_let_go_in_time() -> None:
    """The old transport's thread does not let go within ``handover_timeout``:
    the RESUME is answered ERROR[REJECTED_RESUME] (never left unanswered),
    the client's calls fail with that reason, and the server frees the
    session once the old thread lets go."""
    steps = Steps()
    with scenario("thread", steps, handover_timeout=0.2) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        assert take(stream, 10) == expected(10)
        steps.hold("detach:enter")
        sc.proxy.inject(Fault.HALF_OPEN_CLIENT)
        assert steps.wait("resume:handover-timeout")
        steps.release("detach:enter")
        with pytest.raises(ConnectionClosed, match=r"REJECTED_RESUME.*did not let go"):
            for _ in stream:
                pass
        assert sc.server.registry.wait_empty(WAIT)
        assert sc.server.registry.stats.rejected == 1


# -- two RESUMEs for one session: the newest wins, the older is answered --------------


def resume_like(client: Any) -> bytes:
    """The RESUME the client sends now (same token, same positions), for a
    scripted connection to send first."""
    conn = client.session.engine.conn
    first_available = conn.sent_position - conn.retained_bytes
    frame = ResumeFrame(conn.resume_token, conn.received_position, first_available)
    return encode_frame_prefixed(frame)


def read_frame(sock: socket.socket) -> Any:
    """One length-prefixed frame from ``sock`` (bounded by its timeout)."""
    data = b""
    while len(data) < 3 or len(data) < 3 + int.from_bytes(data[:3], "big"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} bytes, before a whole frame")
        data += chunk
    return decode_frame(data[3 : 3 + int.from_bytes(data[:3], "big")])


@pytest.mark.timeout(40)
def test_rsocket_resume_newer_resume_supersedes_an_older_one_waiting_for_the_same_session() -> None:
    """Two RESUMEs for one token wait for the old transport's thread to let
    go (held at the start of its teardown). The newer one wins: the older is
    answered ERROR[REJECTED_RESUME] naming why and closed at once, without
    waiting for the hand-over; the newer resumes the session exactly once,
    and only it counts as a resume. (Both used to wait; the second to get
    the lock fed its RESUME to a core another connection's thread had just
    taken, and its connection got no answer and stayed open.)"""
    steps = Steps()
    client_steps = Steps()
    with scenario("thread", steps, client_steps=client_steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = take(stream, 100)
        steps.hold("detach:enter")  # the old transport's thread will not let go yet
        sc.proxy.gate()  # the client's RESUME waits at the proxy
        sc.proxy.inject(Fault.HALF_OPEN_CLIENT)
        assert client_steps.wait("attach")  # its RESUME is queued: positions are fixed
        with socket.create_connection(("127.0.0.1", sc.server.endpoint.port)) as older:
            older.settimeout(10.0)
            older.sendall(resume_like(sc.client))  # the older RESUME, on its own thread
            assert steps.wait("resume:handover-wait")
            sc.proxy.release()  # the client's RESUME, the newer one, arrives
            assert steps.wait("resume:handover-wait", 2)
            answer = read_frame(older)  # while the old thread still holds the session
            assert isinstance(answer, ErrorFrame)
            assert answer.stream_id == 0 and answer.error_code == ErrorCode.REJECTED_RESUME
            assert b"superseded by a newer RESUME" in answer.data
            assert older.recv(1) == b""  # and closed
        assert steps.count("resume:attached") == 0
        steps.release("detach:enter")
        assert steps.wait("resume:attached")
        got += [p.data for p in stream]
        assert got == expected()
        stats = sc.server.registry.stats
        assert (stats.resumed, stats.superseded, stats.rejected) == (1, 1, 0)
        state = sc.only_session()
        assert (state.phase, state.generation, state.resumes) == ("attached", 2, 1)
        assert sc.client.resumes == 1


# -- every driver: the two orders a loop thread can see ------------------------------


DRIVERS = ("thread", "selector", "asyncio")


@pytest.mark.parametrize("driver", DRIVERS)
def test_rsocket_resume_teardown_first_then_resume_every_driver(driver: str) -> None:
    """The old transport is torn down first (the RESUME is held at the
    proxy until the session is detached), then resumed; fire-and-forgets
    handed over meanwhile arrive once, in order; a second cut resumes too."""
    if driver == "asyncio":
        asyncio.run(teardown_first_async())
        return
    steps = Steps()
    with scenario(driver, steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = take(stream, 100)
        sc.proxy.gate()
        sc.proxy.inject(Fault.RESET)
        assert steps.wait("detached")
        for i in range(FNF):
            sc.client.fire_and_forget(item(b"f", i), timeout=WAIT)
        sc.proxy.release()
        assert steps.wait("resume:attached")
        got += take(stream, 100)
        cut_again_and_finish(sc, stream, got)
        assert wait_fnf(sc)


@pytest.mark.parametrize("driver", DRIVERS)
def test_rsocket_resume_resume_first_then_old_teardown_every_driver(driver: str) -> None:
    """Half-open: the RESUME arrives while the old transport is still open;
    the session moves to the new transport, the old one ends later without
    touching it (a stale link on a loop thread, a detach before the hand-over
    on its own thread); a second cut resumes too."""
    if driver == "asyncio":
        asyncio.run(resume_first_async())
        return
    steps = Steps()
    with scenario(driver, steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = take(stream, 100)
        sc.proxy.inject(Fault.HALF_OPEN_CLIENT)
        assert steps.wait("resume:attached")
        assert steps.wait("resume:supersede")
        if driver == "selector":  # one loop thread: let go inline, the old link goes stale
            assert steps.wait("detach:stale")
        got += take(stream, 100)
        cut_again_and_finish(sc, stream, got)


# -- asyncio -------------------------------------------------------------------------


@asynccontextmanager
async def async_scenario(steps: Steps) -> AsyncIterator[Scenario]:
    handler = ChaosHandler(Sizes(), Progress())
    server = await resume_aio.serve_resumable(
        "tcp://127.0.0.1:0", handler, resume=ResumeOptions(on_step=steps)
    )
    proxy = ChaosProxy(("127.0.0.1", server.endpoint.port))
    client = await resume_aio.connect_resumable(
        proxy.url, resume=ResumeOptions(reconnect_initial=0.01)
    )
    try:
        yield Scenario(server, client, proxy, handler, steps)
    finally:
        steps.release_all()
        try:
            await client.close()
        finally:
            proxy.close()
            await server.close()


async def wait_step(steps: Steps, name: str, count: int = 1) -> None:
    assert await asyncio.to_thread(steps.wait, name, count)


async def atake(stream: Any, n: int | None) -> list[bytes]:
    out: list[bytes] = []
    async for p in stream:
        out.append(p.data)
        if n is not None and len(out) == n:
            break
    return out


async def teardown_first_async() -> None:
    steps = Steps()
    async with async_scenario(steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = await atake(stream, 100)
        sc.proxy.gate()
        sc.proxy.inject(Fault.RESET)
        await wait_step(steps, "detached")
        for i in range(FNF):
            await sc.client.fire_and_forget(item(b"f", i))
        sc.proxy.release()
        await wait_step(steps, "resume:attached")
        got += await atake(stream, 100)
        sc.proxy.inject(Fault.RESET)
        await wait_step(steps, "resume:attached", 2)
        got += await atake(stream, None)
        assert got == expected()
        assert await sc.client.request_response(b"after", timeout=WAIT) is not None
        assert sc.handler.fnf == [item(b"f", i) for i in range(FNF)]
        assert steps.count("finish") == 0


async def resume_first_async() -> None:
    steps = Steps()
    async with async_scenario(steps) as sc:
        stream = sc.client.request_stream(str(N), prefetch=32, timeout=WAIT)
        got = await atake(stream, 100)
        sc.proxy.inject(Fault.HALF_OPEN_CLIENT)
        await wait_step(steps, "resume:attached")
        await wait_step(steps, "detach:stale")
        got += await atake(stream, 100)
        sc.proxy.inject(Fault.RESET)
        await wait_step(steps, "resume:attached", 2)
        got += await atake(stream, None)
        assert got == expected()
        assert steps.count("finish") == 0

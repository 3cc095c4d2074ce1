"""What resumption promises when a session cannot be kept, on every driver:
a RESUME (or a SETUP) never answered ends in an error within the configured
deadlines; fire-and-forgets and requests handed over but never delivered
surface to the application (``on_loss``, ``close()`` raises ``SessionLost``);
the sessions a server holds are bounded and expire whatever their phase; a
stored session without an engine is answered, never left silent
(docs/resumption.md)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, cast

import pytest
from sansrs.adapters.drive.errors import ConnectionClosed
from sansrs.adapters.drive.selector import Loop
from sansrs.adapters.rsocket import EngineOptions, ResumeOptions, SessionLoss, SessionLost
from sansrs.adapters.rsocket import resume as resume_api
from sansrs.adapters.rsocket.resume import aio as resume_aio
from sansrs.adapters.rsocket.resume.server import new_server_engine
from sansrs.adapters.rsocket.resume.session import Session

from sansrs.rsocket import ErrorCode, ErrorFrame, SetupFrame, decode_frame, encode_frame_prefixed
from tests.adapters.rsocket.chaos import ChaosProxy, Fault
from tests.adapters.rsocket.chaos_workload import ChaosHandler, Progress, Sizes, item
from tests.adapters.rsocket.steps import Steps

WAIT = 20.0
DRIVERS = ("thread", "selector", "asyncio")
#: Short timers: silence is noticed in well under a second.
FAST = {"keepalive_interval": 0.1, "max_lifetime": 0.4}


def deadline_options(steps: Steps | None = None) -> ResumeOptions:
    return ResumeOptions(
        reconnect_initial=0.01,
        reconnect_max=0.05,
        reconnect_timeout=1.0,
        resume_timeout=0.3,
        on_step=steps,
    )


@contextmanager
def sync_pair(
    driver: str, server_opts: ResumeOptions, client_opts: ResumeOptions, **setup: Any
) -> Iterator[tuple[Any, ChaosProxy, Any, ChaosHandler]]:
    handler = ChaosHandler(Sizes(), Progress())
    loops = (Loop(name="g-server").start(), Loop(name="g-client").start())
    server_loop: Any = loops[0] if driver == "selector" else "thread"
    client_loop: Any = loops[1] if driver == "selector" else "thread"
    server = resume_api.serve_resumable(
        "tcp://127.0.0.1:0", handler, loop=server_loop, resume=server_opts
    )
    proxy = ChaosProxy(("127.0.0.1", server.endpoint.port))
    client = None
    try:
        client = resume_api.connect_resumable(
            proxy.url, loop=client_loop, resume=client_opts, **setup
        )
        yield server, proxy, client, handler
    finally:
        if client is not None:
            with suppress(SessionLost):
                client.abort(1.0)
        proxy.close()
        server.close()
        for loop in loops:
            loop.stop(5.0)


# -- a RESUME or a SETUP never answered ----------------------------------------------


def unanswered_resume(driver: str, options: ResumeOptions) -> tuple[BaseException, float]:
    """A stream, a cut, then every new transport accepted and never
    answered: the error the stream ends with, and how long after the cut."""
    if driver == "asyncio":
        return asyncio.run(unanswered_resume_async(options))
    with sync_pair(driver, ResumeOptions(), options) as (_, proxy, client, _h):
        stream = client.request_stream(b"1000000", prefetch=8, timeout=WAIT)
        assert next(stream).data == item(b"s", 0)
        proxy.silence(1000)
        proxy.inject(Fault.RESET)
        cut = time.monotonic()
        with pytest.raises(ConnectionClosed) as info:
            for _ in stream:
                pass
        return info.value, time.monotonic() - cut


@pytest.mark.parametrize("driver", DRIVERS)
def test_rsocket_resume_unanswered_resume_ends_in_an_error_within_the_deadlines(
    driver: str,
) -> None:
    """Every new transport after the cut is accepted and never answered: each
    RESUME times out (``resume_timeout``), the attempts go on within the
    reconnect policy, and the call fails within ``reconnect_timeout`` of the
    loss (the last RESUME's wait is cut to what is left of it), saying why."""
    steps = Steps()
    options = deadline_options(steps)
    error, elapsed = unanswered_resume(driver, options)
    assert "not resumed within 1 s" in str(error)
    assert re.search(r"RESUME not answered (within 0\.3 s|when reconnect_timeout)", str(error))
    assert elapsed < options.reconnect_timeout + 0.5
    if driver != "asyncio":
        assert steps.count("client:resume-timeout") >= 2


@pytest.mark.timeout(20)
@pytest.mark.parametrize("driver", DRIVERS)
def test_rsocket_resume_reconnect_timeout_bounds_the_outage_whatever_resume_timeout(
    driver: str,
) -> None:
    """``resume_timeout`` (3 s) longer than ``reconnect_timeout`` (0.6 s):
    the RESUME's wait is cut to what is left of the outage, so the session
    ends within ``reconnect_timeout`` of the loss and the error says that
    bound (each RESUME used to wait its whole ``resume_timeout``: the error
    came after it, saying "not resumed within 0.6 s")."""
    options = ResumeOptions(
        reconnect_initial=0.01, reconnect_max=0.05, reconnect_timeout=0.6, resume_timeout=3.0
    )
    error, elapsed = unanswered_resume(driver, options)
    assert 0.5 < elapsed < 0.6 + 0.4
    assert "not resumed within 0.6 s of the loss" in str(error)
    assert "RESUME not answered when reconnect_timeout (0.6 s) ran out" in str(error)


async def unanswered_resume_async(options: ResumeOptions) -> tuple[BaseException, float]:
    handler = ChaosHandler(Sizes(), Progress())
    server = await resume_aio.serve_resumable("tcp://127.0.0.1:0", handler)
    try:
        with ChaosProxy(("127.0.0.1", server.endpoint.port)) as proxy:
            client = await resume_aio.connect_resumable(proxy.url, resume=options)
            stream = client.request_stream(b"1000000", prefetch=8, timeout=WAIT)
            assert (await anext(stream)).data == item(b"s", 0)
            proxy.silence(1000)
            proxy.inject(Fault.RESET)
            cut = time.monotonic()
            with pytest.raises(ConnectionClosed) as info:
                async for _ in stream:
                    pass
            elapsed = time.monotonic() - cut
            await client.close()
            return info.value, elapsed
    finally:
        await server.close()


@pytest.mark.parametrize("driver", DRIVERS)
def test_rsocket_resume_server_silent_after_setup_ends_in_an_error(driver: str) -> None:
    """A server that accepts the connection and never answers anything (not
    the SETUP, not a KEEPALIVE): the keepalive max lifetime detaches the
    session, the RESUMEs go unanswered too, and the request fails within the
    deadlines instead of hanging."""
    options = deadline_options()
    bound = FAST["max_lifetime"] + options.reconnect_timeout + 0.3 + 1.0
    if driver == "asyncio":
        error, elapsed = asyncio.run(silent_setup_async(options))
    else:
        handler = ChaosHandler(Sizes(), Progress())
        loop = Loop(name="g-silent").start() if driver == "selector" else "thread"
        server = resume_api.serve_resumable("tcp://127.0.0.1:0", handler)
        try:
            with ChaosProxy(("127.0.0.1", server.endpoint.port)) as proxy:
                proxy.silence(1000)
                start = time.monotonic()
                client = resume_api.connect_resumable(proxy.url, loop=loop, resume=options, **FAST)
                with pytest.raises(ConnectionClosed) as info:
                    client.request_response(b"hello")
                error, elapsed = info.value, time.monotonic() - start
                client.close()
        finally:
            server.close()
            if isinstance(loop, Loop):
                loop.stop(5.0)
    assert "not resumed within 1 s" in str(error)
    assert elapsed < bound


async def silent_setup_async(options: ResumeOptions) -> tuple[BaseException, float]:
    server = await resume_aio.serve_resumable("tcp://127.0.0.1:0", None)
    try:
        with ChaosProxy(("127.0.0.1", server.endpoint.port)) as proxy:
            proxy.silence(1000)
            start = time.monotonic()
            client = await resume_aio.connect_resumable(proxy.url, resume=options, **FAST)
            with pytest.raises(ConnectionClosed) as info:
                await client.request_response(b"hello")
            elapsed = time.monotonic() - start
            await client.close()
            return info.value, elapsed
    finally:
        await server.close()


# -- nothing lost silently ------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_rsocket_resume_fire_and_forgets_of_an_expired_session_surface_on_close(
    driver: str,
) -> None:
    """The server expires the session while the client cannot reach it; the
    client's RESUME is then rejected. The outstanding stream fails with
    REJECTED_RESUME, ``on_loss`` reports the fire-and-forgets handed over
    since the server last confirmed, and ``close()`` raises ``SessionLost``
    with the same count (once)."""
    server_steps = Steps()
    server_opts = ResumeOptions(keep_detached=0.3, on_step=server_steps)
    losses: list[SessionLoss] = []
    client_opts = ResumeOptions(reconnect_initial=0.01, on_loss=losses.append)
    if driver == "asyncio":
        asyncio.run(expired_async(server_opts, client_opts, server_steps, losses))
        return
    with sync_pair(driver, server_opts, client_opts) as (server, proxy, client, _):
        stream = client.request_stream(b"1000000", prefetch=8, timeout=WAIT)
        assert next(stream).data == item(b"s", 0)
        proxy.gate()
        proxy.inject(Fault.RESET)
        for i in range(20):
            client.fire_and_forget(item(b"f", i), timeout=WAIT)
        assert server_steps.wait("finish")  # expired
        proxy.release()
        with pytest.raises(ConnectionClosed, match="REJECTED_RESUME"):
            for _ in stream:
                pass
        with pytest.raises(SessionLost) as info:
            client.close()
        assert info.value.loss.fire_and_forgets == 20
        assert info.value.loss.requests == 1
        assert losses == [info.value.loss]
        client.close()  # said once
        assert server.registry.stats.expired == 1


async def expired_async(
    server_opts: ResumeOptions,
    client_opts: ResumeOptions,
    server_steps: Steps,
    losses: list[SessionLoss],
) -> None:
    server = await resume_aio.serve_resumable(
        "tcp://127.0.0.1:0", ChaosHandler(Sizes(), Progress()), resume=server_opts
    )
    try:
        with ChaosProxy(("127.0.0.1", server.endpoint.port)) as proxy:
            client = await resume_aio.connect_resumable(proxy.url, resume=client_opts)
            stream = client.request_stream(b"1000000", prefetch=8, timeout=WAIT)
            assert (await anext(stream)).data == item(b"s", 0)
            proxy.gate()
            proxy.inject(Fault.RESET)
            for i in range(10):
                await client.fire_and_forget(item(b"f", i))
            # Plain bytes by the many call (framed from the bytes elsewhere):
            # each kept unconfirmed, counted in the loss all the same.
            more = [item(b"f", i) for i in range(10, 20)]
            assert await client.fire_and_forget_many(more) == 10
            assert await asyncio.to_thread(server_steps.wait, "finish")
            proxy.release()
            with pytest.raises(ConnectionClosed, match="REJECTED_RESUME"):
                async for _ in stream:
                    pass
            with pytest.raises(SessionLost) as info:
                await client.close()
            assert info.value.loss.fire_and_forgets == 20
            assert losses == [info.value.loss]
            assert server.registry.stats.expired == 1
    finally:
        await server.close()


def test_rsocket_resume_close_while_detached_reports_what_never_left() -> None:
    with sync_pair("thread", ResumeOptions(), ResumeOptions(reconnect_initial=0.01)) as (
        _,
        proxy,
        client,
        _h,
    ):
        assert client.request_response(b"q0", timeout=WAIT) is not None
        proxy.gate()
        proxy.inject(Fault.RESET)
        for i in range(5):
            client.fire_and_forget(item(b"f", i), timeout=WAIT)
        with pytest.raises(SessionLost, match="5 fire-and-forget"):
            client.close()


def test_rsocket_resume_graceful_close_loses_nothing() -> None:
    with sync_pair("thread", ResumeOptions(), ResumeOptions()) as (server, _, client, handler):
        for i in range(100):
            client.fire_and_forget(item(b"f", i), timeout=WAIT)
        assert client.request_response(b"q0", timeout=WAIT) is not None
        client.close()
        assert client.loss is None
        assert server.registry.wait_empty(WAIT)
        assert handler.fnf == [item(b"f", i) for i in range(100)]


# -- bounded sessions -------------------------------------------------------------


def test_rsocket_resume_max_sessions_from_the_public_options_rejects_setup_beyond_it() -> None:
    """Spec: Identification Token Handling: a server that cannot keep
    another session rejects its SETUP (ERROR[REJECTED_SETUP])."""
    handler = ChaosHandler(Sizes(), Progress())
    opts = ResumeOptions(max_sessions=2)
    with resume_api.serve_resumable("tcp://127.0.0.1:0", handler, resume=opts) as server:
        kept = [resume_api.connect_resumable(server.url) for _ in range(2)]
        for c in kept:
            assert c.request_response(b"q", timeout=WAIT) is not None
        extra = resume_api.connect_resumable(server.url)
        with pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*too many resumable sessions"):
            extra.request_response(b"q", timeout=WAIT)
        assert len(server.registry) == 2
        for c in [*kept, extra]:
            c.close()
        assert server.registry.wait_empty(WAIT)


def drop_resumable_setups(port: int, count: int, steps: Steps) -> None:
    """What a flood looks like: ``count`` connections, each a SETUP with R
    and a fresh token, then closed; each waits until the server holds its
    session detached (so the order is fixed: no sleeps)."""
    for i in range(count):
        setup = SetupFrame(
            keepalive_interval=20_000,
            max_lifetime=90_000,
            metadata_mime_type="application/octet-stream",
            data_mime_type="application/octet-stream",
            resume_token=os.urandom(16),
        )
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(encode_frame_prefixed(setup))
        assert steps.wait("detached", i + 1, timeout=5.0), f"SETUP {i + 1} was not kept"


@pytest.mark.timeout(40)
@pytest.mark.parametrize("driver", ("thread", "selector"))
def test_rsocket_resume_flood_of_dropped_sessions_evicts_them_and_never_refuses_a_client(
    driver: str,
) -> None:
    """``max_sessions`` filled three times over by SETUPs whose connections
    drop: each SETUP beyond the cap evicts the session detached the longest
    (never refused), so a legitimate resumable client that comes next is
    accepted and resumes across a cut. (The cap used to answer every SETUP
    REJECTED_SETUP until the flood's sessions expired.)"""
    cap = 8
    steps = Steps()
    handler = ChaosHandler(Sizes(), Progress())
    loop = Loop(name="flood").start() if driver == "selector" else None
    server = resume_api.serve_resumable(
        "tcp://127.0.0.1:0",
        handler,
        loop=loop or "thread",
        resume=ResumeOptions(max_sessions=cap, on_step=steps),
    )
    try:
        drop_resumable_setups(server.endpoint.port, 3 * cap, steps)
        registry = server.registry
        assert len(registry) == cap and registry.stats.evicted == 2 * cap
        assert {s.phase for s in registry.snapshot()} == {"detached"}
        with ChaosProxy(("127.0.0.1", server.endpoint.port)) as proxy:
            client = resume_api.connect_resumable(
                proxy.url, loop=loop or "thread", resume=ResumeOptions(reconnect_initial=0.01)
            )
            stream = client.request_stream(b"2000", prefetch=32, timeout=WAIT)
            got = [next(stream).data for _ in range(100)]
            proxy.inject(Fault.RESET)
            got += [p.data for p in stream]
            assert got == [item(b"s", i) for i in range(2000)]
            assert client.resumes == 1
            client.close()
        assert registry.stats.evicted == 2 * cap + 1  # the client's SETUP made room too
        assert registry.stats.rejected == 0
    finally:
        server.close()
        if loop is not None:
            loop.stop(5.0)


def test_rsocket_resume_session_whose_driver_never_let_go_is_detached_and_expires() -> None:
    """A driver whose ``connection_lost`` fails would leave its session
    attached to nothing: its exit lets go instead, and the session expires
    after ``keep_detached`` like any detached one."""
    steps = Steps()
    failed = threading.Event()

    def on_step(name: str) -> None:
        steps(name)
        if name == "detach:enter" and not failed.is_set():
            failed.set()
            raise RuntimeError("connection_lost failed (injected)")

    server_opts = ResumeOptions(keep_detached=0.3, on_step=on_step)
    with sync_pair("thread", server_opts, ResumeOptions(reconnect_initial=0.01)) as (
        server,
        proxy,
        client,
        _,
    ):
        assert client.request_response(b"q", timeout=WAIT) is not None
        proxy.silence(1000)  # the client cannot come back
        proxy.inject(Fault.RESET)
        assert steps.wait("detached")  # by the driver's exit
        assert steps.wait("finish")  # expired
        assert server.registry.wait_empty(WAIT)
        assert server.registry.stats.expired == 1


def test_rsocket_resume_stored_session_without_engine_is_answered_rejected_resume() -> None:
    """The registry and the store agree under one lock, so the core never
    hands a RESUME to a session without an engine; forced into that state,
    the server still answers ERROR[REJECTED_RESUME] (never silence)."""
    with sync_pair("thread", ResumeOptions(), ResumeOptions(reconnect_initial=0.01)) as (
        server,
        proxy,
        client,
        _,
    ):
        stream = client.request_stream(b"1000000", prefetch=8, timeout=WAIT)
        assert next(stream).data == item(b"s", 0)
        with server.registry.lock:
            server.registry._sessions.clear()  # the impossible state
        proxy.inject(Fault.RESET)
        with pytest.raises(ConnectionClosed, match="REJECTED_RESUME"):
            for _ in stream:
                pass


def test_rsocket_resume_adopting_an_unknown_session_refuses_with_an_error_frame() -> None:
    opts = ResumeOptions()
    registry = resume_api.SessionRegistry(opts)
    engine = new_server_engine(EngineOptions(), opts, registry)
    registry.adopt(engine, object())
    assert engine.wants_close()
    out = engine.data_to_send()
    frame = decode_frame(out[3:])
    assert isinstance(frame, ErrorFrame)
    assert frame.stream_id == 0 and frame.error_code == ErrorCode.REJECTED_RESUME


class AbortRecorder:
    """A driver standing for another connection's thread: records abort()."""

    transport = None
    is_owner = False

    def __init__(self) -> None:
        self.aborted = 0

    def abort(self, timeout: float | None = 5.0) -> None:
        self.aborted += 1


def test_rsocket_resume_adopt_refuses_a_session_it_cannot_attach_and_counts_no_resume() -> None:
    """The core accepted a RESUME for a session still attached to another
    connection (first_frame never lets that happen): ``adopt`` sees
    ``attach()`` refuse, answers ERROR[REJECTED_RESUME], counts no resume,
    and dooms the session (its driver is reset; it ends as that lets go)
    rather than leave two connections believing they hold it."""
    opts = ResumeOptions()
    registry = resume_api.SessionRegistry(opts)
    held = new_server_engine(EngineOptions(), opts, registry)
    other = AbortRecorder()
    session = held.session
    assert isinstance(session, Session)
    session.attach_first(held.link, cast(Any, other))  # ATTACHED to the other connection
    registry._sessions[held.conn] = session
    fresh = new_server_engine(EngineOptions(), opts, registry)
    fresh.drive_with(cast(Any, AbortRecorder()))
    registry.adopt(fresh, held.conn)
    assert fresh.adopted is None
    assert registry.stats.resumed == 0 and registry.stats.rejected == 1
    frame = decode_frame(fresh.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame) and frame.error_code == ErrorCode.REJECTED_RESUME
    assert fresh.wants_close()
    assert session.doomed is not None and other.aborted == 1
    assert session.phase.value == "attached" and session.driver is other


def test_rsocket_resume_limits_are_public_options_and_tokens_never_shown() -> None:
    opts = ResumeOptions(max_sessions=3, resume_buffer_size=1 << 16, keep_detached=5.0)
    registry = resume_api.SessionRegistry(opts)
    assert registry.store.max_sessions == 3 and registry.store.keep_detached == 5.0
    with pytest.raises(ValueError):
        ResumeOptions(max_sessions=0)
    with resume_api.serve_resumable("tcp://127.0.0.1:0", resume=opts) as server:
        client = resume_api.connect_resumable(server.url, resume=opts)
        token = client.session.engine.conn.resume_token
        assert token is not None
        registry = server.registry
        shown = [repr(client.session), repr(registry.snapshot()), repr(registry.store)]
        assert not any(token.hex() in s or repr(token) in s for s in shown)
        assert client.session.engine.conn.config.resume_buffer_size == 1 << 16
        client.close()


def test_rsocket_resume_over_unix_sockets(tmp_path: Any) -> None:
    url = f"unix://{tmp_path}/resume.sock"
    handler = ChaosHandler(Sizes(), Progress())
    with resume_api.serve_resumable(url, handler) as server:
        client = resume_api.connect_resumable(server.url)
        assert client.request_response(b"q1", timeout=WAIT) is not None
        client.close()


class Answering:
    def request_response(self, request: Any) -> bytes:
        return b"client says " + request.data


def test_rsocket_resume_server_initiated_calls_wait_for_the_resume() -> None:
    """A server's peer of a detached session stays in ``server.peers`` and
    its calls wait for the RESUME (a pause, not an error), then go out once."""
    steps = Steps()
    handler = ChaosHandler(Sizes(), Progress())
    opts = ResumeOptions(on_step=steps)
    with (
        resume_api.serve_resumable("tcp://127.0.0.1:0", handler, resume=opts) as server,
        ChaosProxy(("127.0.0.1", server.endpoint.port)) as proxy,
    ):
        client = resume_api.connect_resumable(
            proxy.url, handler=Answering(), resume=ResumeOptions(reconnect_initial=0.01)
        )
        assert client.request_response(b"q", timeout=WAIT) is not None
        (peer,) = server.peers
        proxy.gate()
        proxy.inject(Fault.RESET)
        assert steps.wait("detached")
        assert server.peers == [peer]  # detached, not gone
        answers: list[Any] = []
        asking = threading.Thread(
            target=lambda: answers.append(peer.request_response(b"hi", timeout=WAIT))
        )
        asking.start()
        proxy.release()
        asking.join(WAIT)
        assert [a.data for a in answers] == [b"client says hi"]
        client.close()

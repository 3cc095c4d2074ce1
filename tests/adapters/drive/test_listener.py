"""The listener every driver runs (``drive/listener.py``): it forgets a
connection as soon as it ends, so nothing the connection held (its engine,
the application's handler and what that keeps) outlives it; and under
descriptor pressure it sheds the oldest connections still in their
handshake, so a flood of connections that never finish their opening cannot
lock good clients out (``LoopConfig.shed_batch``, docs/security.md)."""

from __future__ import annotations

import errno
import gc
import logging
import socket
import threading
import weakref
from typing import Any

import pytest
from sansrs.adapters import rsocket
from sansrs.adapters.drive import LoopConfig
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.transport.urls import parse_url

from tests.adapters.drive.servers import DRIVERS, WAIT, acceptor, loop_turned, serving


def echo(client: rsocket.Client, data: bytes = b"ok") -> None:
    assert client.request_response(data, timeout=WAIT) == rsocket.Payload(data)


PUSH = 1024 * 1024


def _demo_handlers(old: weakref.WeakSet[DemoHandler]) -> int:
    """How many DemoHandlers are alive, but those in ``old`` (counted, not held)."""
    return sum(type(o) is DemoHandler and o not in old for o in gc.get_objects())


def _handlers_left(old: weakref.WeakSet[DemoHandler], deadline: float = WAIT) -> int:
    """The DemoHandlers made since ``old`` still alive once the server has
    let them go (a connection's exit runs on its own thread: collect until
    none is left or ``deadline``)."""
    waited = threading.Event()
    for _ in range(int(deadline / 0.05)):
        gc.collect()
        left = _demo_handlers(old)
        if not left:
            return 0
        waited.wait(0.05)
    return left


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.timeout(60)
def test_listener_forgets_a_connection_when_it_ends_so_its_handler_goes(driver: str) -> None:
    """Finding: ended connections kept their handler until the listener's
    set reached 64: a handler that keeps the last METADATA_PUSH (the demo's)
    held it after the client had gone."""
    # Those of earlier tests (their connections may still be ending) aside.
    old = weakref.WeakSet(o for o in gc.get_objects() if type(o) is DemoHandler)
    with serving(driver, "rsocket", LoopConfig()) as running:
        for i in range(5):
            raw = {"metadata_mime_type": "application/octet-stream"}  # raw pushes
            with rsocket.connect(running.url, **raw) as client:
                client.metadata_push(bytes([i]) * PUSH)
                assert client.request_response(b"ok", timeout=WAIT).data == b"ok"
        assert _handlers_left(old) == 0
        assert not acceptor(running).connections


class DescriptorBudget:
    """Wraps a server's listener: ``accept`` fails with EMFILE while the
    server holds ``budget`` connections, as a process out of descriptors
    (whether a connection waits or not: the kernel looks for a free
    descriptor first)."""

    def __init__(self, running: Any, budget: int) -> None:
        self.running = running
        self.server = acceptor(running)
        self.budget = budget
        self.failed = 0
        self._cond = threading.Condition()
        listener = self.server.listener
        self.real_accept = listener.accept
        listener.accept = self.accept  # type: ignore[method-assign]

    def accept(self) -> Any:
        if len(self.server.connections) >= self.budget:
            with self._cond:
                self.failed += 1
                self._cond.notify_all()
            raise OSError(errno.EMFILE, "Too many open files")
        return self.real_accept()

    def wait_failed(self, n: int = 1) -> bool:
        """Wait until ``accept`` failed ``n`` times, then until the server's
        loop has finished the turn that saw it (one call through it)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.failed >= n, WAIT):
                return False
        return loop_turned(self.running)


def _silent(url: str, n: int) -> list[socket.socket]:
    """``n`` connections that never send the protocol's opening."""
    port = parse_url(url).port
    return [socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(n)]


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.timeout(60)
def test_out_of_descriptors_sheds_the_oldest_handshaking_connections_and_serves_a_good_client(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding: connections that never send SETUP held every descriptor
    until the handshake timeout, and a good client could not get in. Out of
    descriptors, the server aborts those still in their handshake and
    accepts again as soon as they are gone (long before ``accept_pause``)."""
    caplog.set_level(logging.WARNING, logger="sansrs.adapters")
    config = LoopConfig(accept_pause=60.0, log_interval=3600, handshake_timeout=60.0)
    with (
        serving(driver, "rsocket", config) as running,
        rsocket.connect(running.url) as established,
    ):
        echo(established)  # handshaken: never shed
        budget = DescriptorBudget(running, 5)
        silent = _silent(running.url, 4)
        try:
            with rsocket.connect(running.url) as good:
                echo(good)  # served: without shedding, not for 60 s
            assert all(_closed_by_server(s) for s in silent)
            assert acceptor(running).shed == 4 and budget.failed >= 1
            echo(established)
        finally:
            for sock in silent:
                sock.close()
    shedding = [r for r in caplog.records if "shedding" in r.getMessage()]
    assert len(shedding) == 1, [r.getMessage() for r in shedding]
    assert "out of resources (Too many open files)" in shedding[0].getMessage()


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.timeout(60)
def test_out_of_descriptors_sheds_nothing_until_a_client_waits(driver: str) -> None:
    """The accept that takes the last descriptor is followed by one more in
    the same batch, and that one fails with EMFILE although nobody waits
    (the kernel looks for a descriptor first). Finding: the server shed
    every connection in its handshake then, for nobody, and a client it had
    just accepted could see its ``connect`` fail with a reset (the flaky
    ``ConnectionResetError`` of the test above). Now that failure sheds
    nothing; a client that comes then is what sheds them."""
    config = LoopConfig(accept_pause=60.0, log_interval=3600, handshake_timeout=60.0)
    with (
        serving(driver, "rsocket", config) as running,
        rsocket.connect(running.url) as established,
    ):
        echo(established)
        budget = DescriptorBudget(running, 5)
        silent = _silent(running.url, 4)
        try:
            assert budget.wait_failed()  # the 4th took the last descriptor; nobody waits
            assert acceptor(running).shed == 0
            assert len(acceptor(running).connections) == 5
            for sock in silent:  # still open: nothing to read, no reset
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):
                    sock.recv(1)
                sock.settimeout(WAIT)
            with rsocket.connect(running.url) as good:
                echo(good)  # it waits: now the four are shed for it
            assert acceptor(running).shed == 4
            assert all(_closed_by_server(s) for s in silent)
        finally:
            for sock in silent:
                sock.close()


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.timeout(60)
def test_at_max_connections_the_oldest_handshaking_connection_makes_room(driver: str) -> None:
    config = LoopConfig(max_connections=4, handshake_timeout=60.0)
    with serving(driver, "rsocket", config) as running:
        silent = _silent(running.url, 4)
        try:
            with rsocket.connect(running.url) as good:
                echo(good)  # instead of refused
            assert _closed_by_server(silent[0])  # the oldest went
            assert acceptor(running).refused == 0 and acceptor(running).shed >= 1
            # More of them: each sheds an older one, and while one is being
            # shed nothing more is accepted (at most one over the limit).
            silent += _silent(running.url, 40)
            for _ in range(40):
                assert len(acceptor(running).connections) <= 5
        finally:
            for sock in silent:
                sock.close()


@pytest.mark.parametrize("driver", ["thread", "selector"])
def test_shed_batch_zero_never_sheds(driver: str) -> None:
    config = LoopConfig(max_connections=2, shed_batch=0, handshake_timeout=60.0)
    with serving(driver, "rsocket", config) as running:
        silent = _silent(running.url, 2)
        try:
            with (
                pytest.raises(ConnectionError),
                rsocket.connect(running.url, connect_timeout=WAIT) as late,
            ):
                echo(late)  # refused: the two silent ones keep their places
            assert acceptor(running).shed == 0
        finally:
            for sock in silent:
                sock.close()


def test_shed_batch_is_validated() -> None:
    with pytest.raises(ValueError, match="shed_batch"):
        LoopConfig(shed_batch=-1)

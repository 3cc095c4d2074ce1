"""In-process demo servers of RSocket and rsio under each driver (a thread
per connection, a selector loop, asyncio), with a given ``LoopConfig``: what
the driver tests share."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from sansrs.adapters import rsio, rsocket
from sansrs.adapters.drive import Loop, LoopConfig, LoopServer
from sansrs.adapters.rsio import aio as rsio_aio
from sansrs.adapters.rsio.demo import demo_publishers
from sansrs.adapters.rsocket import aio as rsocket_aio
from sansrs.adapters.rsocket.demo import DemoHandler

WAIT = 10.0
URL = "tcp://127.0.0.1:0"
DRIVERS = ["thread", "selector", "asyncio"]
T = TypeVar("T")


@contextlib.contextmanager
def event_loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-asyncio", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
        loop.close()


def on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(WAIT)


@contextlib.contextmanager
def serving(driver: str, protocol: str, config: LoopConfig) -> Iterator[Any]:
    """A server of ``protocol`` on ``driver`` with ``config``; yields it
    (``.url``; ``._accept`` is its :class:`LoopServer`)."""
    if driver == "asyncio":
        with event_loop_thread() as loop:

            async def start() -> Any:
                if protocol == "rsocket":
                    return await rsocket_aio.serve(
                        URL, handler_factory=DemoHandler, loop_config=config
                    )
                return await rsio_aio.serve(URL, demo_publishers, loop_config=config)

            running = on(loop, start())
            try:
                yield running
            finally:
                on(loop, running.close(WAIT))
        return
    selector = Loop(config, name="drive-tests").start() if driver == "selector" else None
    options: dict[str, Any] = {"loop": selector} if selector else {"loop_config": config}
    try:
        if protocol == "rsocket":
            with rsocket.serve(URL, handler_factory=DemoHandler, **options) as s:
                yield s
        else:
            with rsio.serve(URL, demo_publishers, **options) as s:
                yield s
    finally:
        if selector is not None:
            selector.stop(WAIT)


@contextlib.contextmanager
def server(driver: str, protocol: str, config: LoopConfig) -> Iterator[str]:
    """:func:`serving`, yielding the server's URL."""
    with serving(driver, protocol, config) as s:
        yield s.url


def acceptor(running: Any) -> LoopServer:
    """The :class:`LoopServer` of a server :func:`serving` yields."""
    accept = running._accept
    assert isinstance(accept, LoopServer)
    return accept


def loop_turned(running: Any) -> bool:
    """Wait until the server's accepting loop has finished its current turn
    (one call through it): an accept batch under way has ended, so a test
    wrapping the listener's ``accept`` sees only the calls that follow."""
    turned = threading.Event()
    acceptor(running).loop.call_soon(turned.set)
    return turned.wait(WAIT)

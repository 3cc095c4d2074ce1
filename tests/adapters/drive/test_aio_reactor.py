"""``AsyncioReactor.wait_until``: a future done after a turn of the
connection once its condition holds (checked after each of its turns, not
before), or when the connection ends; a cancelled wait is dropped. Turns
are stepped on the loop by hand (a stand-in connection)."""

from __future__ import annotations

import asyncio

import pytest
from sansrs.adapters.drive.aio import AsyncioReactor


class Turns:
    """A stand-in connection: each turn counts one."""

    def __init__(self) -> None:
        self.scheduled = False
        self.woken = False
        self.timer: float | None = None
        self.turns = 0

    def on_io(self, mask: int, now: float) -> None:
        pass

    def needs_turn(self) -> bool:
        return False

    def service(self, now: float) -> None:
        self.turns += 1

    def kill(self, error: BaseException) -> None:
        pass


async def _turn(reactor: AsyncioReactor, conn: Turns) -> None:
    """One turn of ``conn``, and the callbacks it leads to."""
    before = conn.turns
    reactor.service_soon(conn)
    while conn.turns == before:
        await asyncio.sleep(0)
    await asyncio.sleep(0)


@pytest.mark.timeout(10)
def test_asyncio_reactor_wait_until_done_after_the_turn_that_makes_it_true() -> None:
    async def main() -> None:
        reactor = AsyncioReactor(asyncio.get_running_loop())
        conn = Turns()
        ready = reactor.wait_until(conn, lambda: conn.turns >= 2)
        await _turn(reactor, conn)
        assert not ready.done()
        await _turn(reactor, conn)
        assert ready.done()
        # Another connection's turns do not settle this one's waits.
        other = Turns()
        waiting = reactor.wait_until(conn, lambda: other.turns >= 1)
        await _turn(reactor, other)
        assert not waiting.done()
        await _turn(reactor, conn)
        assert waiting.done()

    asyncio.run(asyncio.wait_for(main(), 5))


@pytest.mark.timeout(10)
def test_asyncio_reactor_wait_until_ends_with_the_connection_and_drops_a_cancelled_wait() -> None:
    async def main() -> None:
        reactor = AsyncioReactor(asyncio.get_running_loop())
        conn = Turns()
        never = reactor.wait_until(conn, lambda: False)
        cancelled = reactor.wait_until(conn, lambda: True)
        cancelled.cancel()
        await _turn(reactor, conn)  # the cancelled one is dropped, not set
        assert cancelled.cancelled() and not never.done()
        reactor.discard(conn)
        assert never.done()
        await _turn(reactor, conn)  # nothing left to settle

    asyncio.run(asyncio.wait_for(main(), 5))

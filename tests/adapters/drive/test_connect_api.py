"""The shape of every ``connect`` and ``serve``: under asyncio each returns
an awaitable async context manager (``async with connect(url)``, as
websockets and httpx users type it; ``await connect(url)`` and ``async with
await connect(url)`` still work), and a keyword no public parameter takes is
a TypeError naming the public function and what was meant, never an
internal options class."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sansrs.adapters import ditto, rsio, rsocket
from sansrs.adapters.ditto import aio as ditto_aio
from sansrs.adapters.rsio import aio as rsio_aio
from sansrs.adapters.rsocket import aio as rsocket_aio
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.resume import aio as resume_aio

from sansrs.streams import from_iterable

WAIT = 10.0
HISTORY = Path(__file__).parents[3] / "examples" / "ditto_history.jsonl"


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 30))


def test_connect_aio_rsocket_every_form() -> None:
    async def main() -> None:
        async with rsocket_aio.serve("tcp://127.0.0.1:0", DemoHandler()) as server:
            async with rsocket_aio.connect(server.url) as client:
                assert (await client.request_response(b"a", timeout=WAIT)).data == b"a"
            async with await rsocket_aio.connect(server.url) as client:
                assert (await client.request_response(b"b", timeout=WAIT)).data == b"b"
            client = await rsocket_aio.connect(server.url)
            try:
                assert (await client.request_response(b"c", timeout=WAIT)).data == b"c"
            finally:
                await client.close()
        server = await rsocket_aio.serve("tcp://127.0.0.1:0", DemoHandler())
        await server.close()

    run(main)


def test_connect_aio_resumable_every_form() -> None:
    async def main() -> None:
        async with resume_aio.serve_resumable("tcp://127.0.0.1:0", DemoHandler()) as server:
            url = f"tcp://127.0.0.1:{server.endpoint.port}"
            async with resume_aio.connect_resumable(url) as client:
                assert (await client.request_response(b"a", timeout=WAIT)).data == b"a"
            async with await resume_aio.connect_resumable(url) as client:
                assert (await client.request_response(b"b", timeout=WAIT)).data == b"b"
            client = await resume_aio.connect_resumable(url)
            try:
                assert (await client.request_response(b"c", timeout=WAIT)).data == b"c"
            finally:
                await client.close()

    run(main)


@pytest.mark.parametrize(
    "connect",
    [rsocket.connect_resumable, resume_aio.connect_resumable],
    ids=["threads", "asyncio"],
)
def test_connect_resumable_wrong_keyword_names_connect_resumable(
    connect: Callable[..., Any],
) -> None:
    async def enter() -> None:
        async with connect("tcp://127.0.0.1:1", timeout=5):
            pass

    with pytest.raises(TypeError) as info:
        if connect is resume_aio.connect_resumable:
            run(enter)
        else:
            connect("tcp://127.0.0.1:1", timeout=5)
    message = str(info.value)
    assert message.startswith("connect_resumable() got an") and "connect_timeout" in message
    assert "Options" not in message  # no internal class named


def test_connect_aio_rsio_every_form() -> None:
    async def main() -> None:
        publishers = {"g": from_iterable([b"x", b"y"])}
        async with rsio_aio.serve("tcp://127.0.0.1:0", publishers) as server:
            async with rsio_aio.connect(server.url) as client:
                assert [e async for e in client.subscribe("g", timeout=WAIT)] == [b"x", b"y"]
            async with await rsio_aio.connect(server.url) as client:
                assert [e async for e in client.subscribe("g", timeout=WAIT)] == [b"x", b"y"]

    run(main)


def test_connect_aio_ditto_every_form() -> None:
    async def main() -> None:
        history = ditto.JsonLinesHistory(HISTORY)
        async with ditto_aio.serve("ws://127.0.0.1:0/ws/2", history) as server:
            async with ditto_aio.connect(server.url) as conn:
                events = conn.subscribe_for_persisted_events(
                    "org.eclipse.ditto:thing-1", timeout=WAIT
                )
                assert len([e async for e in events]) > 0
            conn = await ditto_aio.connect(server.url)
            await conn.close()

    run(main)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_connect_aio_is_opened_once_and_only_when_awaited() -> None:
    async def main() -> None:
        async with rsocket_aio.serve("tcp://127.0.0.1:0", DemoHandler()) as server:
            # never awaited: no coroutine left un-awaited (a RuntimeWarning, an error here)
            pending = rsocket_aio.connect(server.url)
            del pending
            connecting = rsocket_aio.connect(server.url)
            first = await connecting
            assert await connecting is first  # awaiting again: the same connection
            await first.close()

    run(main)


TIMEOUT = "unexpected keyword argument 'timeout'; the connect's own bound is connect_timeout="


@pytest.mark.parametrize(
    "connect",
    [rsocket.connect, rsocket_aio.connect, ditto.connect, ditto_aio.connect],
    ids=["rsocket", "rsocket.aio", "ditto", "ditto.aio"],
)
def test_connect_timeout_keyword_names_connect_timeout(connect: Callable[..., Any]) -> None:
    """Raised by the call (threads) or where it is awaited or entered (asyncio)."""
    url = "ws://127.0.0.1:1/ws/2" if "ditto" in connect.__module__ else "tcp://127.0.0.1:1"

    async def enter() -> None:
        async with connect(url, timeout=5):
            pass

    with pytest.raises(TypeError) as info:
        if connect.__module__.endswith(".aio"):
            run(enter)
        else:
            connect(url, timeout=5)
    message = str(info.value)
    assert message.startswith("connect() got an") and TIMEOUT in message
    assert "Options" not in message  # no internal class named


def test_connect_misspelt_keyword_suggests_the_public_parameter() -> None:
    with pytest.raises(TypeError, match=r"connect\(\) .* 'keepalive'; did you mean keepalive_in"):
        rsocket.connect("tcp://127.0.0.1:1", keepalive=5)
    with pytest.raises(TypeError, match=r"serve\(\) .* 'lease_tll'; did you mean lease_ttl="):
        rsocket.serve("tcp://127.0.0.1:0", DemoHandler(), lease_tll=5)
    with pytest.raises(TypeError, match=r"did you mean max_message_size="):
        ditto.connect("ws://127.0.0.1:1/ws/2", max_message=5)


def test_connect_unknown_keyword_lists_what_it_takes() -> None:
    async def start() -> None:
        await rsocket_aio.serve("tcp://127.0.0.1:0", DemoHandler(), zzz=1)

    with pytest.raises(TypeError) as info:
        run(start)
    message = str(info.value)
    assert message.startswith("serve() got an unexpected keyword argument 'zzz'; it takes url,")
    assert "keepalive_interval" in message and "handler_factory" in message


def test_rsio_connect_timeout_keyword_is_python_own_error() -> None:
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'timeout'"):
        rsio.connect("tcp://127.0.0.1:1", timeout=5)  # type: ignore[call-arg]


def test_connect_aio_binds_its_arguments_at_the_call() -> None:
    """A keyword the signature does not have fails at the call, not later."""
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'timeout'"):
        rsio_aio.connect("tcp://127.0.0.1:1", timeout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'prefetch'"):
        rsio_aio.serve("tcp://127.0.0.1:0", {}, prefetch=5)  # type: ignore[call-arg]

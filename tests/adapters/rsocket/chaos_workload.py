"""Workloads for resumption under chaos: a stream, a channel both ways,
request-responses and fire-and-forgets at once, with what exactly once and
in order means for each, a progress watchdog, and a log capture that finds
resume tokens. Shared by the chaos tests and ``benchmarks/bench_resume.py``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from sansrs.adapters.rsocket.types import Payload, Request

#: No item moved for this long while work remains: the run hung.
WATCHDOG = 20.0


@dataclass(frozen=True, kw_only=True)
class Sizes:
    stream: int = 12_000
    channel: int = 2_000
    requests: int = 400
    fnf: int = 2_000

    @property
    def total(self) -> int:
        return self.stream + 2 * self.channel + self.requests + self.fnf


def item(prefix: bytes, i: int) -> bytes:
    return b"%s%d" % (prefix, i)


class ChaosHandler:
    """The server side: what it received, to check exactly once, in order."""

    def __init__(self, sizes: Sizes, progress: Progress) -> None:
        self.sizes = sizes
        self.progress = progress
        self.lock = threading.Lock()
        self.channel_in: list[bytes] = []
        self.fnf: list[bytes] = []
        self.answered: dict[bytes, int] = {}

    def request_stream(self, request: Request) -> Iterator[bytes]:
        return (item(b"s", i) for i in range(int(request.data)))

    def request_response(self, request: Request) -> bytes:
        with self.lock:
            self.answered[request.data] = self.answered.get(request.data, 0) + 1
        return b"re:" + request.data

    def fire_and_forget(self, request: Request) -> None:
        with self.lock:
            self.fnf.append(request.data)
        self.progress.tick()

    def request_channel(self, request: Request, inbound: Iterator[Payload]) -> Iterator[bytes]:
        def items() -> Iterator[bytes]:
            with self.lock:
                self.channel_in.append(request.data)
            for i in range(self.sizes.channel):
                yield item(b"d", i)
            for p in inbound:
                with self.lock:
                    self.channel_in.append(p.data)
                self.progress.tick()

        return items()

    def check(self) -> None:
        """Exactly once, in order, on the server's side."""
        sizes = self.sizes
        with self.lock:
            assert self.fnf == [item(b"f", i) for i in range(sizes.fnf)], _diff(
                self.fnf, sizes.fnf, b"f"
            )
            assert self.channel_in == [item(b"u", i) for i in range(sizes.channel)], _diff(
                self.channel_in, sizes.channel, b"u"
            )
            answered = {k: v for k, v in self.answered.items() if k.startswith(b"q")}
            assert answered == {item(b"q", i): 1 for i in range(sizes.requests)}


def _diff(got: list[bytes], n: int, prefix: bytes) -> str:
    want = [item(prefix, i) for i in range(n)]
    first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    return f"{len(got)} items of {n}; first difference at {first}"


class Progress:
    """Counts items moved (any direction) and changes (a worker ending is
    one); the watchdog waits for the next change."""

    def __init__(self) -> None:
        self.count = 0
        self.version = 0
        self.last = time.monotonic()
        self._cond = threading.Condition()

    def tick(self, n: int = 1) -> None:
        with self._cond:
            self.count += n
            self.version += 1
            self.last = time.monotonic()
            self._cond.notify_all()

    def wait_change(self, version: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.version != version, timeout)

    def stalled_for(self) -> float:
        return time.monotonic() - self.last


@dataclass
class Results:
    stream: list[bytes] = field(default_factory=list)
    channel: list[bytes] = field(default_factory=list)
    answers: list[bytes] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def check(self, sizes: Sizes) -> None:
        assert self.errors == []
        assert self.stream == [item(b"s", i) for i in range(sizes.stream)], _diff(
            self.stream, sizes.stream, b"s"
        )
        assert self.channel == [item(b"d", i) for i in range(sizes.channel)], _diff(
            self.channel, sizes.channel, b"d"
        )
        assert self.answers == [b"re:" + item(b"q", i) for i in range(sizes.requests)]


# -- synchronous clients (thread and selector drivers) -----------------------


def run_sync(
    client: Any, handler: ChaosHandler, sizes: Sizes, progress: Progress, timeout: float
) -> Results:
    """Every workload at once on ``client``; fails (aborting the client) if
    nothing moves for ``WATCHDOG`` seconds."""
    out = Results()

    def guarded(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by Results.check
                out.errors.append(exc)
            finally:
                progress.tick(0)  # a change: the watchdog looks again

        return run

    def stream() -> None:
        for p in client.request_stream(str(sizes.stream), prefetch=512, timeout=timeout):
            out.stream.append(p.data)
            progress.tick()

    def channel() -> None:
        up = (item(b"u", i) for i in range(sizes.channel))
        for p in client.request_channel(up, prefetch=256, timeout=timeout):
            out.channel.append(p.data)
            progress.tick()

    def requests() -> None:
        asks = (item(b"q", i) for i in range(sizes.requests))
        for answer in client.request_response_many(asks, in_flight=16, timeout=timeout):
            out.answers.append(answer.data)
            progress.tick()

    def fnf() -> None:
        for i in range(sizes.fnf):
            client.fire_and_forget(item(b"f", i), timeout=timeout)

    workers = [
        threading.Thread(target=guarded(fn), name=f"chaos-{fn.__name__}", daemon=True)
        for fn in (stream, channel, requests, fnf)
    ]
    for w in workers:
        w.start()
    done = lambda: not any(w.is_alive() for w in workers) and len(handler.fnf) >= sizes.fnf  # noqa: E731
    watch(done, progress, lambda: client.abort(timeout=1.0))
    for w in workers:
        w.join(timeout)
    return out


def watch(done: Any, progress: Progress, on_hang: Any) -> None:
    """Wait, change by change, until ``done()``; no change for ``WATCHDOG``
    seconds aborts (``on_hang``) and fails."""
    while True:
        version = progress.version
        if done():
            return
        if not progress.wait_change(version, WATCHDOG) and not done():
            on_hang()
            raise AssertionError(f"no progress for {WATCHDOG:g} s (hung; {progress.count} moved)")


# -- asyncio ------------------------------------------------------------------


async def run_async(
    client: Any, handler: ChaosHandler, sizes: Sizes, progress: Progress, timeout: float
) -> Results:
    out = Results()

    async def stream() -> None:
        async for p in client.request_stream(str(sizes.stream), prefetch=512, timeout=timeout):
            out.stream.append(p.data)
            progress.tick()

    async def up() -> AsyncIterator[bytes]:
        for i in range(sizes.channel):
            yield item(b"u", i)

    async def channel() -> None:
        async for p in client.request_channel(up(), prefetch=256, timeout=timeout):
            out.channel.append(p.data)
            progress.tick()

    async def requests() -> None:
        sem = asyncio.Semaphore(16)
        answers: dict[int, bytes] = {}

        async def ask(i: int) -> None:
            async with sem:
                answer = await client.request_response(item(b"q", i), timeout=timeout)
            answers[i] = answer.data
            progress.tick()

        await asyncio.gather(*(ask(i) for i in range(sizes.requests)))
        out.answers.extend(answers[i] for i in range(sizes.requests))

    async def fnf() -> None:
        for i in range(sizes.fnf):
            await client.fire_and_forget(item(b"f", i))
            if i % 64 == 0:
                await asyncio.sleep(0)  # let the loop write

    async def guarded(coro: Any) -> None:
        try:
            await coro
        except Exception as exc:
            out.errors.append(exc)

    tasks = [asyncio.ensure_future(guarded(c())) for c in (stream, channel, requests, fnf)]
    while not (all(t.done() for t in tasks) and len(handler.fnf) >= sizes.fnf):
        await asyncio.wait(tasks, timeout=0.25)
        if progress.stalled_for() > WATCHDOG:
            client.abort()
            for t in tasks:
                t.cancel()
            raise AssertionError(f"no progress for {WATCHDOG:g} s (hung; {progress.count} moved)")
    return out


# -- logs ---------------------------------------------------------------------


class LogCapture(logging.Handler):
    """Every record of every logger, formatted (exception text included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextlib.contextmanager
def capture_logs() -> Iterator[LogCapture]:
    root = logging.getLogger()
    capture = LogCapture()
    level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        root.setLevel(level)


def token_forms(token: bytes) -> list[str]:
    """How a token could show up in a log line."""
    return [token.hex(), repr(token), token.decode("latin-1"), str(list(token))]

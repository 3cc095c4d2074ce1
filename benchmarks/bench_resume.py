"""Resumption under faults: cuts survived, items exactly once, and the time to
resume per fault kind (the figures of docs/resumption.md).

Workload, per transport, fault kind and driver: a resumable client (through
the seeded chaos proxy of ``tests/adapters/rsocket/chaos.py``) reads one long stream
(16-byte-ish items, prefetch 256) while it sends fire-and-forgets; the proxy
injects that kind of fault every 20-40 KB forwarded, ``--faults`` times.
At the end every stream item and every fire-and-forget must have arrived
exactly once, in order (the run fails otherwise).

Times, from the proxy's record of each fault and the client's callbacks
(``on_disconnected``, ``on_resumed``): *fault -> resumed* (what the
application sees as a pause: detection + reconnect + RESUME/RESUME_OK) and
*detected -> resumed* (reconnect + RESUME/RESUME_OK only). Detection depends
on the kind: a reset or FIN is seen at once, a silent (half-open) side only
after ``max_lifetime`` without a frame, a RESUME into the void after
``resume_timeout``. Settings: keepalive 0.1 s, max lifetime 0.5 s, resume
timeout 0.5 s, connect timeout 0.5 s, reconnect backoff from 10 ms. Stalls
and trickles cut nothing: their rows show 0 cuts (a stall longer than the
max lifetime would).

Transports (``--transport``): ``tcp``; ``ws`` (RSocket over WebSocket, one
frame per message; every reconnection is a new TCP connection and HTTP
upgrade; the proxy follows the framing, so two more kinds cut inside a
message and right after one: ``mid-message``, ``after-message``); ``wss``
(the same over TLS with a throwaway test CA: a TLS handshake too; the proxy
sees only TLS records, so the byte-level kinds). A RESUME into the void
over WebSocket is a TCP connection whose upgrade is never answered: it
costs the connect timeout, over TCP the resume timeout (both 0.5 s here).

p50 / p99 are over every fault of a kind in a run; the table shows the
median of ``--runs`` runs.

Usage: python benchmarks/bench_resume.py [--faults 40] [--runs 3]
       [--loop thread|selector|asyncio|all] [--transport tcp|ws|wss|all]
       [--seed 1] [--kinds reset,stall,...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import ssl
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the chaos proxy and workload live with the tests

from sansrs.adapters.drive.selector import Loop  # noqa: E402
from sansrs.adapters.rsocket.resume import (  # noqa: E402
    ResumeOptions,
    connect_resumable,
    serve_resumable,
)
from sansrs.adapters.rsocket.resume import aio as resume_aio  # noqa: E402

from tests.adapters.rsocket.chaos import (  # noqa: E402
    CUTTING,
    ChaosProxy,
    Fault,
    kinds_for,
)
from tests.adapters.rsocket.chaos_workload import ChaosHandler, Progress, Sizes, item  # noqa: E402

SETUP = {"keepalive_interval": 0.1, "max_lifetime": 0.5}
CONNECT_TIMEOUT = 0.5
TRANSPORTS = ("tcp", "ws", "wss")
PATH = "/rsocket"
EVERY = (20_000, 40_000)
#: Items a fault's worth of bytes carries, roughly (sizes the stream).
ITEMS_PER_FAULT = 2_500
FNF_PER_FAULT = 50


@dataclass
class Timeline:
    disconnects: list[float] = field(default_factory=list)
    resumes: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def disconnected(self, _: str) -> None:
        with self.lock:
            self.disconnects.append(time.monotonic())

    def resumed(self, _: float) -> None:
        with self.lock:
            self.resumes.append(time.monotonic())


@dataclass
class Outcome:
    kind: Fault
    cuts: int
    resumes: int
    items: int
    fault_to_resumed: list[float]
    detected_to_resumed: list[float]


@dataclass(frozen=True)
class Transport:
    """Where the server listens and how a client reaches it through the proxy."""

    name: str
    server_ssl: ssl.SSLContext | None = None
    client_ssl: ssl.SSLContext | None = None

    @classmethod
    def of(cls, name: str) -> Transport:
        if name != "wss":
            return cls(name)
        from tests.adapters.transport.tls_certs import certs  # trustme: a test dependency

        c = certs()
        return cls(name, c.server_context(), c.client_context())

    @property
    def websocket(self) -> bool:
        """The proxy can follow the WebSocket framing (not inside TLS)."""
        return self.name == "ws"

    def url(self, port: int) -> str:
        if self.name == "tcp":
            return f"tcp://127.0.0.1:{port}"
        return f"{self.name}://127.0.0.1:{port}{PATH}"

    def server_kw(self) -> dict[str, Any]:
        return {} if self.server_ssl is None else {"ssl_context": self.server_ssl}

    def client_kw(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT, **SETUP}
        if self.client_ssl is not None:
            kw["ssl_context"] = self.client_ssl
        return kw


def client_options(timeline: Timeline, rng: random.Random) -> ResumeOptions:
    return ResumeOptions(
        reconnect_initial=0.01,
        reconnect_max=0.1,
        reconnect_timeout=30.0,
        resume_timeout=0.5,
        rng=rng,
        on_disconnected=timeline.disconnected,
        on_resumed=timeline.resumed,
    )


def first_after(times: list[float], t: float) -> float | None:
    return next((x for x in times if x >= t), None)


def measure(kind: Fault, proxy: ChaosProxy, timeline: Timeline, items: int) -> Outcome:
    pauses, resumes_only = [], []
    for record in proxy.faults:
        resumed = first_after(timeline.resumes, record.at)
        detected = first_after(timeline.disconnects, record.at)
        if kind in CUTTING and resumed is not None:
            pauses.append(resumed - record.at)
            if detected is not None and detected <= resumed:
                resumes_only.append(resumed - detected)
    return Outcome(kind, proxy.cuts(), len(timeline.resumes), items, pauses, resumes_only)


def run_sync(kind: Fault, faults: int, loop: str, seed: int, transport: Transport) -> Outcome:
    rng = random.Random(seed)
    sizes = Sizes(
        stream=faults * ITEMS_PER_FAULT, channel=0, requests=0, fnf=faults * FNF_PER_FAULT
    )
    handler = ChaosHandler(sizes, Progress())
    timeline = Timeline()
    loops = [Loop(name="bench-server").start(), Loop(name="bench-client").start()]
    server_loop: Any = loops[0] if loop == "selector" else "thread"
    client_loop: Any = loops[1] if loop == "selector" else "thread"
    server = serve_resumable(
        transport.url(0), handler, loop=server_loop, **transport.server_kw()
    )
    try:
        with _proxy(server.endpoint.port, rng, transport) as proxy:
            client = connect_resumable(
                transport.url(proxy.port),
                loop=client_loop,
                resume=client_options(timeline, rng),
                **transport.client_kw(),
            )
            proxy.schedule([kind], every=EVERY, limit=faults)
            fnf_done = threading.Event()

            def fire() -> None:
                for i in range(sizes.fnf):
                    client.fire_and_forget(item(b"f", i), timeout=60)
                fnf_done.set()

            threading.Thread(target=fire, daemon=True).start()
            got = [p.data for p in client.request_stream(str(sizes.stream), timeout=60)]
            assert fnf_done.wait(60)
            proxy.stop_faults()
            assert client.request_response(b"last", timeout=60) is not None
            client.close()
            check(sizes, got, handler)
            return measure(kind, proxy, timeline, len(got) + len(handler.fnf))
    finally:
        server.close()
        for each in loops:
            each.stop(5.0)


def _proxy(port: int, rng: random.Random, transport: Transport) -> ChaosProxy:
    return ChaosProxy(("127.0.0.1", port), rng=rng, websocket=transport.websocket)


def run_asyncio(kind: Fault, faults: int, seed: int, transport: Transport) -> Outcome:
    rng = random.Random(seed)
    sizes = Sizes(
        stream=faults * ITEMS_PER_FAULT, channel=0, requests=0, fnf=faults * FNF_PER_FAULT
    )
    handler = ChaosHandler(sizes, Progress())
    timeline = Timeline()

    async def main() -> Outcome:
        server = await resume_aio.serve_resumable(
            transport.url(0), handler, **transport.server_kw()
        )
        try:
            with _proxy(server.endpoint.port, rng, transport) as proxy:
                client = await resume_aio.connect_resumable(
                    transport.url(proxy.port),
                    resume=client_options(timeline, rng),
                    **transport.client_kw(),
                )
                proxy.schedule([kind], every=EVERY, limit=faults)

                async def fire() -> None:
                    for i in range(sizes.fnf):
                        await client.fire_and_forget(item(b"f", i))
                        if i % 16 == 0:
                            await asyncio.sleep(0.001)  # spread over the stream

                sender = asyncio.ensure_future(fire())
                got = [p.data async for p in client.request_stream(str(sizes.stream), timeout=60)]
                await sender
                proxy.stop_faults()
                assert await client.request_response(b"last", timeout=60) is not None
                await client.close()
                check(sizes, got, handler)
                return measure(kind, proxy, timeline, len(got) + len(handler.fnf))
        finally:
            await server.close()

    return asyncio.run(main())


def check(sizes: Sizes, got: list[bytes], handler: ChaosHandler) -> None:
    if got != [item(b"s", i) for i in range(sizes.stream)]:
        raise SystemExit("stream items lost, repeated or out of order")
    if handler.fnf != [item(b"f", i) for i in range(sizes.fnf)]:
        raise SystemExit("fire-and-forgets lost, repeated or out of order")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(transport: str, loop: str, kind: Fault, runs: list[Outcome]) -> str:
    """One table row: medians over the runs."""

    def med(fn: Any) -> float:
        return statistics.median(fn(o) for o in runs)

    def ms(values_of: Any) -> str:
        cells = []
        for q in (0.5, 0.99):
            value = med(lambda o, q=q: percentile(values_of(o), q))
            cells.append("-" if value != value else f"{value * 1000:.1f}")
        return " / ".join(cells)

    return (
        f"| {transport} | {loop} | {kind.value} | {med(lambda o: o.cuts):.0f} | "
        f"{med(lambda o: o.resumes):.0f} | {med(lambda o: o.items):.0f} | "
        f"{ms(lambda o: o.fault_to_resumed)} | {ms(lambda o: o.detected_to_resumed)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--loop", default="thread", choices=["thread", "selector", "asyncio", "all"]
    )
    parser.add_argument(
        "--transport",
        default="tcp",
        type=_transports,
        metavar="tcp|ws|wss|all",
        help="tcp (default), ws, wss, a comma-separated list or all",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--kinds",
        default=",".join(f.value for f in Fault),
        help="the fault kinds (default: all; mid-message and after-message run over ws only)",
    )
    args = parser.parse_args()
    kinds = [Fault(k) for k in args.kinds.split(",")]
    loops = ["thread", "selector", "asyncio"] if args.loop == "all" else [args.loop]
    print(
        f"# bench_resume: {platform.python_implementation()} {platform.python_version()}, "
        f"{args.faults} faults per kind, {args.runs} runs (median shown), seed {args.seed}, "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )
    print()
    print(
        "| transport | driver | fault | cuts survived | resumes | items exactly once | "
        "fault -> resumed p50 / p99 (ms) | detected -> resumed p50 / p99 (ms) |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in args.transport:
        transport = Transport.of(name)
        possible = kinds_for(transport.websocket)
        for loop in loops:
            for kind in (k for k in kinds if k in possible):
                runs = []
                for r in range(args.runs):
                    seed = args.seed * 1000 + r
                    if loop == "asyncio":
                        runs.append(run_asyncio(kind, args.faults, seed, transport))
                    else:
                        runs.append(run_sync(kind, args.faults, loop, seed, transport))
                print(row(name, loop, kind, runs), flush=True)
    print()
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")


def _transports(value: str) -> list[str]:
    names = list(TRANSPORTS) if value == "all" else value.split(",")
    for name in names:
        if name not in TRANSPORTS:
            raise argparse.ArgumentTypeError(f"{name!r}: not one of tcp, ws, wss, all")
    return names


if __name__ == "__main__":
    main()

"""Bytecode per sequential request-response: how much Python each side runs.

On the latency path a round trip's CPU is the interpreter's work: on this
machine a side's user CPU per round trip (``bench_tcp.py --latency-costs``)
is its bytecode count times 15-20 ns once it wakes with cold caches. This
counts the bytecode instructions (``sys.settrace`` with
``f_trace_opcodes``) one side executes per round trip, with its peer in a
process of its own, and lists where they go. Counts are exact and do not
depend on the machine's load, so they compare changes without noise
(docs/performance.md, "Request-response, one at a time").

Sides: ``sansrs`` (the thread driver's blocking client / ``sansrs serve``'s
demo responder), ``sansrs-selector`` (both on the selector loop),
``sansrs-asyncio-client`` (the asyncio client, its event loop included) and
``floor`` (``floor_peer.py``: real RSocket frames, no state: the least a
Python side can run). The client is measured against the floor server and
the server against the floor client, so each count is one side's alone.

Each count is split too: the instructions between a socket read's return
and the next socket write (the *critical stretch*, which the peer waits
for) against all of them (what runs after a write overlaps the peer's
wake-up; ``bench_tcp.py --stretch-costs`` measures what either costs).

    .venv/bin/python benchmarks/bench_opcodes.py             # every side, top 12 functions
    .venv/bin/python benchmarks/bench_opcodes.py --top 40 --side sansrs-client
    .venv/bin/python benchmarks/bench_opcodes.py --items stream16 --items fnf16m --count 50000
    .venv/bin/python benchmarks/bench_opcodes.py --server-items fnf16 --server-items fnf16m \\
        --count 50000    # the server's end: sansrs serve per fire-and-forget received
"""

from __future__ import annotations

import argparse
import collections
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import floor_peer  # noqa: E402

Counts = collections.Counter[tuple[str, str]]
#: All of a side's counts, and those of its critical stretch.
SideCounts = tuple[Counts, Counts]
SIDES = ("floor-client", "sansrs-client", "sansrs-selector-client", "sansrs-asyncio-client",
         "floor-server", "sansrs-server", "sansrs-selector-server")
WARM_UP = floor_peer.WARM_UP


#: Socket calls that end the critical stretch (a write) and start it (a read).
_WRITES = frozenset({"send", "sendall", "sendmsg"})
_READS = frozenset({"recv", "recv_into"})


class Tracer:
    """Counts bytecode instructions by function while ``on``, on every thread.

    ``critical`` counts the instructions between a socket read's return and
    the next socket write: on the latency path, what stands between a
    message arriving and the next one leaving (the peer waits for it). What
    runs after a write, until the next read, overlaps the peer's wake-up and
    work (docs/performance.md, "the critical stretch")."""

    def __init__(self) -> None:
        self.counts: Counts = collections.Counter()
        self.critical: Counts = collections.Counter()
        self.on = False
        self._in_stretch = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.on:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            key = Path(code.co_filename).name, code.co_qualname
            self.counts[key] += 1
            if self._in_stretch:
                self.critical[key] += 1
        return self

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        """C calls: a socket write ends the critical stretch, a read's
        return starts it."""
        if not self.on or event not in ("c_call", "c_return"):
            return
        if not isinstance(getattr(arg, "__self__", None), socket.socket):
            return
        name = arg.__name__
        if event == "c_call" and name in _WRITES:
            self._in_stretch = False
        elif event == "c_return" and name in _READS:
            self._in_stretch = True

    def install(self) -> None:
        threading.settrace(self)
        sys.settrace(self)
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)

    def remove(self) -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _floor_server() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(HERE / "floor_peer.py"), "serve", "0"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline().split()[1])


def _loop(side: str) -> Any:
    """The driver of ``side``: a selector loop of its own, started while the
    tracer is on (the process-wide default loop may run already, its thread
    started before the tracer, so not traced), or a thread per connection."""
    if "selector" not in side:
        return "thread"
    from sansrs.adapters.drive import Loop

    return Loop(name=f"bench-opcodes-{side}").start()


def count_client(side: str, count: int) -> SideCounts:
    """The client ``side`` against the floor server: its bytecode for
    ``count`` round trips after a warm-up."""
    proc, port = _floor_server()
    tracer = Tracer()
    try:
        if side == "floor-client":
            floor_peer._setup_frame()  # its imports, before the count
            tracer.install()
            tracer.on = True
            floor_peer.request_response(port, count)  # its warm-up counted too, scaled below
            tracer.on = False
            return _without_warm_up(tracer, count)
        if side == "sansrs-asyncio-client":
            return _count_asyncio_client(port, count, tracer)
        from sansrs.adapters.rsocket import connect

        loop = _loop(side)
        with connect(f"tcp://127.0.0.1:{port}", loop=loop) as client:
            for _ in range(WARM_UP):
                client.request_response(b"x" * 16, timeout=60)
            tracer.install()
            tracer.on = True
            for _ in range(count):
                client.request_response(b"x" * 16, timeout=60)
            tracer.on = False
    finally:
        tracer.remove()
        proc.kill()
        proc.wait()
    return tracer.counts, tracer.critical


def _count_asyncio_client(port: int, count: int, tracer: Tracer) -> SideCounts:
    """The asyncio client: the event loop's own work counts too (the raw
    asyncio ping-pong it is compared with pays it as well)."""
    import asyncio

    from sansrs.adapters.rsocket import aio

    async def main() -> None:
        client = await aio.connect(f"tcp://127.0.0.1:{port}")
        try:
            for _ in range(WARM_UP):
                await client.request_response(b"x" * 16, timeout=60)
            tracer.install()
            tracer.on = True
            for _ in range(count):
                await client.request_response(b"x" * 16, timeout=60)
            tracer.on = False
            tracer.remove()
        finally:
            await client.close()

    asyncio.run(main())
    return tracer.counts, tracer.critical


def count_server(side: str, count: int) -> SideCounts:
    """The server ``side`` against the floor client (in a process of its
    own): its bytecode over the client's warm-up and ``count`` round trips."""
    tracer = Tracer()
    tracer.install()
    close: Callable[[], object]
    if side == "floor-server":
        import socket

        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]

        def accept() -> None:
            sock, _ = listener.accept()
            floor_peer._serve_connection(sock)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        close = listener.close
    else:
        from sansrs.adapters.rsocket import serve
        from sansrs.adapters.rsocket.demo import DemoHandler

        server = serve("tcp://127.0.0.1:0", handler=DemoHandler(), loop=_loop(side))
        port = server.endpoint.port
        close = server.close
    tracer.on = True
    try:
        subprocess.run([sys.executable, "-c",
                        f"import sys; sys.path.insert(0, {str(HERE)!r}); import floor_peer; "
                        f"floor_peer.request_response({port}, {count})"],
                       check=True, timeout=600, capture_output=True)
    finally:
        tracer.on = False
        tracer.remove()
        close()
    return _without_warm_up(tracer, count)


def _without_warm_up(tracer: Tracer, count: int) -> SideCounts:
    """floor_peer's client runs WARM_UP round trips before ``count``: the
    same work each, so the counts scale."""
    def scaled(counts: Counts) -> Counts:
        return collections.Counter({k: v * count // (count + WARM_UP) for k, v in counts.items()})

    return scaled(tracer.counts), scaled(tracer.critical)


#: ``--items``: what the sansrs client does per item (docs/performance.md,
#: "Items at the application's end").
ITEM_KINDS = ("stream16", "stream16b", "fnf16", "fnf16m", "rr64",
              "stream16-asyncio", "stream16b-asyncio", "stream16-raw-asyncio",
              "fnf16-asyncio", "fnf16m-asyncio")


def count_items(kind: str, count: int) -> Counts:
    """Bytecode of the sansrs client (every thread) for ``count`` items of
    ``kind`` against ``sansrs serve`` in a process of its own: a stream
    item taken by ``for`` (``stream16``) or in lists (``stream16b``), a
    fire-and-forget one at a time (``fnf16``) or by ``fire_and_forget_many``
    (``fnf16m``), a round trip of ``request_response_many`` (``rr64``)."""
    import json

    from sansrs.adapters.rsocket import connect

    if kind.endswith("-raw-asyncio"):
        return _count_raw_asyncio_items(count)
    proc = subprocess.Popen([sys.executable, "-m", "sansrs", "serve", "tcp://127.0.0.1:0"],
                            stdout=subprocess.PIPE, text=True)
    if kind.endswith("-asyncio"):
        try:
            assert proc.stdout is not None
            return _count_asyncio_items(proc.stdout.readline().split()[1], kind, count)
        finally:
            proc.terminate()
            proc.wait(10)
    tracer = Tracer()
    tracer.install()  # before the connection's thread starts
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[1]
        with connect(url) as client:
            request = json.dumps({"n": count, "size": 16})
            for _ in client.request_stream(json.dumps({"n": 1000, "size": 16})):
                pass  # warm: imports, first calls
            tracer.on = True
            if kind == "stream16":
                for _ in client.request_stream(request, prefetch=8192, timeout=60):
                    pass
            elif kind == "stream16b":
                for _ in client.request_stream_batches(request, prefetch=8192, timeout=60):
                    pass
            elif kind == "fnf16":
                for _ in range(count):
                    client.fire_and_forget(b"x" * 16)
            elif kind == "fnf16m":
                client.fire_and_forget_many([b"x" * 16] * count)
            else:
                for _ in client.request_response_many([b"x" * 16] * count, timeout=60):
                    pass
            if kind.startswith("fnf"):
                client.request_response(b"fnf-count", timeout=60)  # all handed over
            tracer.on = False
    finally:
        tracer.remove()
        proc.terminate()
        proc.wait(10)
    return tracer.counts


def _count_asyncio_items(url: str, kind: str, count: int) -> Counts:
    """The asyncio client's bytecode (its event loop included) for ``count``
    stream items taken by ``async for`` (``stream16-asyncio``) or in lists
    (``stream16b-asyncio``), as ``sansrs_client._stream_asyncio`` takes them,
    or fire-and-forgets one ``await`` at a time (``fnf16-asyncio``) or by
    ``fire_and_forget_many`` (``fnf16m-asyncio``)."""
    import asyncio
    import json

    from sansrs.adapters.rsocket import aio

    tracer = Tracer()

    async def main() -> None:
        client = await aio.connect(url)
        try:
            async for _ in client.request_stream(json.dumps({"n": 1000, "size": 16})):
                pass  # warm: imports, first calls
            request = json.dumps({"n": count, "size": 16})
            tracer.install()
            tracer.on = True
            if kind == "fnf16-asyncio":
                for _ in range(count):
                    await client.fire_and_forget(b"x" * 16)
                await client.request_response(b"fnf-count", timeout=60)  # all handed over
            elif kind == "fnf16m-asyncio":
                await client.fire_and_forget_many([b"x" * 16] * count)
                await client.request_response(b"fnf-count", timeout=60)
            elif kind == "stream16b-asyncio":
                async with client.request_stream_batches(
                    request, prefetch=8192, timeout=60
                ) as lists:
                    async for batch in lists:
                        for _ in batch:
                            pass
            else:
                async with client.request_stream(request, prefetch=8192, timeout=60) as items:
                    async for _ in items:
                        pass
            tracer.on = False
            tracer.remove()
        finally:
            await client.close()

    asyncio.run(main())
    return tracer.counts


def _count_raw_asyncio_items(count: int) -> Counts:
    """``raw_peer.stream_asyncio``'s bytecode for ``count`` 16-byte records
    from ``raw_peer.py serve``: the asyncio reference of the rows above."""
    import raw_peer

    proc = subprocess.Popen([sys.executable, str(HERE / "raw_peer.py"), "serve", "0"],
                            stdout=subprocess.PIPE, text=True)
    tracer = Tracer()
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        raw_peer.stream_asyncio(port, 1000, 16)  # warm: imports, first calls
        tracer.install()
        tracer.on = True
        raw_peer.stream_asyncio(port, count, 16)
        tracer.on = False
    finally:
        tracer.remove()
        proc.kill()
        proc.wait()
    return tracer.counts


#: ``--server-items``: what ``sansrs serve`` does per item received.
SERVER_ITEM_KINDS = ("fnf16", "fnf16m")

#: The client of ``--server-items`` (a process of its own): a warm-up, then
#: ``count`` fire-and-forgets once told to go, then ``fnf-count`` (all taken).
_FNF_CLIENT = """
import sys
from sansrs.adapters.rsocket import connect
url, kind, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with connect(url) as client:
    client.fire_and_forget_many([b"x" * 16] * 1000)
    client.request_response(b"fnf-count", timeout=60)
    print("WARM", flush=True)
    sys.stdin.readline()
    if kind == "fnf16m":
        client.fire_and_forget_many([b"x" * 16] * count)
    else:
        for _ in range(count):
            client.fire_and_forget(b"x" * 16)
    reply = client.request_response(b"fnf-count", timeout=600)
    print("DONE", reply.data.decode(), flush=True)
"""


def count_server_items(kind: str, count: int) -> Counts:
    """Bytecode of the demo responder as ``sansrs serve`` runs it (every
    thread, in this process) for ``count`` fire-and-forgets a sansrs client
    (a process of its own) sends one at a time (``fnf16``) or by
    ``fire_and_forget_many`` (``fnf16m``), and the ``fnf-count`` behind them."""
    from sansrs.adapters.rsocket import serve
    from sansrs.adapters.rsocket.demo_routes import demo_router_factory

    tracer = Tracer()
    tracer.install()  # before the server's threads start
    server = serve("tcp://127.0.0.1:0", handler_factory=demo_router_factory())
    proc = subprocess.Popen([sys.executable, "-c", _FNF_CLIENT, server.url, kind, str(count)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "WARM"
        tracer.on = True
        proc.stdin.write("GO\n")
        proc.stdin.flush()
        done = proc.stdout.readline().split()
        tracer.on = False
        assert done == ["DONE", str(count + 1000)], done
    finally:
        tracer.remove()
        proc.kill()
        proc.wait()
        server.close()
    return tracer.counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", action="append", choices=ITEM_KINDS,
                        help="instead: the sansrs client's bytecode per item of these")
    parser.add_argument("--server-items", action="append", choices=SERVER_ITEM_KINDS,
                        help="instead: sansrs serve's bytecode per item of these")
    parser.add_argument("--side", action="append", choices=SIDES,
                        help="measure only these sides (default: all)")
    parser.add_argument("--count", type=int, default=2000, help="round trips counted")
    parser.add_argument("--top", type=int, default=12, help="functions listed per side")
    args = parser.parse_args()
    if args.server_items or args.items:
        who, count_fn = (("sansrs serve", count_server_items) if args.server_items
                         else ("client", count_items))
        print(f"| scenario | bytecode per item ({who}, every thread) |\n| --- | ---: |")
        for kind in args.server_items or args.items:
            counts = count_fn(kind, args.count)
            print(f"| {kind} | {sum(counts.values()) / args.count:,.1f} |", flush=True)
            for (module, name), n in counts.most_common(args.top):
                print(f"  {n / args.count:7.2f}  {module}:{name}", file=sys.stderr)
        return
    sides = args.side or list(SIDES)
    totals = {}
    for side in sides:
        counts, critical = (count_client if side.endswith("client") else count_server)(
            side, args.count)
        total = sum(counts.values()) / args.count
        stretch = sum(critical.values()) / args.count
        totals[side] = total, stretch
        print(f"\n{side}: {total:,.0f} bytecode instructions per round trip, {stretch:,.0f} "
              "of them between a read and the next write")
        for (module, name), n in counts.most_common(args.top):
            print(f"  {n / args.count:7.1f}  {critical[module, name] / args.count:7.1f}  "
                  f"{module}:{name}")
    print("\n| side | bytecode per round trip | between a read and the next write |")
    print("| --- | ---: | ---: |")
    for side, (total, stretch) in totals.items():
        print(f"| {side} | {total:,.0f} | {stretch:,.0f} |")


if __name__ == "__main__":
    main()

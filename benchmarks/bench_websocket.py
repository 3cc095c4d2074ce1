"""WebSocket framing per message: the batch paths of
``adapters/transport/websocket/runs.py`` against one message at a time.

In one process, no socket: a run of ``--batch`` same-length messages (16 B
and 1 KiB payloads, plus the 6-byte RSocket PAYLOAD header) framed as a
client (masked) and as a server (not masked), and the frames split back
into a run by the receiving side; ``one_by_one`` does the same with the
per-message path (``encode_data_frame`` / ``mask`` per message, what the
transport did before runs). Nanoseconds of CPU per message, median of
``--runs``.

    .venv/bin/python benchmarks/bench_websocket.py --runs 7
    .venv/bin/python benchmarks/bench_websocket.py --batch 4 --batch 16

``--transport``: what a driver loop pays per write and per read, through
``WebSocketTransport.send`` / ``recv`` over a stand-in socket (it takes
everything, and hands out the same frames on every read): one BINARY_RUN
record of ``--batch`` 16-byte RSocket items (22-byte messages) from the
engine to frames, and the frames back to one record as the engine reads it
(``MessageReader(keep_runs=True)``); microseconds of CPU per call. Run it
with another checkout's interpreter for a before/after (the script imports
only the public modules)::

    .venv/bin/python benchmarks/bench_websocket.py --transport --runs 5

``--engine``: a server's share of a pipelined request-response (``rr64`` of
``bench_tcp.py``) without sockets or threads: reads of 16-64 16-byte
REQUEST_RESPONSEs (the read sizes ``rr64`` shows, the same boundaries for
both) go through ``RSocketEngine.server`` and the demo responder, as TCP
bytes or as masked WebSocket frames through ``WebSocketTransport``, the
answers written as the driver writes them; microseconds of CPU per round
trip, TCP against ws://, median of ``--runs`` alternating rounds::

    .venv/bin/python benchmarks/bench_websocket.py --engine --runs 7

``--streams``: a stream's share of each side, without sockets or threads:
the client's reads (unmasked frames of 16-byte and 1 KiB RSocket items, in
reads of 120 KiB cut anywhere, the record as the engine reads it) and the
server's writes (BINARY_RUN records of 100 KB and 500 KB offered as the
driver offers them, to a socket taking 256 KiB a call); nanoseconds of CPU
per item, median of ``--runs`` (``stream16`` / ``stream1k`` of
``bench_tcp.py``). Like ``--transport``, it runs against another checkout
with that checkout's code on ``PYTHONPATH``::

    .venv/bin/python benchmarks/bench_websocket.py --streams --runs 5

``--streams --read KIB`` (repeated): only the client's reads of 1 KiB
items, in reads of each size, alternating: a read's own cost beside the
bytes' (``WebSocketTransport``'s ``RECV_MAX``)::

    .venv/bin/python benchmarks/bench_websocket.py --streams --read 64 --read 120 --read 256

``--faults``: minor page faults per 1 KiB item of a fresh client process
(its allocator never settled, as an application's) reading a stream over
ws:// at most ``--read`` KiB at a time (default 120 and 256), a process per
run against one ``python -m sansrs serve``::

    .venv/bin/python benchmarks/bench_websocket.py --faults --runs 5

``--ends``: each end of a stream whole, as the RSocket engine drives it
over ws:// and over TCP, without sockets or threads: the server's core
queueing the items (``send_payloads`` in batches of 128), the records the
engine makes of its output and the transport's write; the client's
transport reads (120 KiB, cut anywhere), the records as the engine reads
them (``MessageReader.feed_whole``; a BINARY_SPAN to
``Connection.receive_span``, the rest to ``receive_data``, as
``opening.receive_records`` does) and the core's events. Over TCP the
core's bytes are the wire; over ws:// each end both ways: runs framed and
re-headed by the transport (BINARY_RUN records, as before the engine made
or cut the frames itself) and FRAMED records / spans. Nanoseconds of CPU
per item, median of ``--runs`` alternating rounds (``stream16`` /
``stream1k`` of ``bench_tcp.py``: the ws / tcp column's own costs)::

    .venv/bin/python benchmarks/bench_websocket.py --ends --runs 7

``--fnf-ends``: each end of 16-byte fire-and-forgets the same way: the
client's core queueing them (``request_fnf_many``, 512 at a time) and, over
ws://, the record and the transport's framing and masking; the server's
reads of 256 KiB (over ws:// unmasked and re-headed), records and core
events (``fnf_runs``); ws:// with the masking in C (the optional extension,
when built) and in pure Python; and the floor of any masking of many
frames at once in Python: a 28-byte frame's bytes to an integer and back::

    .venv/bin/python benchmarks/bench_websocket.py --fnf-ends --runs 5

``--mask``: ``frames.mask`` alone, ns of CPU per message for payloads of
16 B to 1 MiB, in C (the optional extension, when built) and in pure
Python (integers below ``frames.TRANSLATE_FROM``, byte columns by
translation from it on)::

    .venv/bin/python benchmarks/bench_websocket.py --mask --runs 5
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator

from sansrs.adapters.drive.writes import GATHER_AT
from sansrs.adapters.rsocket.demo_routes import demo_router_factory
from sansrs.adapters.rsocket.engine import RSocketEngine, framed_records
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.transport.websocket import WebSocketOptions, frames
from sansrs.adapters.transport.websocket.frames import (
    KeySource,
    binary_head,
    encode_data_frame,
    mask,
)
from sansrs.adapters.transport.websocket.messages import (
    MessageKind,
    MessageReader,
    frames_fields,
    record_head,
    span_fields,
)
from sansrs.adapters.transport.websocket.messages import encode_run as encode_record_run
from sansrs.adapters.transport.websocket.runs import encode_run, prefix
from sansrs.adapters.transport.websocket.splitter import FrameSplitter
from sansrs.adapters.transport.websocket.transport import WebSocketTransport
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection

from sansrs.rsocket import Connection as CoreConnection
from sansrs.rsocket import ConnectionConfig, Role

_SPAN = MessageKind.BINARY_SPAN
MESSAGES = 200_000


def _run(size: int, batch: int) -> bytes:
    message = os.urandom(size)
    return (prefix(size) + message) * batch


def _splitter(masked: bool) -> tuple[FrameSplitter, list[int]]:
    got = [0]

    def on_record(record: bytes) -> None:
        got[0] += len(record) - 5

    def on_message(opcode: int, payload: bytes) -> None:
        raise AssertionError("not a run")

    def to_wsproto(data: bytes) -> None:
        raise AssertionError("not for wsproto")

    return FrameSplitter(masked=masked, max_payload=1 << 24, on_record=on_record,
                         on_message=on_message, to_wsproto=to_wsproto), got


def _time(fn: Callable[[], object], repeat: int) -> float:
    start = time.process_time()
    for _ in range(repeat):
        fn()
    return time.process_time() - start


def measure(size: int, batch: int, client: bool, runs: int) -> dict[str, float]:
    """ns per message: batch send, batch receive, one-by-one send and receive."""
    run = _run(size, batch)
    keys = KeySource() if client else None
    wire, used = encode_run(run, keys)
    assert used == len(run)
    repeat = max(1, MESSAGES // batch)
    splitter, got = _splitter(masked=client)  # the peer of a client is a server

    def send_batch() -> None:
        encode_run(run, keys)

    def receive_batch() -> None:
        splitter.feed(wire)

    messages = [run[i * (size + 3) + 3 : (i + 1) * (size + 3)] for i in range(batch)]

    def send_one() -> None:
        b"".join([encode_data_frame(2, m, keys.next() if keys else None) for m in messages])

    stride = len(wire) // batch
    head = stride - size

    def receive_one() -> None:
        out = bytearray()
        for i in range(batch):
            off = i * stride
            out += prefix(size)
            if client:
                out += mask(wire[off + head - 4 : off + head], wire[off + head : off + stride])
            else:
                out += memoryview(wire)[off + head : off + stride]

    results: dict[str, list[float]] = {k: [] for k in ("send", "receive", "send_1", "receive_1")}
    for _ in range(runs):  # alternating, so load hits both alike
        for name, fn in (("send", send_batch), ("receive", receive_batch),
                         ("send_1", send_one), ("receive_1", receive_one)):
            results[name].append(_time(fn, repeat) / (repeat * batch) * 1e9)
    assert got[0] == repeat * runs * len(run)
    return {k: statistics.median(v) for k, v in results.items()}


class _Socket:
    """Stand-in for the TCP transport: takes every byte (``keep``: into
    ``sent``), hands out ``inbox``."""

    peer = "bench"

    def __init__(self, keep: bool = False) -> None:
        self.inbox = b""
        self.sent: list[bytes] = []
        self._keep = keep

    def send(self, data: bytes | bytearray | memoryview) -> int:
        if self._keep:
            self.sent.append(bytes(data))
        return len(data)

    def recv(self, max_bytes: int) -> bytes:
        return self.inbox

    def send_pieces(self, pieces: list[bytes]) -> int:
        """A ``sendmsg``: the pieces as they are (kept joined with ``keep``)."""
        if self._keep:
            self.sent.append(b"".join(pieces))
        return sum(map(len, pieces))


def _open_transport(client: bool, keep: bool = False) -> WebSocketTransport:
    role = ConnectionType.CLIENT if client else ConnectionType.SERVER
    ws = WSConnection(role)
    ws.connection = Connection(role)  # past the upgrade
    return WebSocketTransport(_Socket(keep), ws, scheme="ws", path="/",  # type: ignore[arg-type]
                              options=WebSocketOptions(), is_open=True)


def measure_transport(batch: int, client: bool, runs: int) -> tuple[float, float]:
    """µs of CPU per ``send`` of one record of ``batch`` 22-byte messages by
    a client (masked) or a server, and per ``recv`` of them by the peer."""
    run = _run(22, batch)
    record = bytearray(encode_record_run(run))  # what the driver offers, as it offers it
    sender = _open_transport(client)
    receiver = _open_transport(not client)
    frames, _ = encode_run(run, KeySource() if client else None)
    receiver._stream.inbox = frames  # type: ignore[attr-defined]
    reader = MessageReader(keep_runs=True)
    assert reader.feed(receiver.recv()) == [(0x12, run)]
    assert sender.send(record) == len(record)
    repeat = max(50, 100_000 // batch)
    sends: list[float] = []
    reads: list[float] = []
    for _ in range(runs):
        sends.append(_time(lambda: sender.send(record), repeat) / repeat * 1e6)
        reads.append(_time(lambda: reader.feed(receiver.recv()), repeat) / repeat * 1e6)
    return statistics.median(sends), statistics.median(reads)


def main_transport(batches: list[int], runs: int) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f}; µs of CPU per call, 22-byte messages")
    print("| messages per call | client send (masked) | server recv | server send | client recv |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for batch in batches:
        client_send, server_recv = measure_transport(batch, True, runs)
        server_send, client_recv = measure_transport(batch, False, runs)
        print(f"| {batch} | {client_send:.2f} | {server_recv:.2f} | {server_send:.2f} | "
              f"{client_recv:.2f} |", flush=True)


#: Requests per read in ``--engine`` (what the server of ``rr64`` reads:
#: whole writes of 16 requests, one to four at a time).
ENGINE_READS = (16, 64, 16, 32, 16, 48, 64, 16, 32, 64)
ENGINE_ROUND_TRIPS = 100_000


class _Driver:
    """What an engine calls on its driver here: ``write_now`` writes what
    the engine has, as the loop's driver does."""

    def __init__(self, engine: RSocketEngine, transport: _Socket | WebSocketTransport) -> None:
        self.engine = engine
        self.transport = transport
        self.written = 0  # bytes the engine handed over

    def write_now(self) -> None:
        data = self.engine.data_to_send()
        if data:
            self.written += len(data)
            self.transport.send(data)

    def wake(self) -> None:
        pass


def _engine_input(websocket: bool) -> list[bytes]:
    """A SETUP, then ``ENGINE_ROUND_TRIPS`` requests in reads of
    ``ENGINE_READS``: TCP bytes, or masked frames."""
    setup = RSocketEngine.client(EngineOptions(), None).data_to_send()
    keys = KeySource()
    reads = [encode_run(setup, keys)[0] if websocket else setup]
    stream_id = 1
    left = ENGINE_ROUND_TRIPS
    while left:
        for count in ENGINE_READS:
            count = min(count, left)
            run = b"".join(
                prefix(22) + (stream_id + 2 * i).to_bytes(4, "big") + b"\x10\x00" + b"x" * 16
                for i in range(count)
            )
            reads.append(encode_run(run, keys)[0] if websocket else run)
            stream_id += 2 * count
            left -= count
            if not left:
                break
    return reads


def measure_engine(websocket: bool, reads: list[bytes]) -> float:
    """µs of CPU per round trip for the server side of ``reads``."""
    sock = _Socket()
    transport = _open_transport(False) if websocket else sock
    if isinstance(transport, WebSocketTransport):
        sock = transport._stream  # type: ignore[assignment]
    engine = RSocketEngine.server(EngineOptions(), message_framed=websocket)
    driver = _Driver(engine, transport)
    engine.attach(driver, None, demo_router_factory([])(None))  # type: ignore[arg-type]
    gc.collect()  # the rounds before leave nothing for this one to collect
    start = time.process_time()
    for data in reads:
        sock.inbox = data
        engine.receive_data(transport.recv(1 << 18), 0.0)
        engine.pump()
        driver.write_now()
    seconds = time.process_time() - start
    # Every request answered: a 16-byte PAYLOAD is 25 bytes with its length.
    if driver.written < 25 * ENGINE_ROUND_TRIPS:
        raise RuntimeError(f"the server answered {driver.written // 25} requests")
    return seconds / ENGINE_ROUND_TRIPS * 1e6


def main_engine(runs: int) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f}; µs of server CPU per round trip")
    inputs = {ws: _engine_input(ws) for ws in (False, True)}
    tcp: list[float] = []
    ws: list[float] = []
    for _ in range(runs):
        tcp.append(measure_engine(False, inputs[False]))
        ws.append(measure_engine(True, inputs[True]))
    ratio = statistics.median(w / t for w, t in zip(ws, tcp, strict=True))
    rounds = ", ".join(f"{t:.2f} / {w:.2f}" for t, w in zip(tcp, ws, strict=True))
    print(f"rounds (TCP / ws://): {rounds}")
    print("| TCP | ws:// | ws / TCP |")
    print("| ---: | ---: | ---: |")
    print(f"| {statistics.median(tcp):.3f} | {statistics.median(ws):.3f} | {ratio:.3f}x |")


class _Reads(_Socket):
    """Stand-in socket handing out ``reads`` in turn; takes at most ``room``
    bytes per write."""

    def __init__(self, reads: list[bytes], room: int) -> None:
        super().__init__()
        self.reads = reads[::-1]
        self.room = room

    def send(self, data: bytes | bytearray | memoryview) -> int:
        return min(len(data), self.room)

    def recv(self, max_bytes: int) -> bytes:
        return self.reads.pop()


def _stream_items(size: int, count: int) -> list[bytes]:
    """PAYLOAD frames (stream 1, NEXT) of the demo stream's items."""
    return [b"\x00\x00\x00\x01\x28\x20" + str(i).encode().zfill(size) for i in range(count)]


def _stream_transport(
    client: bool, stream: _Socket, options: WebSocketOptions | None = None
) -> WebSocketTransport:
    role = ConnectionType.CLIENT if client else ConnectionType.SERVER
    ws = WSConnection(role)
    ws.connection = Connection(role)  # past the upgrade
    return WebSocketTransport(stream, ws, scheme="ws", path="/",  # type: ignore[arg-type]
                              options=options or WebSocketOptions(), is_open=True)


def measure_stream_reads(size: int, count: int, read: int = 120 * 1024) -> float:
    """ns of CPU per item: a client's reads of a stream's frames, each read
    to the record the engine takes (``MessageReader(keep_runs=True)``)."""
    run = b"".join(prefix(len(m)) + m for m in _stream_items(size, count))
    wire, _ = encode_run(run, None)
    reads = [wire[i : i + read] for i in range(0, len(wire), read)]
    transport = _stream_transport(True, _Reads(reads, 0))
    reader = MessageReader(keep_runs=True)
    got = 0
    start = time.process_time()
    for _ in reads:
        try:
            data = transport.recv(read)
        except BlockingIOError:
            continue
        for _kind, payload in reader.feed(data):
            got += len(payload)
    seconds = time.process_time() - start
    assert got == len(run), (got, len(run))
    return seconds / count * 1e9


def measure_stream_writes(size: int, count: int, write: int) -> float:
    """ns of CPU per item: a server's writes of a stream's records of about
    ``write`` bytes, the rest of each offered again as a driver does."""
    items = _stream_items(size, count)
    per = max(1, write // (size + 9))
    records = [encode_record_run(b"".join(prefix(len(m)) + m for m in items[i : i + per]))
               for i in range(0, count, per)]
    transport = _stream_transport(False, _Reads([], 256 * 1024))
    start = time.process_time()
    for record in records:
        sent = transport.send(record)
        if sent < len(record):
            rest = bytearray(memoryview(record)[sent:])
            while rest:
                del rest[: transport.send(rest)]
    return (time.process_time() - start) / count * 1e9


def main_streams(runs: int, read_sizes: list[int]) -> None:
    if read_sizes:
        main_read_sizes(runs, read_sizes)
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f}; ns of CPU per stream item")
    print("| item | client reads | server writes of 100 KB | of 500 KB |")
    print("| ---: | ---: | ---: | ---: |")
    for size, count in ((16, 300_000), (1024, 60_000)):
        rounds = [(measure_stream_reads(size, count), measure_stream_writes(size, count, 100_000),
                   measure_stream_writes(size, count, 500_000)) for _ in range(runs)]
        reads, small, large = (statistics.median(r[k] for r in rounds) for k in range(3))
        print(f"| {size} B | {reads:.1f} | {small:.1f} | {large:.1f} |", flush=True)


def main_read_sizes(runs: int, read_sizes: list[int]) -> None:
    """A client's reads of 1 KiB items, reads of each of ``read_sizes`` KiB
    alternating in each round: what a read costs beside what a byte costs
    (the transport's ``RECV_MAX``). The allocator is settled first, as in
    every benchmark process."""
    from raw_peer import settle_allocator

    settle_allocator()
    print(f"load average at start: {os.getloadavg()[0]:.2f}; ns of CPU per 1 KiB item")
    print("| read | items per read | client reads |")
    print("| ---: | ---: | ---: |")
    rounds = [[measure_stream_reads(1024, 60_000, kib * 1024) for kib in read_sizes]
              for _ in range(runs)]
    for k, kib in enumerate(read_sizes):
        print(f"| {kib} KiB | {kib * 1024 / 1033:.0f} | "
              f"{statistics.median(r[k] for r in rounds):.0f} |", flush=True)


ENDS_BATCH = 128


def _streaming_pair() -> tuple[CoreConnection, CoreConnection, int]:
    """A client and a server core past SETUP, a stream open with all the
    credit it can have (the ends' own costs, no REQUEST_N round)."""
    client = CoreConnection(Role.CLIENT, ConnectionConfig(payload_runs=True))
    server = CoreConnection(Role.SERVER)
    client.setup()
    server.receive_data(client.data_to_send())
    server.accept_setup()
    client.request_stream(b"q", initial_n=0x7FFFFFFF)
    server.receive_data(client.data_to_send())
    (request,) = server.events()[-1:]
    client.events()
    return client, server, request.stream_id  # type: ignore[attr-defined]


def measure_server_end(size: int, count: int, mode: str) -> float:
    """ns of CPU per item: the server's core, records and transport write.
    ``mode``: "tcp" (the core's pieces are the wire), "run" (BINARY_RUN
    records framed by the transport: an engine that does not frame its
    runs), "framed" (``frame_runs``: FRAMED records written as they are)."""
    _, server, sid = _streaming_pair()
    items = [str(i).encode().zfill(size) for i in range(ENDS_BATCH)]
    transport = _stream_transport(False, _Reads([], 1 << 30))
    if mode == "framed":
        server.frame_runs(binary_head)
    rounds = count // ENDS_BATCH
    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        server.send_payloads(sid, items)
        if mode == "framed":
            # As the driver and RSocketEngine.pieces_to_send: from GATHER_AT
            # queued, runs alone are one FRAMED record whose pieces go to
            # the socket's sendmsg as they are.
            gather = server.queued_output >= GATHER_AT
            pieces, framed = server.framed_pieces_to_send()
            if gather and 2 * len(framed) == len(pieces):
                head = record_head(MessageKind.FRAMED, sum(map(len, pieces)))
                transport.send_pieces([head, *pieces])
            else:
                transport.send(framed_records(pieces, framed))
        elif mode == "run":
            pieces = server.pieces_to_send()
            pieces.insert(0, record_head(MessageKind.BINARY_RUN, sum(map(len, pieces))))
            transport.send(b"".join(pieces))
        else:
            server.pieces_to_send()  # (what the driver's sendmsg takes)
    return (time.process_time() - start) / (rounds * ENDS_BATCH) * 1e9


def _stream_wire(size: int, count: int, websocket: bool) -> tuple[CoreConnection, bytes]:
    client, server, sid = _streaming_pair()
    chunks = []
    for i in range(0, count, 1000):
        server.send_payloads(sid, [str(k).encode().zfill(size) for k in range(i, i + 1000)])
        chunks.append(server.data_to_send())
    data = b"".join(chunks)
    return client, encode_run(data, None)[0] if websocket else data


class _Wire(_Socket):
    """Stand-in socket handing out ``wire`` as asked (at most ``max_bytes``
    a read); notes each read."""

    def __init__(self, wire: bytes) -> None:
        super().__init__()
        self.wire = wire
        self.at = 0
        self.reads: list[bytes] = []

    def recv(self, max_bytes: int) -> bytes:
        data = self.wire[self.at : self.at + max_bytes]
        self.at += len(data)
        self.reads.append(data)
        return data


def _asked_reads(wire: bytes, options: WebSocketOptions, read: int) -> list[bytes]:
    """The reads a client transport makes of ``wire`` asking ``read`` bytes
    at most (it sizes them itself: with ``binary_spans`` to end where a
    frame does), found by a dry run."""
    stream = _Wire(wire)
    transport = _stream_transport(True, stream, options)
    while stream.at < len(wire):
        with contextlib.suppress(BlockingIOError):
            transport.recv(read)
    return stream.reads


def measure_client_end(size: int, count: int, mode: str, read: int = 120 * 1024) -> float:
    """ns of CPU per item: the client's transport reads, records and core.
    ``mode``: "tcp" (the reads are the core's input), "run" (BINARY_RUN
    records re-headed by the transport), "span" (``binary_spans``: spans
    to ``Connection.receive_span``)."""
    client, wire = _stream_wire(size, count, mode != "tcp")
    options = WebSocketOptions(binary_spans=mode == "span")
    if mode == "tcp":
        reads = [wire[i : i + read] for i in range(0, len(wire), read)]
    else:  # the reads the transport asks for, cut before the clock starts, as TCP's
        reads = _asked_reads(wire, options, read)
    transport = _stream_transport(True, _Reads(reads, 0), options)
    reader = MessageReader(keep_runs=True)
    got = 0
    gc.collect()
    start = time.process_time()
    for data in reads:
        if mode != "tcp":
            try:
                data = transport.recv(read)
            except BlockingIOError:
                continue
            buf, records = reader.feed_whole(data)
            for kind, begin, stop in records:
                if kind == _SPAN:
                    items, n, skip = span_fields(buf, begin, stop)
                    client.receive_span(buf, begin + 5, items, n, skip)
                elif kind == MessageKind.BINARY_FRAMES:
                    items, n, skip = frames_fields(buf, begin, stop)
                    client.receive_span(buf, begin, items, n, skip)
                else:
                    client.receive_data(buf[begin:stop])
        else:
            client.receive_data(data)
        for ev in client.events():
            got += len(ev.data)  # type: ignore[attr-defined]
    seconds = time.process_time() - start
    assert got == count, (got, count)
    return seconds / count * 1e9


def main_ends(runs: int) -> None:
    from raw_peer import settle_allocator

    settle_allocator()
    print(f"load average at start: {os.getloadavg()[0]:.2f}; ns of CPU per stream item")
    print("| item | server TCP | ws:// runs | ws:// FRAMED | ws / TCP | "
          "client TCP | ws:// runs | ws:// spans | ws / TCP |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, count in ((16, 300_000), (1024, 60_000)):
        rounds = [
            (*(measure_server_end(size, count, m) for m in ("tcp", "run", "framed")),
             *(measure_client_end(size, count, m) for m in ("tcp", "run", "span")))
            for _ in range(runs)
        ]
        med = [statistics.median(r[k] for r in rounds) for k in range(6)]
        server = statistics.median(r[2] / r[0] for r in rounds)
        client = statistics.median(r[5] / r[3] for r in rounds)
        print(f"| {size} B | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | {server:.2f}x | "
              f"{med[3]:.0f} | {med[4]:.0f} | {med[5]:.0f} | {client:.2f}x |", flush=True)


FNF_BATCH = 512


def _fnf_pair() -> tuple[CoreConnection, CoreConnection]:
    """A client and a server core past SETUP, the server reporting runs of
    REQUEST_FNF as one event (``fnf_runs``, as ``sansrs serve``)."""
    client = CoreConnection(Role.CLIENT)
    server = CoreConnection(Role.SERVER, ConnectionConfig(fnf_runs=True))
    client.setup()
    server.receive_data(client.data_to_send())
    server.accept_setup()
    server.events()
    server.data_to_send()
    return client, server


def measure_fnf_client_end(count: int, websocket: bool) -> float:
    """ns of CPU per 16-byte fire-and-forget: the client's core queueing
    them (``request_fnf_many``, batches of FNF_BATCH) and, over ws://, the
    BINARY_RUN record and the transport's framing and masking."""
    client, _ = _fnf_pair()
    items = [str(i).encode().zfill(16) for i in range(FNF_BATCH)]
    transport = _stream_transport(True, _Socket())
    rounds = count // FNF_BATCH
    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        client.request_fnf_many(items)
        pieces = client.pieces_to_send()
        if websocket:
            pieces.insert(0, record_head(MessageKind.BINARY_RUN, sum(map(len, pieces))))
            transport.send(b"".join(pieces))
    return (time.process_time() - start) / (rounds * FNF_BATCH) * 1e9


def _fnf_reads(count: int, websocket: bool) -> list[bytes]:
    client, _ = _fnf_pair()
    items = [str(i).encode().zfill(16) for i in range(FNF_BATCH)]
    chunks = []
    for _ in range(count // FNF_BATCH):
        client.request_fnf_many(items)
        chunks.append(client.data_to_send())
    data = b"".join(chunks)
    if websocket:
        data = encode_run(data, KeySource())[0]
    return [data[i : i + 256 * 1024] for i in range(0, len(data), 256 * 1024)]


def measure_fnf_server_end(reads: list[bytes], websocket: bool) -> float:
    """ns of CPU per fire-and-forget: the server's reads of 256 KiB (over
    ws://: unmasked and re-headed by the transport, records as the engine
    reads them) and its core's events."""
    _, server = _fnf_pair()
    transport = _stream_transport(False, _Reads(list(reads), 0))
    reader = MessageReader(keep_runs=True)
    got = 0
    gc.collect()
    start = time.process_time()
    for data in reads:
        if websocket:
            try:
                data = transport.recv(256 * 1024)
            except BlockingIOError:
                continue
            buf, records = reader.feed_whole(data)
            for _, begin, stop in records:
                server.receive_data(buf[begin:stop])
        else:
            server.receive_data(data)
        for ev in server.events():
            got += len(ev.data)  # type: ignore[attr-defined]
    seconds = time.process_time() - start
    assert got == len(b"".join(reads)) // (28 if websocket else 25), got  # every one, as a run
    return seconds / got * 1e9


def measure_xor_floor(count: int) -> float:
    """ns of CPU per 16-byte fire-and-forget's masked frame (28 bytes) for
    the two conversions any XOR of many frames at once needs in Python
    (bytes to integer and back: the stdlib has no XOR of bytes)."""
    frames = os.urandom(28 * FNF_BATCH)
    rounds = count // FNF_BATCH
    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        int.from_bytes(frames, "little").to_bytes(len(frames), "little")
    return (time.process_time() - start) / (rounds * FNF_BATCH) * 1e9


@contextlib.contextmanager
def masking(in_c: bool) -> Iterator[bool]:
    """The masking in C (when the extension was built: yields whether it
    runs) or in pure Python meanwhile. A checkout from before the extension
    has no switch: its masking is pure Python."""
    before = getattr(frames, "C_MASKING", None)
    if hasattr(frames, "C_MASKING"):
        frames.C_MASKING = frames.C_EXTENSION if in_c else None
    try:
        yield getattr(frames, "C_MASKING", None) is not None
    finally:
        if hasattr(frames, "C_MASKING"):
            frames.C_MASKING = before


def main_fnf_ends(runs: int, count: int = 200_000) -> None:
    from raw_peer import settle_allocator

    settle_allocator()
    with masking(True) as in_c:
        pass
    print(f"load average at start: {os.getloadavg()[0]:.2f}; "
          "ns of CPU per 16-byte fire-and-forget; ws:// masking in C "
          f"({'the extension' if in_c else 'NOT BUILT: pure Python in both'}) and in Python")
    reads = {ws: _fnf_reads(count, ws) for ws in (False, True)}

    def ws_ends(in_c: bool) -> tuple[float, float]:
        with masking(in_c):
            return (measure_fnf_client_end(count, True),
                    measure_fnf_server_end(reads[True], True))

    rounds = [
        (measure_fnf_client_end(count, False), *ws_ends(True), *ws_ends(False),
         measure_fnf_server_end(reads[False], False), measure_xor_floor(count))
        for _ in range(runs)
    ]
    # (client TCP, client C, server C, client Python, server Python, server TCP, floor)
    med = [statistics.median(r[k] for r in rounds) for k in range(7)]

    def ratio(ws: int, tcp: int) -> str:
        return f"{statistics.median(r[ws] / r[tcp] for r in rounds):.2f}x"

    print("| client TCP | ws:// C | ws / TCP | ws:// Python | ws / TCP | server TCP | ws:// C | "
          "ws / TCP | ws:// Python | ws / TCP | bytes -> int -> bytes, 28 B |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {med[0]:.0f} | {med[1]:.0f} | {ratio(1, 0)} | {med[3]:.0f} | {ratio(3, 0)} | "
          f"{med[5]:.0f} | {med[2]:.0f} | {ratio(2, 5)} | {med[4]:.0f} | {ratio(4, 5)} | "
          f"{med[6]:.0f} |", flush=True)


def faults_client(url: str, kib: int, items: int) -> None:
    """One client process that never settled its allocator, as an
    application's: a stream of ``items`` 1 KiB items over ``url`` (a list
    at a time), the transport reading at most ``kib`` KiB at once. Prints
    its minor page faults and CPU per item as JSON."""
    import json
    import resource

    from sansrs.adapters.rsocket import connect
    from sansrs.adapters.transport.websocket import transport

    transport.RECV_MAX = transport.SPAN_RECV_MAX = kib * 1024
    request = json.dumps({"n": items, "size": 1024})
    got = 0
    with connect(url) as client:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        cpu = time.process_time()
        with client.request_stream_batches(request, prefetch=4096, timeout=60) as lists:
            for batch in lists:
                got += len(batch)
        cpu = time.process_time() - cpu
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    assert got == items, (got, items)
    print(json.dumps({"faults": faults / items, "cpu_us": cpu / items * 1e6}))


def main_faults(runs: int, read_sizes: list[int], items: int = 200_000) -> None:
    """Minor page faults per 1 KiB item of a fresh client process per run
    (:func:`faults_client`) reading at most each of ``read_sizes`` KiB at a
    time, against one ``python -m sansrs serve`` over ws://: what
    ``RECV_MAX`` costs an application whose allocator nobody settled."""
    import json
    import subprocess
    import sys

    from bench_tcp import server_process

    command = [sys.executable, "-m", "sansrs", "serve", "ws://127.0.0.1:0/rsocket"]
    results: dict[int, list[dict[str, float]]] = {kib: [] for kib in read_sizes}
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {items:,} items of 1 KiB per run")
    with server_process(command, "sansrs ws") as (port, _):
        url = f"ws://127.0.0.1:{port}/rsocket"
        for _ in range(runs):
            for kib in read_sizes:
                out = subprocess.run(
                    [sys.executable, __file__, "--faults-client", url, str(kib), str(items)],
                    check=True, capture_output=True, text=True, timeout=300,
                ).stdout
                results[kib].append(json.loads(out.splitlines()[-1]))
    print("| read | faults per item (median) | range | client CPU µs per item (median) |")
    print("| ---: | ---: | --- | ---: |")
    for kib, rounds in results.items():
        faults = [r["faults"] for r in rounds]
        cpu = statistics.median(r["cpu_us"] for r in rounds)
        print(f"| {kib} KiB | {statistics.median(faults):.3f} | "
              f"{min(faults):.3f}-{max(faults):.3f} | {cpu:.2f} |", flush=True)


def main_mask(runs: int) -> None:
    """ns of CPU per message of ``frames.mask`` (a masked frame's payload
    one at a time: a client's messages over 125 bytes, a server's reads of
    them), per payload size, the least of ``runs``."""
    print(f"load average at start: {os.getloadavg()[0]:.2f}; ns of CPU per message")
    print("| payload | C | Python |")
    print("| ---: | ---: | ---: |")
    key = os.urandom(4)
    for size in (16, 125, 1024, 4096, 65536, 1 << 20):
        payload = os.urandom(size)
        repeat = max(5, 200_000 // (size // 16 + 1))

        def one(payload: bytes = payload) -> bytes:
            return mask(key, payload)

        cells = []
        for in_c in (True, False):
            with masking(in_c) as ran_c:
                ns = min(_time(one, repeat) / repeat * 1e9 for _ in range(runs))  # noise only adds
            cells.append(f"{ns:,.0f}" if ran_c == in_c else "-")
        print(f"| {size:,} B | {cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--transport", action="store_true",
                        help="per send/recv call through WebSocketTransport")
    parser.add_argument("--engine", action="store_true",
                        help="a server's CPU per pipelined round trip, TCP against ws://")
    parser.add_argument("--streams", action="store_true",
                        help="a stream's reads (client) and writes (server), ns per item")
    parser.add_argument("--read", type=int, action="append", metavar="KIB",
                        help="with --streams: only the client's reads of 1 KiB items, "
                             "reads of KIB KiB (repeat for several sizes)")
    parser.add_argument("--faults", action="store_true",
                        help="page faults per 1 KiB item of a fresh ws:// client process, "
                             "reads of each --read size (default 120 and 256 KiB)")
    parser.add_argument("--faults-client", nargs=3, metavar=("URL", "KIB", "ITEMS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--ends", action="store_true",
                        help="each end of a stream (core, records, transport), ws:// and TCP")
    parser.add_argument("--fnf-ends", action="store_true",
                        help="each end of 16-byte fire-and-forgets in process, ws:// and TCP")
    parser.add_argument("--mask", action="store_true",
                        help="frames.mask per message, 16 B to 1 MiB payloads")
    args = parser.parse_args()
    if args.faults_client:
        url, kib, items = args.faults_client
        faults_client(url, int(kib), int(items))
        return
    if args.faults:
        main_faults(args.runs, args.read or [120, 256])
        return
    if args.mask:
        main_mask(args.runs)
        return
    if args.ends:
        main_ends(args.runs)
        return
    if args.fnf_ends:
        main_fnf_ends(args.runs)
        return
    if args.streams:
        main_streams(args.runs, args.read or [])
        return
    if args.engine:
        main_engine(args.runs)
        return
    if args.transport:
        main_transport(args.batch or [1, 4, 16, 32, 64, 3000], args.runs)
        return
    batches = args.batch or [1, 4, 16, 64, 512]
    print(f"load average at start: {os.getloadavg()[0]:.2f}; ns of CPU per message")
    print("| frame | direction | batch | send (runs) | send one by one | ratio | "
          "receive (runs) | receive one by one | ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in (22, 1030):
        for client in (True, False):
            side = "masked, client -> server" if client else "unmasked, server -> client"
            for batch in batches:
                r = measure(size, batch, client, args.runs)
                print(f"| {size} B | {side} | {batch} | {r['send']:,.0f} | {r['send_1']:,.0f} | "
                      f"{r['send_1'] / r['send']:.1f}x | {r['receive']:,.0f} | "
                      f"{r['receive_1']:,.0f} | {r['receive_1'] / r['receive']:.1f}x |",
                      flush=True)


if __name__ == "__main__":
    main()

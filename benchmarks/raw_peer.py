"""Raw-socket baseline for bench_tcp.py: length-prefixed records over blocking
TCP sockets, no protocol beyond that. Each record is built and parsed one by
one in Python, as an RSocket frame is, so the ratio shows what the protocol
machinery costs on top of moving the same payloads.

Wire: record = 4-byte big-endian length + body. A request's body starts with
an op byte: ``S`` + n (u64) + size (u32) -> n records of ``size`` bytes;
``R`` + payload -> the payload echoed; ``F`` + payload -> counted, no reply;
``C`` -> the count so far, as decimal text.

    python benchmarks/raw_peer.py serve PORT   # prints READY <port>
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterator

HEADER = struct.Struct(">I")
STREAM_REQ = struct.Struct(">QI")
BATCH = 512


def settle_allocator() -> None:
    """Every benchmark process (client or server, ours and the peers') calls
    this first, so that none is slowed by its own history. ``recv(256 KiB)``
    (this peer's reads, asyncio's transports) allocates above glibc's initial
    mmap threshold: until the process frees one large block, every read that
    returns less than that costs an mmap, a page fault and a munmap or
    mremap, about 15 µs. That halved the raw ping-pong's rate (and the raw
    asyncio one's) and not sansrs's, whose imports had already freed such a
    block (strace -c: no mmap per round trip). Freeing one 4 MiB block
    raises the threshold for the rest of the process."""
    block = bytearray(4 << 20)
    del block


def records(sock: socket.socket) -> Iterator[bytes]:
    """Every record read from ``sock`` until end of stream."""
    buf = b""
    pos = 0
    unpack = HEADER.unpack_from
    while True:
        chunk = sock.recv(256 * 1024)
        if not chunk:
            return
        buf = buf[pos:] + chunk
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (length,) = unpack(buf, pos)
            if end - pos - 4 < length:
                break
            yield buf[pos + 4 : pos + 4 + length]
            pos += 4 + length


def record(body: bytes) -> bytes:
    return HEADER.pack(len(body)) + body


def _serve_connection(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fnf = 0
    pack = HEADER.pack
    with sock:
        for body in records(sock):
            op = body[:1]
            if op == b"R":
                sock.sendall(record(body[1:]))
            elif op == b"F":
                fnf += 1
            elif op == b"C":
                sock.sendall(record(str(fnf).encode()))
            elif op == b"S":
                n, size = STREAM_REQ.unpack_from(body, 1)
                batch: list[bytes] = []
                for i in range(n):
                    item = str(i).encode().zfill(size)
                    batch.append(pack(len(item)))
                    batch.append(item)
                    if len(batch) >= 2 * BATCH:
                        sock.sendall(b"".join(batch))
                        batch.clear()
                if batch:
                    sock.sendall(b"".join(batch))


def serve(port: int, serve_connection: Callable[[socket.socket], None] | None = None) -> None:
    """Accept on ``port`` (0: any), a thread per connection running
    ``serve_connection`` (this peer's by default); prints ``READY <port>``."""
    serve_connection = serve_connection or _serve_connection
    listener = socket.create_server(("127.0.0.1", port))
    print(f"READY {listener.getsockname()[1]}", flush=True)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=serve_connection, args=(sock,), daemon=True).start()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def stream(port: int, n: int, size: int) -> int:
    with connect(port) as sock:
        sock.sendall(record(b"S" + STREAM_REQ.pack(n, size)))
        count = 0
        for _ in records(sock):
            count += 1
            if count == n:
                break
        return count


def request_response(port: int, n: int, in_flight: int, size: int = 16) -> int:
    payload = record(b"R" + b"x" * size)
    with connect(port) as sock:
        done = 0
        sent = min(in_flight, n)
        sock.sendall(payload * sent)
        for _ in records(sock):
            done += 1
            if done == n:
                break
            if sent < n:
                sock.sendall(payload)
                sent += 1
        return done


def fire_and_forget(port: int, n: int, size: int = 16) -> int:
    payload = record(b"F" + b"x" * size)
    with connect(port) as sock:
        for start in range(0, n, BATCH):
            # One record per item, written in batches as a core's data_to_send would.
            sock.sendall(b"".join([payload] * min(BATCH, n - start)))
        sock.sendall(record(b"C"))
        reply = next(records(sock))
        return int(reply)


def fire_and_forget_asyncio(port: int, n: int, size: int = 16) -> int:
    """:func:`fire_and_forget` over asyncio streams: the records written in
    batches of :data:`BATCH` (``writer.write``), ``drain()`` after each, so
    that the writer waits for the socket as an asyncio client must; then
    the count asked for (the asyncio writer baseline)."""
    import asyncio

    payload = record(b"F" + b"x" * size)

    async def main() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for start in range(0, n, BATCH):
                writer.write(b"".join([payload] * min(BATCH, n - start)))
                await writer.drain()
            writer.write(record(b"C"))
            (length,) = HEADER.unpack(await reader.readexactly(4))
            return int(await reader.readexactly(length))
        finally:
            writer.close()
            await writer.wait_closed()

    return asyncio.run(main())


def request_response_asyncio(port: int, n: int, size: int = 16) -> int:
    """Sequential ping-pong with asyncio streams: the asyncio baseline."""
    import asyncio

    payload = record(b"R" + b"x" * size)

    async def main() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for _ in range(n):
                writer.write(payload)
                (length,) = HEADER.unpack(await reader.readexactly(4))
                await reader.readexactly(length)
            return n
        finally:
            writer.close()
            await writer.wait_closed()

    return asyncio.run(main())


def stream_asyncio(port: int, n: int, size: int) -> int:
    """:func:`stream` over asyncio streams: reads of up to 256 KiB, records
    cut from them as :func:`records` does (the asyncio stream baseline)."""
    import asyncio

    async def main() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        writer.write(record(b"S" + STREAM_REQ.pack(n, size)))
        unpack = HEADER.unpack_from
        buf = b""
        pos = count = 0
        try:
            while count < n:
                chunk = await reader.read(256 * 1024)
                if not chunk:
                    break
                buf = buf[pos:] + chunk
                pos = 0
                end = len(buf)
                while end - pos >= 4:
                    (length,) = unpack(buf, pos)
                    if end - pos - 4 < length:
                        break
                    _ = buf[pos + 4 : pos + 4 + length]
                    pos += 4 + length
                    count += 1
            return count
        finally:
            writer.close()
            await writer.wait_closed()

    return asyncio.run(main())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        settle_allocator()
        serve(int(sys.argv[2]))
    else:
        sys.exit(__doc__)

"""Streaming servers under one raw client: how fast each serves a request-stream.

One client, the same for every server: plain Python on a blocking socket
(``raw_client``), which sends SETUP and a REQUEST_STREAM for ``--items``
items of ``--size`` bytes (all the credit up front) and reads the PAYLOAD
frames as they come: one length prefix and one header per frame, counting
items until the COMPLETE. Against it, each in its own process:

- ``sansrs``: ``python -m sansrs serve`` (the demo responder: the items come
  from the demo's generator, ``str(i).encode().zfill(size)``);
- ``raw``: a minimal server writing the same RSocket frames, pre-encoded
  (built before the client's clock starts, written in 256 KiB slices): what a
  server costs that does no work per item;
- ``rsocketpy``: rsocket-py 0.4.20 serving the same contract
  (``rsocketpy_peer.py``), with ``--rsocketpy-items`` items (it is slower;
  rates compare).

The servers take turns run by run; each figure is the median items/s, each
ratio the median of the per-round ratios against ``raw``.

    .venv/bin/python benchmarks/bench_stream_server.py --runs 5
    .venv/bin/python benchmarks/bench_stream_server.py --items 500000 --runs 3 --only sansrs raw
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tcp import server_process

from sansrs.rsocket import (
    FLAG_COMPLETE,
    FLAG_NEXT,
    FrameType,
    PayloadFrame,
    RequestStreamFrame,
    SetupFrame,
    decode_frame,
    encode_frame_prefixed,
)

HERE = Path(__file__).resolve().parent
PY = sys.executable
SERVERS = ("sansrs", "raw", "rsocketpy")
_PAYLOAD = FrameType.PAYLOAD
_ERROR = FrameType.ERROR


# -- the raw server ---------------------------------------------------------------


def _read_frames(sock: socket.socket, count: int) -> list[bytes]:
    """The first ``count`` frames the client sends (SETUP, REQUEST_STREAM)."""
    buf = b""
    frames: list[bytes] = []
    while len(frames) < count:
        while len(buf) >= 3 and len(buf) >= 3 + int.from_bytes(buf[:3], "big"):
            end = 3 + int.from_bytes(buf[:3], "big")
            frames.append(buf[3:end])
            buf = buf[end:]
        if len(frames) < count:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("client went away")
            buf += chunk
    return frames


_ENCODED: dict[tuple[int, int, int], bytes] = {}


def stream_bytes(stream_id: int, n: int, size: int) -> bytes:
    """What a responder writes for the stream: a PAYLOAD (NEXT) per item
    (the demo's items), then a PAYLOAD (COMPLETE). Built once per shape."""
    key = (stream_id, n, size)
    if key not in _ENCODED:
        parts = [
            encode_frame_prefixed(PayloadFrame(stream_id, str(i).encode().zfill(size), None,
                                               False, False, True))
            for i in range(n)
        ]
        parts.append(encode_frame_prefixed(PayloadFrame(stream_id, b"", None, False, True, False)))
        _ENCODED[key] = b"".join(parts)
    return _ENCODED[key]


def _serve_raw_connection(sock: socket.socket) -> None:
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        setup, request = (decode_frame(f) for f in _read_frames(sock, 2))
        assert isinstance(setup, SetupFrame) and isinstance(request, RequestStreamFrame)
        spec = json.loads(request.data)
        data = memoryview(stream_bytes(request.stream_id, spec["n"], spec["size"]))
        sock.sendall(b"\x00")  # ready: the client's clock starts at this byte
        for off in range(0, len(data), 256 * 1024):
            sock.sendall(data[off : off + 256 * 1024])
        try:
            while sock.recv(65536):  # until the client closes
                pass
        except OSError:
            pass


def serve_raw(n: int, size: int) -> None:
    stream_bytes(1, n, size)  # the frames a client will ask for, before READY
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"READY {listener.getsockname()[1]}", flush=True)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=_serve_raw_connection, args=(sock,), daemon=True).start()


# -- the raw client ---------------------------------------------------------------


def raw_client(port: int, n: int, size: int, raw_server: bool) -> tuple[int, float]:
    """(items, seconds) for one request-stream of ``n`` items."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        setup = SetupFrame(keepalive_interval=60_000, max_lifetime=180_000,
                           metadata_mime_type="application/octet-stream",
                           data_mime_type="application/octet-stream")
        request = RequestStreamFrame(1, 0x7FFFFFFF, json.dumps({"n": n, "size": size}).encode())
        start = time.perf_counter()
        sock.sendall(encode_frame_prefixed(setup) + encode_frame_prefixed(request))
        buf = b""
        if raw_server:  # the raw server says when its frames are ready
            while not buf:
                buf = sock.recv(1)
            buf = b""
            start = time.perf_counter()
        count = 0
        pos = 0
        recv = sock.recv
        while True:
            end = len(buf)
            while end - pos >= 9:
                stop = pos + 3 + (buf[pos] << 16 | buf[pos + 1] << 8 | buf[pos + 2])
                if stop > end:
                    break
                kind = buf[pos + 7] >> 2
                flags = (buf[pos + 7] & 3) << 8 | buf[pos + 8]
                if kind == _PAYLOAD:
                    if flags & FLAG_NEXT:
                        count += 1
                    if flags & FLAG_COMPLETE:
                        return count, time.perf_counter() - start
                elif kind == _ERROR:
                    raise RuntimeError(f"server error: {decode_frame(buf[pos + 3 : stop])}")
                pos = stop
            chunk = recv(1 << 18)
            if not chunk:
                raise ConnectionError(f"server closed after {count} items")
            buf = buf[pos:] + chunk
            pos = 0


# -- the runs ---------------------------------------------------------------------


def server_command(name: str, n: int, size: int) -> list[str]:
    if name == "sansrs":
        return [PY, "-m", "sansrs", "serve", "tcp://127.0.0.1:0"]
    if name == "rsocketpy":
        return [PY, str(HERE / "rsocketpy_peer.py"), "serve", "0"]
    return [PY, str(Path(__file__)), "_serve_raw", str(n), str(size)]


@contextmanager
def server(name: str, n: int, size: int) -> Iterator[int]:
    with server_process(server_command(name, n, size), name) as (port, _):
        yield port


def main() -> None:
    if sys.argv[1:2] == ["_serve_raw"]:
        serve_raw(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--rsocketpy-items", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--only", nargs="+", choices=SERVERS)
    args = parser.parse_args()
    names = list(args.only or SERVERS)
    counts = {s: args.rsocketpy_items if s == "rsocketpy" else args.items for s in names}
    rates: dict[str, list[float]] = {s: [] for s in names}
    with ExitStack() as stack:
        ports = {s: stack.enter_context(server(s, counts[s], args.size)) for s in names}
        for s in names:  # warm-up: imports, the raw server's frames, first connection
            raw_client(ports[s], min(counts[s], 1000) if s != "raw" else counts[s], args.size,
                       s == "raw")
        for i in range(args.runs):
            for s in names[i % len(names):] + names[: i % len(names)]:
                got, seconds = raw_client(ports[s], counts[s], args.size, s == "raw")
                if got != counts[s]:
                    raise RuntimeError(f"{s}: {got} of {counts[s]} items")
                rates[s].append(got / seconds)
            print(f"# run {i + 1}: " + ", ".join(f"{s} {rates[s][-1]:,.0f}/s" for s in names),
                  file=sys.stderr, flush=True)
    print(f"\nrequest-stream of {args.size}-byte items read by one raw client; medians of "
          f"{args.runs} runs; load average {os.getloadavg()[0]:.1f}\n")
    print("| server | items/s | vs raw server |")
    print("| --- | ---: | ---: |")
    for s in names:
        ratio = "-"
        if "raw" in rates and s != "raw":
            pairs = zip(rates[s], rates["raw"], strict=True)
            ratio = f"{statistics.median(a / b for a, b in pairs):.2f}x"
        print(f"| {s} | {statistics.median(rates[s]):,.0f} | {ratio} |")


if __name__ == "__main__":
    main()

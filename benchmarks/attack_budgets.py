"""The attacks of docs/security.md at full size, against a server process per
driver, with a well-behaved client busy on a second connection: what each
made the server spend (peak RSS, CPU), how long the good client waited at
worst, and whether the server served a new client afterwards.

    .venv/bin/python benchmarks/attack_budgets.py                  # every attack, every driver
    .venv/bin/python benchmarks/attack_budgets.py --drivers thread --attacks rsio_blobs,pings

The attack suite (tests/adapters/attacks) runs the same attacks, scaled to
prove the bounds in seconds; this script runs them at the sizes the threat
model names (10M fragments, 16 MiB SETUP trickled 4 KiB at a time, ...).
The server is tests/adapters/attacks/target.py (the harness lives with the
tests, hence the path below).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the attacks' harness is a module of the tests

from sansrs.rsio import ClientHello, Subscribe, encode_message  # noqa: E402
from sansrs.rsocket import (  # noqa: E402
    PayloadFrame,
    RequestFnfFrame,
    RequestResponseFrame,
    SetupFrame,
    encode_frame_prefixed,
)
from sansrs.streams import MAX_DEMAND  # noqa: E402
from tests.adapters.attacks.harness import (  # noqa: E402
    GoodClient,
    Target,
    raw,
    read_to_end,
    read_unacknowledged_then_vanish,
    send_until_closed,
    serves_a_new_client,
    write_certs,
)

SETUP = encode_frame_prefixed(
    SetupFrame(
        keepalive_interval=30_000,
        max_lifetime=600_000,
        metadata_mime_type="application/octet-stream",
        data_mime_type="application/octet-stream",
    )
)


def _chunks(frame: bytes, count: int, per_chunk: int = 8192) -> Iterator[bytes]:
    block = frame * per_chunk
    for _ in range(count // per_chunk):
        yield block


def rsio_blobs(t: Target) -> dict[str, Any]:
    """1,000 subscriptions to 3 MiB elements, unbounded demand, never read (10 s)."""
    subs = b"".join(
        encode_message(Subscribe("blobs/1000", sid, MAX_DEMAND)) for sid in range(1, 1001)
    )
    with raw(t, "rsio") as sock:
        sock.sendall(encode_message(ClientHello(0)) + subs)
        time.sleep(10)
    return {}


def fragments(t: Target) -> dict[str, Any]:
    """10M two-byte FOLLOWS fragments of one request, all sent."""
    frag = encode_frame_prefixed(PayloadFrame(1, b"ab", follows=True, next=True))
    with raw(t, "rsocket", timeout=120) as sock:
        sock.sendall(SETUP + encode_frame_prefixed(RequestResponseFrame(1, b"ab", follows=True)))
        closed = send_until_closed(sock, _chunks(frag, 10_000_000))
        if closed:  # below min_mean_fragment_size: the connection failed early
            read_to_end(sock)
        else:
            sock.sendall(encode_frame_prefixed(RequestResponseFrame(3, b"after")))
            sock.recv(65536)  # the answers (REJECTED for 1, then 3's): all was parsed
    return {"closed": closed}


def fnf_reassemblies(t: Target) -> dict[str, Any]:
    """1M fire-and-forgets, each with F set (a new reassembly each)."""
    frames = (
        b"".join(
            encode_frame_prefixed(RequestFnfFrame(sid, b"x", follows=True))
            for sid in range(start, start + 20_000, 2)
        )
        for start in range(1, 2_000_000, 20_000)
    )
    with raw(t, "rsocket", timeout=120) as sock:
        sock.sendall(SETUP)
        closed = send_until_closed(sock, frames)
        read_to_end(sock)
    return {"closed": closed}


def unfinished(t: Target) -> dict[str, Any]:
    """20 requests of 16 MiB (in 1 MiB fragments), none finished."""
    mib = b"r" * (1024 * 1024 - 64)

    def requests() -> Iterator[bytes]:
        for i in range(20):
            yield encode_frame_prefixed(RequestResponseFrame(2 * i + 1, mib, follows=True))
            for _ in range(15):
                yield encode_frame_prefixed(PayloadFrame(2 * i + 1, mib, follows=True, next=True))

    with raw(t, "rsocket", timeout=120) as sock:
        sock.sendall(SETUP)
        closed = send_until_closed(sock, requests())
        read_to_end(sock)
    return {"closed": closed}


def trickled_setup(t: Target) -> dict[str, Any]:
    """A 16 MiB SETUP sent 4 KiB at a time, 1 ms apart (so each piece is
    read on its own), then a request."""
    setup = encode_frame_prefixed(
        SetupFrame(
            keepalive_interval=30_000,
            max_lifetime=600_000,
            metadata_mime_type="a",
            data_mime_type="b",
            data=b"s" * (16 * 1024 * 1024 - 100),
        )
    )
    with raw(t, "rsocket", timeout=300) as sock:
        view = memoryview(setup)
        for off in range(0, len(setup), 4096):
            sock.sendall(view[off : off + 4096])
            time.sleep(0.001)
        sock.sendall(encode_frame_prefixed(RequestResponseFrame(1, b"after")))
        answered = bool(sock.recv(65536))
    return {"answered": answered}


def pings(t: Target) -> dict[str, Any]:
    """1M WebSocket Pings (125-byte payloads), Pongs never read."""
    key = b"\x01\x02\x03\x04"
    ping = bytes([0x89, 0x80 | 125]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(b"p" * 125))
    with raw(t, "rsocket-ws", timeout=300) as sock:
        sock.sendall(
            b"GET /rsocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        sock.recv(4096)
        setup = SETUP[3:]  # one frame per message: no length prefix
        masked = bytes(b ^ key[i % 4] for i, b in enumerate(setup))
        sock.sendall(bytes([0x82, 0x80 | len(setup)]) + key + masked)
        for _ in range(100):
            sock.sendall(ping * 10_000)
    return {}


def resume(t: Target) -> dict[str, Any]:
    """48 resumable sessions read 7.3 MiB each without acknowledging, then vanish."""
    for _ in range(48):
        read_unacknowledged_then_vanish(t, "rsocket-resume", 7_600_000)
    return {}


def idle(t: Target) -> dict[str, Any]:
    """2,000 idle connections (the attack server admits max_connections=100)."""
    threads = t.threads()
    socks = []
    for _ in range(2000):
        with contextlib.suppress(OSError):
            socks.append(raw(t, "rsio"))
    time.sleep(1)
    held = {"threads_added": t.threads() - threads, "descriptors": t.descriptors()}
    for s in socks:
        s.close()
    return held


ATTACKS: dict[str, tuple[str, Callable[[Target], dict[str, Any]]]] = {
    "rsio_blobs": ("rsio", rsio_blobs),
    "fragments": ("rsocket", fragments),
    "fnf_reassemblies": ("rsocket", fnf_reassemblies),
    "unfinished": ("rsocket", unfinished),
    "trickled_setup": ("rsocket", trickled_setup),
    "pings": ("rsocket-ws", pings),
    "resume": ("rsocket-resume", resume),
    "idle": ("rsocket", idle),
}


def fd_limit(driver: str, certs: Path) -> dict[str, Any]:
    """The server at its descriptor limit (64) for 6 s, 200 connections waiting."""
    t = Target(driver, certs, "--nofile", "64", "--only", "rsocket")
    good = GoodClient(t, "rsocket")
    hogs = []
    for _ in range(200):
        with contextlib.suppress(OSError):
            hogs.append(raw(t, "rsocket"))
    cpu, started = t.cpu_seconds(), time.monotonic()
    time.sleep(6)
    busy = (t.cpu_seconds() - cpu) / (time.monotonic() - started)
    for s in hogs:
        s.close()
    stall = good.worst
    good.check()
    serves_a_new_client(t, "rsocket")
    log = t.stop_and_read_log()
    return {"cpu_share": round(busy, 3), "log_bytes": len(log), "worst_stall_s": round(stall, 3)}


def run(driver: str, names: list[str], certs: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        if name == "fd_limit":
            results[name] = fd_limit(driver, certs)
            print(driver, name, results[name], flush=True)
            continue
        where, attack = ATTACKS[name]
        extra_args = ("--handshake-timeout", "120") if name == "trickled_setup" else ()
        t = Target(driver, certs, *extra_args)  # a fresh process: its peak is this attack's
        if where not in t.urls:
            t.stop_and_read_log()
            results[name] = {"skipped": f"no {where} server under {driver}"}
            continue
        good = GoodClient(t, "rsocket" if where == "rsocket-resume" else where)
        base = t.rss_mib()
        cpu, started = t.cpu_seconds(), time.monotonic()
        extra = attack(t)
        elapsed = time.monotonic() - started
        stall = max(good.worst, time.monotonic() - good._last)
        good.check()
        serves_a_new_client(t, "rsocket" if where == "rsocket-resume" else where)
        results[name] = {
            "peak_rss_mib": round(t.peak_mib(), 1),
            "rss_before_mib": round(base, 1),
            "cpu_s": round(t.cpu_seconds() - cpu, 2),
            "wall_s": round(elapsed, 2),
            "worst_stall_s": round(stall, 3),
            **extra,
        }
        t.stop_and_read_log()
        print(driver, name, results[name], flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drivers", default="thread,selector,asyncio")
    parser.add_argument("--attacks", default=",".join([*ATTACKS, "fd_limit"]))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        certs = write_certs(Path(tmp))
        out = {d: run(d, args.attacks.split(","), certs) for d in args.drivers.split(",")}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""``make demo-rsocket``: every RSocket interaction model, end to end.

(``make demo`` runs the main job, the Spark pipeline: ``examples/pipeline.py``.)
A demo responder served over TCP on 127.0.0.1 (the same one ``sansrs serve``
runs), and a synchronous client that exercises every interaction model and
checks that nothing was lost or duplicated. Exit status 0 only if every
check passes.

    python examples/demo.py [--items N] [--size S] [--channel N]
"""

from __future__ import annotations

import argparse
import sys
import time

from sansrs.adapters.rsocket import RSocketError, connect, serve
from sansrs.adapters.rsocket.demo import DemoHandler


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        mark = "ok  " if ok else "FAIL"
        print(f"  [{mark}] {name}{': ' + detail if detail else ''}", flush=True)
        if not ok:
            self.failed.append(name)


def run(items: int, size: int, channel_items: int) -> int:
    checks = Checks()
    started = time.perf_counter()
    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler) as server:
        print(f"demo responder listening on {server.url}", flush=True)
        # The demo's metadata is raw bytes (b"meta", b"tenant=demo"): declared so,
        # connect's default being composite metadata (docs/rsocket.md, Metadata).
        with connect(
            server.url,
            keepalive_interval=5.0,
            max_lifetime=30.0,
            metadata_mime_type="application/octet-stream",
        ) as client:
            print("request-response", flush=True)
            reply = client.request_response(b"hello", b"meta", timeout=10)
            checks.check(
                "echo data and metadata",
                reply is not None and reply.data == b"hello" and reply.metadata == b"meta",
            )
            try:
                client.request_response(b"error please", timeout=10)
                checks.check("application error", False, "no error raised")
            except RSocketError as exc:
                checks.check(
                    "application error",
                    exc.error_code == 0x201 and exc.message == "rejected: error please",
                    f"{exc.error_code:#x} {exc.message!r}",
                )

            print("fire-and-forget and metadata push", flush=True)
            for _ in range(1000):
                client.fire_and_forget(b"ping")
            client.metadata_push(b"tenant=demo")
            # Requests on one connection are handled in order, so these see
            # every fire-and-forget and push sent before them.
            count = client.request_response(b"fnf-count", timeout=10)
            checks.check("1000 fire-and-forgets counted", count is not None
                         and count.data == b"1000", count.data.decode() if count else "")
            last = client.request_response(b"mp-last", timeout=10)
            checks.check("metadata push recorded", last is not None
                         and last.data == b"last=tenant=demo")

            print(f"request-stream: {items:,} items of {size} bytes, prefetch 256", flush=True)
            t0 = time.perf_counter()
            expected = 0
            in_order = True
            request = b'{"n": %d, "size": %d}' % (items, size)
            for payload in client.request_stream(request, prefetch=256, timeout=30):
                if payload.data != b"%0*d" % (size, expected):
                    in_order = False
                expected += 1
                if expected % max(1, items // 5) == 0:
                    rate = expected / (time.perf_counter() - t0)
                    print(f"    {expected:>10,} items  {rate:,.0f} items/s", flush=True)
            stream_seconds = time.perf_counter() - t0
            checks.check("every stream item exactly once, in order",
                         expected == items and in_order, f"{expected:,} received")

            print(f"request-channel: {channel_items:,} items echoed", flush=True)
            outbound = [b"c%d" % i for i in range(channel_items)]
            echoed = [p.data for p in client.request_channel(outbound, prefetch=64)]
            checks.check("channel echo complete and in order", echoed == outbound,
                         f"{len(echoed):,} of {len(outbound):,}")

            stats = client.request_response(b"stats", timeout=10)
            print(f"responder stats: {stats.data.decode() if stats else '?'}", flush=True)

    total = time.perf_counter() - started
    print()
    print("summary")
    print(f"  stream items in : {items:,}   out: {expected:,}   "
          f"lost: {max(0, items - expected):,}   extra: {max(0, expected - items):,}")
    print(f"  stream throughput: {items / stream_seconds:,.0f} items/s "
          f"({stream_seconds:.2f} s)")
    print(f"  channel items    : {len(outbound):,} sent, {len(echoed):,} echoed")
    print(f"  wall time        : {total:.2f} s")
    if checks.failed:
        print(f"FAILED: {', '.join(checks.failed)}")
        return 1
    print("all checks passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Every RSocket interaction model against the demo responder, checked."
    )
    parser.add_argument("--items", type=int, default=200_000, help="stream length")
    parser.add_argument("--size", type=int, default=16, help="stream item size in bytes")
    parser.add_argument("--channel", type=int, default=10_000, help="channel length")
    args = parser.parse_args(argv)
    return run(args.items, args.size, args.channel)


if __name__ == "__main__":
    sys.exit(main())

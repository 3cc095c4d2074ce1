"""Start the demo responder in-process, then consume a stream with a prefetch
window, make a request-response and a channel. Run:

    .venv/bin/python examples/stream_client.py
"""

from __future__ import annotations

import json

from sansrs.adapters.rsocket import RSocketError, connect, serve
from sansrs.adapters.rsocket.demo import DemoHandler


def main() -> None:
    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler) as server:
        print(f"demo responder on {server.url}")
        with connect(server.url) as client:
            print("request-response:", client.request_response(b"hello", b"meta", timeout=5))
            try:
                client.request_response(b"error: on purpose", timeout=5)
            except RSocketError as exc:
                print("error reply:", exc)
            request = json.dumps({"n": 100_000, "size": 16})
            total = 0
            with client.request_stream(request, prefetch=256, timeout=5) as items:
                for payload in items:  # REQUEST_N(128) goes out every 128 items
                    total += len(payload.data)
            print(f"stream: {total} bytes in 100000 items")
            with client.request_channel([b"a", b"b", b"c"], timeout=5) as echoed:
                print("channel echo:", [p.data for p in echoed])


if __name__ == "__main__":
    main()

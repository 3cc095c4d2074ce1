"""The server under attack, in a process of its own (so that its memory, CPU
time, threads and descriptors are its own and measurable through /proc):

    python -m tests.adapters.attacks.target --driver thread|selector|asyncio
        --certs DIR [--nofile N] [--only rsocket] [--handshake-timeout S]

Serves, on 127.0.0.1, RSocket over TCP (twice: once with a 1 MiB frame
limit), WebSocket and TLS (the demo responder), resumable RSocket over TCP
(thread and selector drivers: the resumable server has no asyncio form),
rsio over TCP (the demo publishers)
and the Ditto protocol over WebSocket (a small in-memory history), all with
:data:`CONFIG`. Prints one JSON line of their URLs, then serves until its
standard input ends. ``--nofile``: the process's descriptor limit (the
out-of-descriptors attack); ``--only rsocket``: just RSocket over TCP;
``--handshake-timeout``: instead of CONFIG's (a benchmark trickling a SETUP
at the pace of the original attack).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

from sansrs.adapters import ditto, rsio, rsocket
from sansrs.adapters.ditto import aio as ditto_aio
from sansrs.adapters.ditto.history import InMemoryHistory
from sansrs.adapters.drive import Loop, LoopConfig
from sansrs.adapters.rsio import aio as rsio_aio
from sansrs.adapters.rsio.demo import demo_publishers
from sansrs.adapters.rsocket import aio as rsocket_aio
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.transport.tls import server_context

#: The attacked servers' limits: the defaults, but a connection limit the
#: idle-connection attack reaches quickly and a handshake timeout the
#: slow-handshake attacks need not wait long for.
CONFIG = LoopConfig(max_connections=100, handshake_timeout=2.0)

#: RSocket frames above this are refused (the oversized-length attack).
MAX_FRAME = 1024 * 1024
THING = "org.sansrs.attack:thing"
TCP = "tcp://127.0.0.1:0"


def history() -> InMemoryHistory:
    return InMemoryHistory(
        {
            "topic": "org.sansrs.attack/thing/things/twin/events/modified",
            "headers": {},
            "path": "/attributes/n",
            "value": i,
            "revision": i,
        }
        for i in range(1, 21)
    )


def serve_sync(driver: str, certs: Path, only: str | None) -> tuple[dict[str, str], list[Any]]:
    loop = Loop(CONFIG, name="attack-target").start() if driver == "selector" else None
    options: dict[str, Any] = {"loop": loop} if loop is not None else {"loop_config": CONFIG}
    servers: list[Any] = []
    urls: dict[str, str] = {}

    def add(name: str, server: Any) -> None:
        servers.append(server)
        urls[name] = server.url

    add("rsocket", rsocket.serve(TCP, handler_factory=DemoHandler, **options))
    if only is None:
        add("rsocket-small", rsocket.serve(TCP, handler_factory=DemoHandler,
                                           max_frame_size=MAX_FRAME, **options))
        tls = server_context(str(certs / "server.pem"))
        add("rsocket-tls", rsocket.serve("tls://127.0.0.1:0", handler_factory=DemoHandler,
                                         ssl_context=tls, **options))
        add("rsocket-ws", rsocket.serve("ws://127.0.0.1:0/rsocket", handler_factory=DemoHandler,
                                        **options))
        add("rsocket-resume", rsocket.serve_resumable(
            TCP, DemoHandler(), loop=loop if loop is not None else "thread"
        ))
        add("rsio", rsio.serve(TCP, demo_publishers, **options))
        add("ditto", ditto.serve("ws://127.0.0.1:0/ws/2", history(), **options))
    return urls, servers


async def serve_async(certs: Path, only: str | None) -> dict[str, str]:
    urls: dict[str, str] = {}
    server: Any = await rsocket_aio.serve(TCP, handler_factory=DemoHandler, loop_config=CONFIG)
    urls["rsocket"] = server.url
    if only is None:
        server = await rsocket_aio.serve(
            TCP, handler_factory=DemoHandler, loop_config=CONFIG, max_frame_size=MAX_FRAME
        )
        urls["rsocket-small"] = server.url
        tls = server_context(str(certs / "server.pem"))
        server = await rsocket_aio.serve(
            "tls://127.0.0.1:0", handler_factory=DemoHandler, loop_config=CONFIG, ssl_context=tls
        )
        urls["rsocket-tls"] = server.url
        server = await rsocket_aio.serve(
            "ws://127.0.0.1:0/rsocket", handler_factory=DemoHandler, loop_config=CONFIG
        )
        urls["rsocket-ws"] = server.url
        urls["rsio"] = (await rsio_aio.serve(TCP, demo_publishers, loop_config=CONFIG)).url
        server = await ditto_aio.serve("ws://127.0.0.1:0/ws/2", history(), loop_config=CONFIG)
        urls["ditto"] = server.url
    return urls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", choices=["thread", "selector", "asyncio"], required=True)
    parser.add_argument("--certs", type=Path, required=True)
    parser.add_argument("--nofile", type=int)
    parser.add_argument("--only", choices=["rsocket"])
    parser.add_argument("--handshake-timeout", type=float)
    args = parser.parse_args()
    if args.handshake_timeout is not None:
        global CONFIG
        CONFIG = dataclasses.replace(CONFIG, handshake_timeout=args.handshake_timeout)
    if args.nofile is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, hard))
    if args.driver == "asyncio":
        loop = asyncio.new_event_loop()
        urls = loop.run_until_complete(serve_async(args.certs, args.only))
        loop.add_reader(sys.stdin.fileno(), loop.stop)  # stdin readable: EOF, stop
        print(json.dumps(urls), flush=True)
        loop.run_forever()
    else:
        urls, _servers = serve_sync(args.driver, args.certs, args.only)
        print(json.dumps(urls), flush=True)
        sys.stdin.read()
    os._exit(0)  # nothing to tidy: the test is done with us


if __name__ == "__main__":
    main()

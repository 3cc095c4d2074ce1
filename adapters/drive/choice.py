"""Which driver runs a connection, chosen the same way by every protocol's
synchronous API (``rsocket``, ``rsio``, ``ditto``).

``loop=`` takes ``"thread"`` (the default: a :class:`~.threads.ConnectionThread`
per connection, and an accept thread for a server), ``"selector"`` (the
process-wide :func:`~.selector.default_loop`), a :class:`~.selector.Loop` of
the application's (one thread for many connections), or ``None`` (the same as
``"thread"``). Nothing here knows a wire protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..transport import Listener, Transport
from .engine import Engine
from .selector import Loop, LoopConnection, LoopServer, default_loop
from .threads import ConnectionThread, ServerThread

__all__ = ["LoopChoice", "message_framed", "new_acceptor", "new_driver", "pick_loop"]

LoopChoice = str | Loop | None


def pick_loop(loop: LoopChoice) -> Loop | None:
    """``"thread"`` or ``None`` -> None (a thread per connection),
    ``"selector"`` -> the process-wide selector loop, a Loop -> itself."""
    if isinstance(loop, Loop):
        return loop
    if loop is None or loop == "thread":
        return None
    if loop == "selector":
        return default_loop()
    raise ValueError(f"loop must be 'thread', 'selector' or a selector.Loop, not {loop!r}")


def new_driver(
    loop: Loop | None,
    transport: Transport,
    engine: Engine,
    name: str,
    on_exit: Callable[[Any], None] | None = None,
) -> ConnectionThread | LoopConnection:
    """The (not yet started) driver of one connection: its own thread when
    ``loop`` is None (``name`` names the thread), else a connection on ``loop``."""
    if loop is None:
        return ConnectionThread(transport, engine, name=name, on_exit=on_exit)
    return loop.add_connection(transport, engine, on_exit=on_exit)


def new_acceptor(
    loop: Loop | None,
    listener: Listener,
    make_connection: Callable[[Transport], ConnectionThread | LoopConnection],
) -> LoopServer:
    """The (not yet started) acceptor of a server: its own thread when ``loop``
    is None, else accepting on ``loop``."""
    if loop is None:
        return ServerThread(listener, make_connection)
    return LoopServer(loop, listener, make_connection)


def message_framed(transport: Transport) -> bool:
    """A message transport (WebSocket) says so; byte streams have no such flag."""
    return bool(getattr(transport, "message_framed", False))

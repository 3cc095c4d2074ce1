"""Drivers: what moves bytes between transports and protocol engines.

Protocol-agnostic. Every protocol engine implements :class:`Engine`; every
driver runs any engine through it:

- :class:`ConnectionThread` / :class:`ServerThread`: a thread per connection
  (a :class:`Loop` holding one connection);
- :class:`Loop`: one ``selectors`` thread for many connections (the model for
  plugging a core into a custom event loop);
- :class:`AsyncioReactor`: a running asyncio event loop (each protocol's
  ``aio`` module is its asyncio API).

All of them run :class:`LoopConnection`, the one turn (read, engine, pump,
write, timeouts, close), on a :class:`Reactor`; :mod:`.endpoints` opens
connections and servers on any of them for every protocol.

:mod:`.queues` holds the bounded, blocking-free queues between the thread
that drives a connection and application threads; :mod:`.streams` the
protocol-neutral stream pieces (prefetching iterators, credit-bound
outbound streams, Publisher adapters).
"""

from .aio import AsyncioReactor, AsyncPeer, AsyncServer, AsyncStream
from .config import LoopConfig
from .connection import LoopConnection
from .endpoints import LoopChoice, message_framed, new_acceptor, new_driver, pick_loop
from .engine import Call, Driver, Engine, Startable
from .errors import ConnectionClosed, LoopClosed
from .listener import LoopServer
from .peer import DrivenPeer, ListeningServer, PeersServer
from .reactor import Reactor
from .selector import Loop, default_loop
from .threads import ConnectionThread, ServerThread

__all__ = [
    "AsyncPeer",
    "AsyncServer",
    "AsyncStream",
    "AsyncioReactor",
    "Call",
    "ConnectionClosed",
    "ConnectionThread",
    "DrivenPeer",
    "Driver",
    "Engine",
    "ListeningServer",
    "Loop",
    "LoopChoice",
    "LoopClosed",
    "LoopConfig",
    "LoopConnection",
    "LoopServer",
    "PeersServer",
    "Reactor",
    "ServerThread",
    "Startable",
    "default_loop",
    "message_framed",
    "new_acceptor",
    "new_driver",
    "pick_loop",
]

"""Drivers: what moves bytes between transports and protocol engines.

Protocol-agnostic. Every protocol engine implements :class:`Engine`; every
driver runs any engine through it:

- :class:`ConnectionThread` / :class:`ServerThread`: a thread per connection
  (a :class:`Loop` holding one connection);
- :class:`Loop`: one ``selectors`` thread for many connections (the model for
  plugging a core into a custom event loop);
- asyncio (see each protocol's ``aio`` module).

:mod:`.queues` holds the bounded, blocking-free queues between the thread
that drives a connection and application threads; :mod:`.streams` the
protocol-neutral stream pieces (prefetching iterators, credit-bound
outbound streams, Publisher adapters).
"""

from .choice import LoopChoice, message_framed, new_acceptor, new_driver, pick_loop
from .config import LoopConfig
from .engine import Call, Driver, Engine, Startable
from .errors import ConnectionClosed, LoopClosed
from .peer import DrivenPeer, ListeningServer, PeersServer
from .selector import Loop, LoopConnection, LoopServer, default_loop
from .threads import ConnectionThread, ServerThread

__all__ = [
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
    "ServerThread",
    "Startable",
    "default_loop",
    "message_framed",
    "new_acceptor",
    "new_driver",
    "pick_loop",
]

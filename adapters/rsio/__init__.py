"""reactive-streams-io over sockets, threads and loops: the public API.

    from sansrs.adapters.rsio import connect, serve

    with serve("tcp://127.0.0.1:0", {"numbers": publisher}) as server:
        with connect(server.url) as client, client.subscribe("numbers") as items:
            for item in items: ...

- :func:`connect` / :class:`Client`, :func:`serve` / :class:`Server`: the
  synchronous API; both ends publish and subscribe. :class:`RsioPeer` is one
  connection: :meth:`~RsioPeer.subscribe` (an iterator),
  :meth:`~RsioPeer.subscribe_packed` (batches of fixed-size elements),
  :meth:`~RsioPeer.publisher` (a Reactive Streams Publisher).
- :mod:`sansrs.adapters.rsio.aio`: the same under asyncio.
- :class:`FixedSizePublisher`: publish fixed-size elements (read with
  ``subscribe_packed``).
- :class:`RsioError` (the peer's publisher signalled onError) and
  :class:`~sansrs.adapters.drive.ConnectionClosed` (the connection is gone).

The wire protocol is specified in ``docs/protocols/rsio.md``.
"""

from ..drive.errors import ConnectionClosed
from .client import Client, connect
from .errors import RsioError
from .fixed import FixedSizePublisher
from .peer import DEFAULT_PACKED_PREFETCH, DEFAULT_PREFETCH, PackedIterator, RsioPeer
from .server import Server, serve
from .types import ElementReader, Publishers

__all__ = [
    "DEFAULT_PACKED_PREFETCH",
    "DEFAULT_PREFETCH",
    "Client",
    "ConnectionClosed",
    "ElementReader",
    "FixedSizePublisher",
    "PackedIterator",
    "Publishers",
    "RsioError",
    "RsioPeer",
    "Server",
    "connect",
    "serve",
]

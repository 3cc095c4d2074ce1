"""sansrs: Reactive Streams across process and network boundaries.

The core (this package) is sans-IO: bytes in, events out; calls in, bytes out.
Drivers that touch sockets, threads, selectors and Spark live in
``sansrs.adapters``.
"""

from ._errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__version__ = "0.1.0"

__all__ = [
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "__version__",
]

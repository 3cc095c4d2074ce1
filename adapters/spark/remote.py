"""Client side of the Spark wire formats, independent of Spark: open one
partition's share of a remote stream, write one partition to a sink, commit
or abort a job. The partition functions and the data source are thin layers
over these.

Remote sources are chosen by URL scheme through :data:`STREAM_OPENERS`, so a
source speaking another protocol (a Ditto history subscription over
WebSocket, say) plugs in with :func:`register_stream_opener` without touching
the readers or the data source.

Every connection to a service carries its :class:`~.auth.Access`: the
service's secret in the SETUP (from ``secret=``, the URL, or
``$SANSRS_SPARK_SECRET``) and, for ``tls://`` URLs, the TLS settings.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..drive.errors import ConnectionClosed
from ..rsocket.client import Client, connect
from ..rsocket.errors import RSocketError
from ..rsocket.types import Payload
from ..transport.urls import parse_url
from ._arrow import encode_rows_arrow
from ._wire import (
    ENCODINGS,
    Ack,
    JobRequest,
    OffsetQuery,
    ReadRequest,
    WriteHeader,
    decode_rows,
    encode_rows,
)
from .auth import Access, split_secret
from .errors import SinkError, SourceError

__all__ = [
    "RSOCKET_SCHEMES",
    "STREAM_OPENERS",
    "StreamOpener",
    "WriteTarget",
    "commit_job",
    "connect_service",
    "default_prefetch",
    "latest_offset",
    "open_partition_stream",
    "register_stream_opener",
    "write_partition",
]

#: Seconds without progress after which a read or write gives up (a stalled
#: remote side must not hang a Spark task forever).
DEFAULT_TIMEOUT = 60.0
#: RSocket connection options for Spark tasks: keepalive notices a dead peer;
#: the service's metadata (what a request names) is its own raw bytes.
CONNECTION_OPTIONS: dict[str, Any] = {
    "keepalive_interval": 5.0,
    "max_lifetime": 30.0,
    "metadata_mime_type": "application/octet-stream",
}
#: URL schemes the services are reached on (RSocket over TCP, TLS, Unix sockets).
RSOCKET_SCHEMES = ("tcp", "tls", "unix")


def connect_service(
    url: str, timeout: float = DEFAULT_TIMEOUT, access: Access | None = None
) -> Client:
    """An RSocket connection to the Spark service at ``url`` (which may
    carry the secret, as ``server.url`` does), authenticated and over TLS as
    ``access`` says: for speaking the wire formats directly."""
    clean, resolved = Access.resolve(
        url, access.secret if access else None, access.tls if access else None
    )
    options = {**CONNECTION_OPTIONS, **resolved.connect_options(clean)}
    return connect(clean, connect_timeout=timeout, **options)


# -- reads ----------------------------------------------------------------

#: ``(url, request, prefetch, timeout) -> iterator of row lists``; openers of
#: authenticated or TLS services also take ``access=`` (an :class:`Access`).
StreamOpener = Callable[..., Iterator[list[Any]]]


# The openers share StreamOpener's signature by design.
def _rsocket_stream(
    url: str,
    request: ReadRequest,
    prefetch: int,
    timeout: float,
    access: Access | None = None,
) -> Iterator[list[Any]]:
    """One partition's share over RSocket: REQUEST_STREAM, ``prefetch`` row
    batches requested ahead and replenished as they are consumed."""
    where = f"source {split_secret(url)[0]} route {request.route!r} partition {request.partition}"
    try:
        with connect_service(url, timeout, access) as client:
            stream = client.request_stream(request.to_bytes(), prefetch=prefetch, timeout=timeout)
            with stream:
                for payload in stream:
                    yield decode_rows(payload.data)
    except RSocketError as exc:
        raise SourceError(f"{where}: {exc.message}") from None
    # The same types, saying which read failed (a task's error is read on
    # the driver, far from the executor that raised it).
    except ConnectionClosed as exc:
        raise ConnectionClosed(f"{where}: {exc}") from exc
    except TimeoutError as exc:
        raise TimeoutError(f"{where}: {exc}") from None


def _ditto_stream(
    url: str,
    request: ReadRequest,
    prefetch: int,
    timeout: float,
    access: Access | None = None,
    columns: Collection[str] | None = None,
) -> Iterator[list[Any]]:
    """Ditto history over WebSocket (:mod:`.ditto`, imported only when used:
    it needs the ``ws`` extra). Ditto authenticates by its own options
    (``user`` / ``password`` / ``token``): of ``access`` only the TLS
    settings are used (``wss://``)."""
    from .ditto import open_ditto_stream

    tls = access.tls if access is not None else None
    return open_ditto_stream(url, request, prefetch, timeout, columns=columns, tls=tls)


STREAM_OPENERS: dict[str, StreamOpener] = {
    **dict.fromkeys(RSOCKET_SCHEMES, _rsocket_stream),
    "ws": _ditto_stream,
    "wss": _ditto_stream,
}

#: ``prefetch`` counts payloads (row batches) over RSocket but events over
#: Ditto, where one event is one demanded item: its default is larger (1,024:
#: one ``request`` round per 512 events; 256 cost both processes more CPU
#: per event, docs/performance.md "Ditto history into Spark").
DEFAULT_PREFETCH = {"ws": 1024, "wss": 1024}


def default_prefetch(url: str) -> int:
    """The reader's default ``prefetch`` for ``url``'s scheme."""
    return DEFAULT_PREFETCH.get(url.split("://", 1)[0], 8)


def register_stream_opener(scheme: str, opener: StreamOpener) -> None:
    """Read ``scheme://`` URLs with ``opener`` (for example a Ditto source)."""
    STREAM_OPENERS[scheme] = opener


def open_partition_stream(
    url: str,
    route: str,
    partition: int,
    partitions: int,
    options: Mapping[str, Any] | None = None,
    *,
    prefetch: int = 8,
    timeout: float = DEFAULT_TIMEOUT,
    access: Access | None = None,
    columns: Collection[str] | None = None,
) -> Iterator[list[Any]]:
    """Row batches of partition ``partition`` of ``partitions`` of ``route``;
    ``access``: the service's secret and TLS settings (default: the secret
    the URL carries, or ``$SANSRS_SPARK_SECRET``). ``columns``: the only
    ones the caller reads, a hint (the Ditto reader then skips writing the
    value's JSON text unless ``value`` is one of them); rows may hold more."""
    scheme = _scheme(url)
    opener = STREAM_OPENERS.get(scheme)
    if opener is None:
        parse_url(url)  # raises the usual error for an unknown scheme
        raise ValueError(f"no Spark stream reader for {scheme}:// URLs")
    request = _read_request(route, partition, partitions, options)
    if opener is _ditto_stream and columns is not None:
        return _ditto_stream(url, request, prefetch, timeout, access, columns=columns)
    if access is None:
        return opener(url, request, prefetch, timeout)
    return opener(url, request, prefetch, timeout, access=access)


def open_partition_columns(
    url: str,
    route: str,
    partition: int,
    partitions: int,
    options: Mapping[str, Any] | None,
    *,
    prefetch: int,
    timeout: float,
    fields: Sequence[str],
    access: Access | None = None,
) -> Iterator[dict[str, list[Any]]] | None:
    """:func:`open_partition_stream` as column batches (``fields``: a list
    of values each) for the sources that build those without rows (the
    Ditto reader: each event would otherwise become a dict first); None for
    the others. ``access``: its TLS settings are used for ``wss://``."""
    if STREAM_OPENERS.get(_scheme(url)) is not _ditto_stream:
        return None
    from .ditto import open_ditto_columns

    request = _read_request(route, partition, partitions, options)
    tls = access.tls if access is not None else None
    return open_ditto_columns(url, request, prefetch, timeout, fields, tls)


def _scheme(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else ""


def _read_request(
    route: str, partition: int, partitions: int, options: Mapping[str, Any] | None
) -> ReadRequest:
    return ReadRequest(
        route=route, partition=partition, partitions=partitions, options=dict(options or {})
    )


# -- writes ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTarget:
    """Where and how partitions are written; picklable (it travels to tasks).

    ``write`` names this write (one per ``partition_writer`` / ``save``), so
    that retried attempts of a partition are recognised by the sink;
    ``owner`` is the write's private token: the sink accepts more partitions,
    the job commit and the abort of a write only with the token its first
    partition came with (both fresh random values unless given). ``access``:
    the service's secret and TLS settings (default: those ``url`` carries)."""

    url: str = field(repr=False)  # may carry the secret: see ``address``
    route: str
    app: str = ""
    write: str = ""
    commit: str = "partition"
    rows_per_payload: int = 1000
    bytes_per_payload: int = 256 * 1024
    timeout: float = DEFAULT_TIMEOUT
    encoding: str = "jsonl"
    owner: str = field(default="", repr=False)
    access: Access | None = None

    def __post_init__(self) -> None:
        if not self.write:
            object.__setattr__(self, "write", uuid.uuid4().hex)
        if not self.owner:
            object.__setattr__(self, "owner", uuid.uuid4().hex)
        if self.rows_per_payload <= 0 or self.bytes_per_payload <= 0:
            raise ValueError("rows_per_payload and bytes_per_payload must be positive")
        if self.timeout <= 0:
            raise ValueError("timeout must be positive")
        if self.commit not in ("partition", "job"):
            raise ValueError(f"commit must be 'partition' or 'job', not {self.commit!r}")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, not {self.encoding!r}")

    @property
    def address(self) -> str:
        """``url`` without the secret it may carry (for messages and logs)."""
        return split_secret(self.url)[0]


class _Progress:
    """What the channel's worker thread reports to the waiting task thread.
    ``busy``: it is producing rows (the job's own pace, never a stall);
    ``last``: when it last stopped or started waiting for the sink."""

    __slots__ = ("busy", "error", "last", "rows")

    def __init__(self) -> None:
        self.rows = 0
        self.busy = True
        self.last = time.monotonic()
        self.error: BaseException | None = None


def _counted(batches: Iterator[bytes]) -> Iterator[tuple[bytes, int]]:
    for batch in batches:
        yield batch, batch.count(b"\n")


def write_partition(
    target: WriteTarget,
    rows: Iterable[Any],
    *,
    partition: int,
    attempt: int = 0,
    stage: int = -1,
    task: int = -1,
    write: str | None = None,
) -> Ack:
    """Stream ``rows`` to the sink as one REQUEST_CHANNEL and return its ack
    (``write``: the write id to use instead of ``target.write``).

    Rows are pulled (and encoded) only as the sink grants credit, so memory
    stays flat and a slow sink slows the caller. Raises the rows iterator's
    own exception if it fails, :class:`SinkError` if the sink refuses,
    :class:`TimeoutError` if the sink grants no credit (or, once everything is
    sent, sends no ack) for ``target.timeout`` seconds; time the rows
    iterator takes to produce rows never counts.
    """
    header = WriteHeader(
        route=target.route,
        app=target.app,
        write=target.write if write is None else write,
        partition=partition,
        attempt=attempt,
        stage=stage,
        task=task,
        commit=target.commit,
        encoding=target.encoding,
        owner=target.owner,
    )
    progress = _Progress()
    batches = (
        encode_rows_arrow(rows, target.rows_per_payload, target.bytes_per_payload)
        if target.encoding == "arrow"
        else _counted(encode_rows(rows, target.rows_per_payload, target.bytes_per_payload))
    )

    def outbound() -> Iterator[object]:
        # The header rides on REQUEST_CHANNEL; the rows wait for the sink's
        # credit, and a sink that never grants any is a stall like any other.
        progress.busy, progress.last = False, time.monotonic()
        yield Payload(b"", header.to_bytes())
        progress.busy, progress.last = True, time.monotonic()
        try:
            for batch, n in batches:
                progress.rows += n
                progress.busy, progress.last = False, time.monotonic()
                yield batch
                # Resumed: the channel's worker got credit for that batch and
                # wants the next; producing it is the job's time, not a stall.
                progress.busy, progress.last = True, time.monotonic()
        except Exception as exc:  # not GeneratorExit: a cancelled channel closes us
            progress.error = exc
            raise
        progress.busy, progress.last = False, time.monotonic()  # now waiting for the ack

    where = f"sink {target.address} route {target.route!r} partition {partition}"
    slice_ = min(1.0, target.timeout)

    def exchange() -> Payload:
        with connect_service(target.url, target.timeout, target.access) as client:
            replies = client.request_channel(outbound(), prefetch=1, timeout=slice_)
            try:
                while True:
                    try:
                        return next(replies)
                    except TimeoutError:
                        if progress.error is not None:
                            raise progress.error from None
                        stalled = time.monotonic() - progress.last > target.timeout
                        if not progress.busy and stalled:
                            raise TimeoutError(
                                f"{where}: no progress for {target.timeout} s (sink stalled)"
                            ) from None
                    except StopIteration:
                        raise SinkError(f"{where}: the sink completed without an ack") from None
                    except RSocketError as exc:
                        if progress.error is not None:
                            raise progress.error from None
                        raise SinkError(f"{where}: {exc.message}") from None
            finally:
                replies.close()

    try:
        reply = exchange()
    except ConnectionClosed as exc:  # the same type, saying which write failed
        if progress.error is not None:
            raise progress.error from None
        raise ConnectionClosed(f"{where}: {exc}") from exc
    ack = Ack.from_bytes(reply.data)
    if progress.error is not None:  # cannot ack rows we failed to send, but be sure
        raise progress.error
    if ack.rows != progress.rows:
        raise SinkError(f"{where}: sent {progress.rows} rows, the sink acknowledged {ack.rows}")
    return ack


def commit_job(target: WriteTarget, partitions: Iterable[int], *, abort: bool = False) -> Any:
    """Job commit (publish these partitions of ``target.write``) or abort
    (drop them), for commit mode ``job``; returns the sink's JSON answer."""

    request = JobRequest(
        op="abort" if abort else "commit",
        route=target.route,
        app=target.app,
        write=target.write,
        partitions=tuple(sorted(set(partitions))),
        owner=target.owner,
    )
    with connect_service(target.url, target.timeout, target.access) as client:
        try:
            reply = client.request_response(request.to_bytes(), timeout=target.timeout)
        except RSocketError as exc:
            raise SinkError(
                f"sink {target.address} route {target.route!r}: {exc.message}"
            ) from None
    return json.loads(reply.data) if reply is not None else None



def latest_offset(
    url: str, route: str, *, timeout: float = DEFAULT_TIMEOUT, access: Access | None = None
) -> int:
    """The latest offset (records so far) of the replayable source ``route``."""
    where = f"source {split_secret(url)[0]} route {route!r}"
    with connect_service(url, timeout, access) as client:
        try:
            reply = client.request_response(OffsetQuery(route=route).to_bytes(), timeout=timeout)
        except RSocketError as exc:
            raise SourceError(f"{where}: {exc.message}") from None
    if reply is None:
        raise SourceError(f"{where}: empty answer to the offset query")
    offset = json.loads(reply.data).get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise SourceError(f"{where}: bad offset {offset!r}")
    return offset

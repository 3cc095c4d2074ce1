"""An RSocket responder for Spark jobs: named *sources* that partitions read
from, and named *sinks* that partitions write to (see docs/spark.md for the
wire formats). Serve it with :func:`serve`, which requires the service's
secret from every client by default (docs/security.md); it runs no Spark
itself.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..rsocket.errors import ApplicationError
from ..rsocket.server import Server
from ..rsocket.server import serve as rsocket_serve
from ..rsocket.types import Payload, Request
from ..transport.urls import Endpoint
from ._wire import JobRequest, OffsetQuery, ReadRequest, WireError, WriteHeader, encode_rows
from .auth import authenticator, new_secret, with_secret
from .sink import Sink

__all__ = ["RowSource", "Service", "SparkServer", "serve"]

log = logging.getLogger("sansrs.adapters.spark")

#: A source: ``(partition, partitions, options) -> rows`` for that partition's share.
#: A *replayable* source also has ``latest() -> int`` (records so far) and
#: honours ``options["start"]`` / ``options["end"]``: the share of records
#: ``start <= offset < end`` (what the streaming reader asks for).
RowSource = Callable[[int, int, Mapping[str, Any]], Iterable[Any]]


class Service:
    """Handler with routes: ``sources[route]`` answers reads (REQUEST_STREAM),
    ``sinks[route]`` takes writes (REQUEST_CHANNEL) and job commits
    (REQUEST_RESPONSE). Rows a source yields are batched into payloads of
    ``rows_per_payload`` rows / ``bytes_per_payload`` bytes and pulled only
    as the reader's credit allows."""

    def __init__(
        self,
        *,
        sources: Mapping[str, RowSource] | None = None,
        sinks: Mapping[str, Sink] | None = None,
        rows_per_payload: int = 1000,
        bytes_per_payload: int = 256 * 1024,
    ) -> None:
        self.sources = dict(sources or {})
        self.sinks = dict(sinks or {})
        self.rows_per_payload = rows_per_payload
        self.bytes_per_payload = bytes_per_payload
        self._lock = threading.Lock()
        self.rows_served = 0
        self.reads_started = 0
        self.reads_finished = 0
        #: monotonic times of the first and the latest row batch served
        self.first_served_at: float | None = None
        self.last_served_at: float | None = None

    # The engine reads these for every channel this handler answers: the
    # writer's credit is the smallest sink prefetch (payloads in flight).
    @property
    def channel_prefetch(self) -> int:
        return min((s.prefetch for s in self.sinks.values()), default=8)

    def _sink(self, route: str) -> Sink:
        sink = self.sinks.get(route)
        if sink is None:
            raise ApplicationError(f"no sink named {route!r}")
        return sink

    # -- reads --------------------------------------------------------------
    def request_stream(self, request: Request) -> Iterator[bytes]:
        try:
            read = ReadRequest.from_bytes(request.data)
        except WireError as exc:
            raise ApplicationError(str(exc)) from None
        source = self.sources.get(read.route)
        if source is None:
            raise ApplicationError(f"no source named {read.route!r}")
        rows = source(read.partition, read.partitions, read.options)
        with self._lock:
            self.reads_started += 1
        return self._counted(
            encode_rows(rows, self.rows_per_payload, self.bytes_per_payload)
        )

    def _counted(self, batches: Iterator[bytes]) -> Iterator[bytes]:
        lock = self._lock
        for batch in batches:
            n = batch.count(b"\n")
            now = time.monotonic()
            with lock:
                self.rows_served += n
                if self.first_served_at is None:
                    self.first_served_at = now
                self.last_served_at = now
            yield batch
        with lock:
            self.reads_finished += 1

    # -- writes -------------------------------------------------------------
    def request_channel(self, request: Request, inbound: Iterator[Payload]) -> Iterator[bytes]:
        try:
            header = WriteHeader.from_bytes(request.metadata)
        except WireError as exc:
            raise ApplicationError(str(exc)) from None
        return self._write(self._sink(header.route), header, request.data, inbound)

    def _write(
        self, sink: Sink, header: WriteHeader, first: bytes, inbound: Iterator[Payload]
    ) -> Iterator[bytes]:
        # Runs on the channel's worker thread (the engine pulls channel
        # results there), so storage may block without stalling the connection.
        # The stage is opened here, not when the channel arrives: a channel
        # that ends before its worker first pulls (the writer's ERROR or a lost
        # connection in the same read as its request) closes this generator
        # unstarted, and a stage opened outside it would never be aborted.
        stage = sink.open(header)
        try:
            if first:
                # Not what sansrs writers send, but a peer may put rows in the request.
                sink.receive(stage, first)
            for payload in inbound:
                sink.receive(stage, payload.data)
            ack = sink.finish(stage)  # a failing publish discards the attempt too
        except BaseException:
            sink.abort(stage)
            raise
        yield ack.to_bytes()

    def request_response(self, request: Request) -> bytes:
        try:
            query = OffsetQuery.from_bytes(request.data)
        except WireError:
            query = None
        if query is not None:
            return json.dumps({"offset": self._latest(query.route)}).encode()
        try:
            job = JobRequest.from_bytes(request.data)
        except WireError as exc:
            raise ApplicationError(str(exc)) from None
        return json.dumps(self._sink(job.route).job(job)).encode()

    def _latest(self, route: str) -> int:
        source = self.sources.get(route)
        if source is None:
            raise ApplicationError(f"no source named {route!r}")
        latest = getattr(source, "latest", None)
        if not callable(latest):
            raise ApplicationError(f"source {route!r} is not replayable (no latest offset)")
        return int(latest())


class SparkServer(Server):
    """A served :class:`Service` (an RSocket :class:`Server`). ``url`` is
    what writers, readers and the data source are given: it carries the
    secret (as the URL's password, like a token URL: treat it as a
    credential); ``address`` is the same without it, for logs."""

    def __init__(self, server: Server, secret: str | None, service: Service | None = None) -> None:
        super().__init__(server._accept, server._peers)
        self.secret = secret
        self._expiry = _Expiry(service) if service is not None and service.sinks else None

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        if self._expiry is not None:
            self._expiry.stop(timeout)
        super().close(timeout, abort=abort)

    @property
    def address(self) -> str:
        """The URL without the secret."""
        return self.endpoint.url

    @property
    def url(self) -> str:
        """The URL clients use: with the secret, if the service has one."""
        address = self.endpoint.url
        return address if self.secret is None else with_secret(address, self.secret)

    def __repr__(self) -> str:
        auth = "secret" if self.secret is not None else "no authentication"
        return f"<SparkServer {self.address} ({auth})>"


def serve(
    url: str | Endpoint,
    service: Service,
    *,
    secret: str | None = None,
    authenticate: bool = True,
    ssl_context: ssl.SSLContext | None = None,
    **options: Any,
) -> SparkServer:
    """Serve ``service`` on ``url`` (``tcp://127.0.0.1:0`` picks a port;
    ``tls://`` needs ``ssl_context``, which may also require client
    certificates). Every client must send the service's ``secret`` in its
    SETUP (one is generated unless given); ``server.url`` carries it, so
    writers and readers made from it authenticate without more ado.
    ``authenticate=False`` serves anyone who can reach the port (only for
    a port nobody else can reach). ``options`` go to the RSocket server
    (:func:`sansrs.adapters.rsocket.serve`: ``loop``, ``loop_config``, ...)."""
    if not authenticate:
        if secret is not None:
            raise ValueError("secret= needs authenticate=True")
        return SparkServer(
            rsocket_serve(url, service, ssl_context=ssl_context, **options), None, service
        )
    secret = new_secret() if secret is None else secret
    guarded = _Guarded(service, authenticator(secret))
    return SparkServer(
        rsocket_serve(url, guarded, ssl_context=ssl_context, **options), secret, service
    )


class _Expiry:
    """Runs the expiry of a served service's sinks every
    ``SinkConfig.expiry_interval`` (the smallest of its sinks'), so the
    stages of a driver that went away are freed on time even when nothing
    else reaches the sink (every write, commit and abort runs it too)."""

    def __init__(self, service: Service) -> None:
        self._service = service
        self._interval = min(s.config.expiry_interval for s in service.sinks.values())
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="sansrs-spark-sink-expiry", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            for sink in list(self._service.sinks.values()):
                try:
                    sink.expire()
                except Exception:  # a subclass's bug must not end expiry for all
                    log.exception("expiry of a Spark sink failed")

    def stop(self, timeout: float) -> None:
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)


class _Guarded:
    """A :class:`Service` behind its secret: the RSocket server asks the
    handler's ``accept_setup(setup, peer)`` before accepting a SETUP (the
    SETUP hook every RSocket server has, docs/extensions.md); a refusal is
    REJECTED_SETUP. Everything else is the service's."""

    def __init__(self, service: Service, check: Callable[[Any], None]) -> None:
        self._service = service
        self._check = check

    def accept_setup(self, setup: Any, peer: object) -> None:
        self._check(setup)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)

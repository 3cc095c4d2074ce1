"""A requester bound to a route: every request carries composite metadata
(the route, and optionally credentials, the data MIME type, accepted MIME
types, a trace, further entries) encoded once, without hand-made bytes.

    users = client.route("users.{id}.get", 42, auth=BearerAuth(token))
    users.request_response(b"...")           # the same methods as the client
    async for p in aclient.route("feed").request_stream(b""): ...

``client.route(...)`` exists on every requester: :class:`~.client.Client`
and ``server.peers`` (threads or selector loop), the asyncio
:class:`~.aio.AsyncClient`, and :class:`~.balancer.LoadBalancedClient`.
The metadata goes into the frames that start interactions only (the
extensions' rule): a channel's later payloads carry what the caller gives
them, nothing more. A call's own ``metadata`` adds entries after the
route's: composite metadata bytes, or ``(mime, content)`` pairs.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, TypedDict

from sansrs.rsocket import Role
from sansrs.rsocket.extensions import (
    COMPOSITE_METADATA,
    Authentication,
    CompositeEntry,
    ZipkinTrace,
    compose,
    composite_framing_error,
    encode_composite,
)

from .fast import as_payload, as_payloads, new_tuple
from .options import EngineOptions
from .routes import expand
from .types import Payload

__all__ = [
    "AsyncRoutedRequester",
    "CompositeCheck",
    "ExtraMetadata",
    "RouteOptions",
    "RoutedRequester",
    "route_metadata",
]

#: A call's own metadata on a routed requester: composite metadata bytes
#: (entries appended as they are) or ``(mime, content)`` pairs.
ExtraMetadata = bytes | Iterable[CompositeEntry | tuple[str | int, bytes]] | None


class RouteOptions(TypedDict, total=False):
    """What ``route(...)`` takes besides the route and its variables, on
    every requester: credentials, the stream's data MIME type, the accepted
    response types, a Zipkin trace, further composite entries."""

    auth: Authentication | None
    data_mime: str | None
    accept: Iterable[str]
    tracing: ZipkinTrace | None
    metadata: ExtraMetadata


def route_metadata(
    route: str,
    variables: tuple[object, ...] = (),
    *,
    auth: Authentication | None = None,
    data_mime: str | None = None,
    accept: Iterable[str] = (),
    tracing: ZipkinTrace | None = None,
    metadata: ExtraMetadata = None,
) -> bytes:
    """The composite metadata a routed requester sends (``client.route(...)``)."""
    return compose(
        expand(route, variables),
        auth=auth,
        data_mime=data_mime,
        accept=accept,
        tracing=tracing,
    ) + _extra(metadata)


def _extra(metadata: ExtraMetadata) -> bytes:
    if metadata is None:
        return b""
    if isinstance(metadata, bytes | bytearray | memoryview):
        return bytes(metadata)
    if isinstance(metadata, str):
        raise TypeError("metadata on a routed request: composite bytes or (mime, content) pairs")
    return encode_composite(metadata)


def check_composite(metadata_mime_type: str) -> None:
    """A client whose SETUP did not declare composite metadata cannot route:
    its peer would not read the route (Spring and rsocket-py reject it)."""
    if metadata_mime_type != COMPOSITE_METADATA:
        raise ValueError(
            "routed requests need composite metadata: connect with"
            f" metadata_mime_type={COMPOSITE_METADATA!r} (or auth= / setup_route=);"
            f" this connection declared {metadata_mime_type!r}"
        )


def check_connect_options(options: Mapping[str, Any]) -> None:
    """:func:`check_composite` for ``connect`` keywords not yet used (a
    balancer's, before it has a connection): ``auth=`` or ``setup_route=``
    make the metadata composite; otherwise ``metadata_mime_type`` says, by
    default composite."""
    if options.get("auth") is None and options.get("setup_route") is None:
        check_composite(options.get("metadata_mime_type", EngineOptions.metadata_mime_type))


class CompositeCheck:
    """A client whose SETUP declared composite metadata (the default) sends
    only composite metadata: a peer that routes (Spring, rsocket-py, a
    sansrs :class:`~.routing.Router`) would reject anything else, far from
    the call that sent it. The framing of the metadata of a frame that
    starts an interaction (and a METADATA_PUSH's) is checked before anything
    is sent (``composite_framing_error``); raw bytes raise
    :class:`ValueError` naming the way out. The last
    metadata that passed is remembered by identity, so a route view's
    metadata (one bytes object) is walked once, not per request."""

    __slots__ = ("_passed",)

    def __init__(self) -> None:
        self._passed: object = None

    def check(self, metadata: bytes | None) -> None:
        if metadata is None or metadata is self._passed:
            return
        error = composite_framing_error(metadata)
        if error is not None:
            raise ValueError(
                f"this connection declared {COMPOSITE_METADATA} metadata (connect's default)"
                f" and this metadata is not composite ({error}): build it with"
                " sansrs.rsocket.extensions.compose() / encode_composite() or use"
                " client.route(...); for raw metadata bytes connect with"
                " metadata_mime_type='application/octet-stream' (or your own MIME type)"
            )
        self._passed = metadata


def composite_check(engine: Any) -> CompositeCheck | None:
    """The check a requester applies: only a client that declared composite
    metadata (a server's requests follow whatever its client declared)."""
    if engine.conn.role is Role.CLIENT and engine.options.metadata_mime_type == COMPOSITE_METADATA:
        return CompositeCheck()
    return None


def check_batch(check: CompositeCheck | None, batch: list[Payload]) -> None:
    """Each payload's metadata checked by ``check``, in order; at the first
    that fails, ``batch`` is cut to the payloads before it (they still go)
    and the error raised."""
    if check is None:
        return
    # Each distinct metadata checked once (the common batch has none, or one
    # for all: C calls alone, bench_tcp.py row fnf16m); the first payload
    # that fails is looked for only when one does.
    distinct = set(map(_METADATA, batch))
    distinct.discard(None)
    try:
        for metadata in distinct:
            check.check(metadata)
        return
    except ValueError:
        pass
    for i, payload in enumerate(batch):
        try:
            check.check(payload.metadata)
        except ValueError:
            del batch[i:]
            raise


def send_checked(
    check: CompositeCheck | None, items: list[object], send: Callable[[list[Payload]], None]
) -> int:
    """``send`` the Payloads of ``items`` (payloads, bytes, str or (data,
    metadata) pairs; metadata checked by ``check``) as one list: how many.
    At an item that is not a payload, or fails the check, those before it
    are still sent, then the error raised (``fire_and_forget_many``)."""
    batch: list[Payload] = []
    try:
        as_payloads(items, batch)
        check_batch(check, batch)
    finally:  # what was converted and checked before a bad item still goes
        if batch:
            send(batch)
    return len(batch)


def checked_payload(check: CompositeCheck | None, data: object, metadata: object = None) -> Payload:
    """``as_payload``, its metadata checked by ``check`` (None: not checked)."""
    payload = as_payload(data, metadata)
    if check is not None:
        check.check(payload.metadata)
    return payload


_METADATA = operator.itemgetter(1)


class _Routed:
    __slots__ = ("_requester", "metadata")

    def __init__(self, requester: Any, metadata: bytes) -> None:
        self._requester = requester
        #: The composite metadata every request of this view carries.
        self.metadata = metadata

    def _md(self, extra: ExtraMetadata) -> bytes:
        return self.metadata if extra is None else self.metadata + _extra(extra)

    def _first(self, item: object, extra: ExtraMetadata) -> Payload:
        """A channel's first payload with the route's metadata before its own."""
        p = as_payload(item)
        md = self._md(extra)
        return Payload(p.data, md if p.metadata is None else md + p.metadata)

    def _channel(self, data: Iterable[object], extra: ExtraMetadata) -> Iterator[object]:
        items = iter(data)
        try:
            first = next(items)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None
        return itertools.chain((self._first(first, extra),), items)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._requester!r}, {len(self.metadata)} bytes)"

    def request_stream(
        self,
        data: bytes | str,
        metadata: ExtraMetadata = None,
        prefetch: int = 256,
        timeout: float | None = None,
    ) -> Any:
        """The requester's stream (an iterator, or an async one under asyncio)."""
        return self._requester.request_stream(data, self._md(metadata), prefetch, timeout)


class RoutedRequester(_Routed):
    """A synchronous client's requests on one route (``client.route(...)``):
    the client's methods, each request carrying the route's metadata."""

    # The client's signatures by choice (a drop-in), each adding the route's metadata.
    def request_response(
        self, data: bytes | str, metadata: ExtraMetadata = None, timeout: float | None = None
    ) -> Payload | None:
        return self._requester.request_response(data, self._md(metadata), timeout)  # type: ignore[no-any-return]

    def request_response_many(
        self,
        requests: Iterable[object],
        *,
        in_flight: int = 64,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> Iterator[Payload | None]:
        """Pipelined, as the client's; each request is data (the route's
        metadata is added) or a payload whose metadata adds entries."""
        md = self.metadata

        def routed(item: object) -> Payload:
            if type(item) is bytes:
                return new_tuple(Payload, (item, md))
            p = as_payload(item)
            return Payload(p.data, md if p.metadata is None else md + p.metadata)

        return self._requester.request_response_many(  # type: ignore[no-any-return]
            map(routed, requests),
            in_flight=in_flight,
            timeout=timeout,
            return_exceptions=return_exceptions,
        )

    def fire_and_forget(
        self, data: bytes | str, metadata: ExtraMetadata = None, timeout: float | None = None
    ) -> None:
        self._requester.fire_and_forget(data, self._md(metadata), timeout)

    def metadata_push(self, metadata: ExtraMetadata = None, timeout: float | None = None) -> None:
        """METADATA_PUSH carrying the route's metadata (rsocket-py and Spring
        route these; the composite metadata spec names only request frames)."""
        self._requester.metadata_push(self._md(metadata), timeout)

    def request_channel(
        self,
        data: Iterable[object],
        metadata: ExtraMetadata = None,
        prefetch: int = 256,
        timeout: float | None = None,
    ) -> Any:
        """The route's metadata rides on the first payload (the request frame)
        only, before that payload's own metadata."""
        return self._requester.request_channel(
            self._channel(data, metadata), None, prefetch, timeout
        )

    def response_publisher(self, data: bytes | str, metadata: ExtraMetadata = None) -> Any:
        return self._requester.response_publisher(data, self._md(metadata))

    def stream_publisher(self, data: bytes | str, metadata: ExtraMetadata = None) -> Any:
        return self._requester.stream_publisher(data, self._md(metadata))

    def channel_publisher(self, data: Iterable[object], metadata: ExtraMetadata = None) -> Any:
        return self._requester.channel_publisher(self._channel(data, metadata))


class AsyncRoutedRequester(_Routed):
    """An asyncio client's requests on one route (``aclient.route(...)``)."""

    async def request_response(
        self, data: bytes | str, metadata: ExtraMetadata = None, timeout: float | None = None
    ) -> Payload | None:
        return await self._requester.request_response(data, self._md(metadata), timeout)  # type: ignore[no-any-return]

    async def fire_and_forget(self, data: bytes | str, metadata: ExtraMetadata = None) -> None:
        await self._requester.fire_and_forget(data, self._md(metadata))

    async def metadata_push(self, metadata: ExtraMetadata = None) -> None:
        await self._requester.metadata_push(self._md(metadata))

    def request_channel(
        self,
        items: Iterable[object] | AsyncIterable[object],
        metadata: ExtraMetadata = None,
        prefetch: int = 256,
        timeout: float | None = None,
    ) -> Any:
        if isinstance(items, AsyncIterable):
            return self._requester.request_channel(
                self._async_channel(items, metadata), None, prefetch, timeout
            )
        return self._requester.request_channel(
            self._channel(items, metadata), None, prefetch, timeout
        )

    async def _async_channel(
        self, items: AsyncIterable[object], extra: ExtraMetadata
    ) -> AsyncIterator[object]:
        first = True
        async for item in items:
            yield self._first(item, extra) if first else item
            first = False

"""A routed service the router tests share: every interaction model, a
template, authentication, a public route, a data-MIME-producing route."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from sansrs.adapters.rsocket import (
    ApplicationError,
    BearerAuth,
    Payload,
    RoutedRequest,
    Router,
    SimpleAuth,
)

from sansrs.rsocket.extensions import Authentication

USERS = {"ann": "pw-ann", "bob": "pw-bob"}
TOKENS = {"tok-carol": "carol"}


def authenticate(auth: Authentication) -> str | None:
    if isinstance(auth, SimpleAuth):
        if USERS.get(auth.username) == auth.password:
            return auth.username
        raise ApplicationError(f"wrong password for {auth.username}")
    if isinstance(auth, BearerAuth):
        return TOKENS.get(auth.token)
    return None


class Seen:
    """What the handlers saw, for the tests to wait on (no sleeps)."""

    def __init__(self) -> None:
        self.requests: list[RoutedRequest] = []
        self.inbound: list[Payload] = []
        self.fnf = threading.Event()
        self.push = threading.Event()
        self.lock = threading.Lock()

    def add(self, request: RoutedRequest) -> None:
        with self.lock:
            self.requests.append(request)


def make_router(seen: Seen, **options: Any) -> Router:
    router = Router(authenticate=authenticate, **options)

    @router.response("users.{id}.get")
    def get_user(request: RoutedRequest) -> bytes:
        seen.add(request)
        return f"{request.variables['id']}:{request.principal}:{request.data_mime}".encode()

    @router.response("users.me.get")
    def me(request: RoutedRequest) -> bytes:
        return f"me:{request.principal}".encode()

    @router.response("health", authenticated=False)
    def health(request: RoutedRequest) -> bytes:
        return b"ok:" + str(request.principal).encode()

    @router.response("json", produces="application/json")
    def json_answer(request: RoutedRequest) -> bytes:
        return b'{"a": 1}'

    @router.stream("count")
    def count(request: RoutedRequest) -> Iterator[bytes]:
        seen.add(request)
        return (str(i).encode() for i in range(int(request.data)))

    @router.stream("json.count", produces="application/json")
    def json_count(request: RoutedRequest) -> Iterator[bytes]:
        return (b"%d" % i for i in range(3))

    @router.channel("echo")
    def echo(request: RoutedRequest, inbound: Iterator[Payload]) -> Iterator[Payload]:
        seen.add(request)
        yield Payload(request.data)
        for item in inbound:
            seen.inbound.append(item)
            yield item

    @router.fnf("log")
    def log(request: RoutedRequest) -> None:
        seen.add(request)
        seen.fnf.set()

    @router.push("config")
    def config(request: RoutedRequest) -> None:
        seen.add(request)
        seen.push.set()

    return router

"""The state tables are data: every state x input pair is driven through a real core."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.ditto import (
    CLIENT_TRANSITIONS,
    INTERNAL_ERROR,
    SERVER_TRANSITIONS,
    ClientInput,
    ClientState,
    DittoClient,
    DittoServer,
    ServerInput,
    ServerState,
)
from sansrs.ditto._envelope import dumps
from sansrs.ditto.events import SubscribeReceived
from tests.ditto.ditto_helpers import (
    ManualPublisher,
    cancel_text,
    drain,
    request_text,
    subscribe_text,
)

# -- server --------------------------------------------------------------------------


class ServerRig:
    """A server with one subscription, brought into a given state."""

    def __init__(self) -> None:
        self.server = DittoServer()
        self.server.receive_message(subscribe_text())
        (event,) = drain(self.server)
        assert isinstance(event, SubscribeReceived)
        self.sid = event.subscription_id
        self.publisher = ManualPublisher()
        self.now = 0.0

    def state(self) -> ServerState:
        return self.server.state_of(self.sid)


def _to_state(state: ServerState) -> ServerRig:
    rig = ServerRig()
    S = ServerState
    if state is S.PENDING_REQUESTED:
        rig.server.receive_message(request_text(rig.sid, 1))
    elif state is S.READY:
        rig.server.accept(rig.sid, rig.publisher)
    elif state is S.REJECTED:
        rig.server.reject(rig.sid, INTERNAL_ERROR)
    elif state in (S.ACTIVE, S.ZOMBIE, S.GONE):
        rig.server.accept(rig.sid, rig.publisher)
        rig.server.receive_message(request_text(rig.sid, 1))
        if state is not S.ACTIVE:
            rig.server.receive_message(cancel_text(rig.sid))
        if state is S.GONE:
            rig.server.handle_timeout(10.0)
            rig.now = 10.0
    assert rig.state() is state
    return rig


def _upstream(rig: ServerRig) -> Any:
    subscriber = rig.publisher.subscriber
    if subscriber is None:
        raise _Impossible("the Publisher was never subscribed")
    return subscriber


class _Impossible(Exception):
    """The input cannot occur in this state (no Publisher subscribed, no such timer)."""


def _drive_server(rig: ServerRig, what: ServerInput) -> None:
    server, sid = rig.server, rig.sid
    In = ServerInput
    if what is In.REQUEST:
        server.receive_message(request_text(sid, 1))
    elif what is In.BAD_REQUEST:
        server.receive_message(request_text(sid, 0))
    elif what is In.CANCEL:
        server.receive_message(cancel_text(sid))
    elif what is In.ACCEPT:
        server.accept(sid, ManualPublisher())
    elif what is In.REJECT:
        server.reject(sid, INTERNAL_ERROR)
    elif what is In.UP_NEXT:
        _upstream(rig).on_next("x")
    elif what is In.UP_NEXT_EXCESS:
        subscriber = _upstream(rig)
        if rig.state() is ServerState.ACTIVE:
            subscriber.on_next("within demand")
        subscriber.on_next("beyond demand")
    elif what is In.UP_COMPLETE:
        _upstream(rig).on_complete()
    elif what is In.UP_ERROR:
        _upstream(rig).on_error(RuntimeError("x"))
    elif what is In.IDLE:
        if rig.state() in (ServerState.ZOMBIE, ServerState.GONE):
            raise _Impossible("an ended subscription has only its expiry timer")
        server.handle_timeout(rig.now + server.config.idle_timeout)
    elif what is In.EXPIRE:
        if rig.state() is not ServerState.ZOMBIE:
            raise _Impossible("only a zombie expires")
        server.handle_timeout(rig.now + server.config.zombie_timeout)


_APPLICATION = {ServerInput.ACCEPT, ServerInput.REJECT}


@pytest.mark.parametrize("what", list(ServerInput), ids=lambda i: i.value)
@pytest.mark.parametrize("state", list(ServerState), ids=lambda s: s.value)
def test_ditto_server_table_every_state_and_input(state: ServerState, what: ServerInput) -> None:
    rig = _to_state(state)
    expected = SERVER_TRANSITIONS.get((state, what))
    if state is ServerState.GONE:
        expected = ServerState.GONE  # forgotten: requests get not.found, the rest is ignored
    try:
        _drive_server(rig, what)
    except _Impossible:
        assert (state, what) not in SERVER_TRANSITIONS
        return
    except LocalProtocolError:
        assert what in _APPLICATION and expected is None
        return
    if expected is None:
        # A Publisher signal in a state without a subscribed Publisher cannot happen;
        # _upstream raised above. Anything else missing from the table is misuse.
        pytest.fail(f"{state} x {what} is not in the table but was accepted")
    assert rig.state() is expected


def test_ditto_server_table_states_are_all_reachable_and_zombie_is_final() -> None:
    targets = set(SERVER_TRANSITIONS.values()) | {ServerState.PENDING}
    assert targets == set(ServerState)
    for (state, _), following in SERVER_TRANSITIONS.items():
        if state is ServerState.ZOMBIE:
            assert following in (ServerState.ZOMBIE, ServerState.GONE)


# -- client --------------------------------------------------------------------------

SID = "0"
ENTITY = "org.eclipse.ditto/thing-2/things/twin/streaming"


def _event(action: str, **value: Any) -> str:
    return dumps(
        {
            "topic": f"{ENTITY}/{action}",
            "headers": {},
            "path": "/",
            "value": {"subscriptionId": SID, **value},
        }
    )


def _client_to_state(state: ClientState) -> DittoClient:
    client = DittoClient()
    client.subscribe_for_persisted_events("org.eclipse.ditto", "thing-2")
    if state is not ClientState.SUBSCRIBING:
        client.receive_message(_event("created"))
    if state in (ClientState.ACTIVE, ClientState.DONE):
        client.request(SID, 1)
    if state is ClientState.CANCELLED:
        client.cancel(SID)
    if state is ClientState.DONE:
        client.receive_message(_event("complete"))
    if state is not ClientState.SUBSCRIBING:
        assert client.state_of(SID) is state
    return client


def _two_nexts(client: DittoClient) -> None:
    client.receive_message(_event("next", item=1))  # within the demand of 1, if any
    client.receive_message(_event("next", item=2))


_CLIENT_DRIVERS: dict[ClientInput, Callable[[DittoClient], None]] = {
    ClientInput.CREATED: lambda c: c.receive_message(_event("created")),
    ClientInput.NEXT: lambda c: c.receive_message(_event("next", item=1)),
    ClientInput.NEXT_EXCESS: lambda c: _two_nexts(c),
    ClientInput.COMPLETE: lambda c: c.receive_message(_event("complete")),
    ClientInput.FAILED: lambda c: c.receive_message(
        _event("failed", error=INTERNAL_ERROR.to_json())
    ),
    ClientInput.REQUEST: lambda c: c.request(SID, 1),
    ClientInput.CANCEL: lambda c: c.cancel(SID),
}
_LOCAL = {ClientInput.REQUEST, ClientInput.CANCEL}


@pytest.mark.parametrize("what", list(ClientInput), ids=lambda i: i.value)
@pytest.mark.parametrize("state", list(ClientState), ids=lambda s: s.value)
def test_ditto_client_table_every_state_and_input(state: ClientState, what: ClientInput) -> None:
    client = _client_to_state(state)
    expected = CLIENT_TRANSITIONS.get((state, what))
    if state is ClientState.SUBSCRIBING:
        # No ID yet: the remote events cannot name it, local intents cannot either.
        if what is ClientInput.CREATED:
            _CLIENT_DRIVERS[what](client)
            assert client.state_of(SID) is expected
        elif what is ClientInput.CANCEL:
            client.cancel_pending(0)  # by key: there is no ID to cancel by yet
            assert client._pending[0].state is expected
        elif what in _LOCAL:
            with pytest.raises(LocalProtocolError):
                _CLIENT_DRIVERS[what](client)
        else:
            _CLIENT_DRIVERS[what](client)  # a stray event
            assert client.state_of(SID) is ClientState.DONE  # i.e. unknown
        return
    if state is ClientState.DONE:
        # Forgotten: local intents are misuse, remote events are strays.
        if what in _LOCAL:
            with pytest.raises(LocalProtocolError):
                _CLIENT_DRIVERS[what](client)
        else:
            _CLIENT_DRIVERS[what](client)
        assert client.state_of(SID) is ClientState.DONE
        return
    if what is ClientInput.NEXT and state is ClientState.CREATED:
        expected = CLIENT_TRANSITIONS.get((state, ClientInput.NEXT_EXCESS))
        what = ClientInput.NEXT_EXCESS  # no demand yet: any next is excess
    if what is ClientInput.NEXT_EXCESS and state is not ClientState.CANCELLED:
        with pytest.raises(RemoteProtocolError):
            _CLIENT_DRIVERS[what](client)
        assert client.state_of(SID) is ClientState.DONE
        assert any('"cancel"' in m or "/cancel" in m for m in client.messages_to_send())
        return
    if what is ClientInput.CREATED and state is not ClientState.CANCELLED:
        _CLIENT_DRIVERS[what](client)  # a second created for a known ID: stray
        assert client.state_of(SID) is state
        return
    if expected is None:
        with pytest.raises(LocalProtocolError if what in _LOCAL else RemoteProtocolError):
            _CLIENT_DRIVERS[what](client)
        return
    _CLIENT_DRIVERS[what](client)
    assert client.state_of(SID) is expected

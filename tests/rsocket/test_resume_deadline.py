"""The client's RESUME deadline in the core (spec: Resume Operation: the
client sends nothing but RESUME until RESUME_OK; one that never comes must
not leave the session waiting forever): armed while RESUMING, exposed
through ``next_deadline()``, configurable (``ConnectionConfig.resume_timeout``)."""

from __future__ import annotations

import pytest

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    ConnectionState,
    ResumeOkFrame,
    Role,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import Disconnected


def resuming(config: ConnectionConfig | None = None) -> Connection:
    client = Connection(Role.CLIENT, config)
    client.setup(resume=True, keepalive_interval=1_000, max_lifetime=5_000)
    client.data_to_send()
    client.handle_timeout(0.0)
    client.connection_lost()
    client.events()
    client.resume()
    client.data_to_send()
    assert client.state is ConnectionState.RESUMING
    return client


def test_rsocket_resume_client_resuming_deadline_detaches_again() -> None:
    client = resuming(ConnectionConfig(resume_timeout=2.0))
    assert client.next_deadline() == 0.0  # anchored by the next handle_timeout
    client.handle_timeout(10.0)
    assert client.next_deadline() == 12.0
    client.handle_timeout(11.9)
    assert client.state is ConnectionState.RESUMING
    client.handle_timeout(12.0)
    assert client.state is ConnectionState.DISCONNECTED
    (event,) = client.events()
    assert isinstance(event, Disconnected) and event.timed_out
    assert event.reason == "RESUME not answered within 2 s"
    assert client.next_deadline() is None  # a client keeps no timer while detached
    client.resume()  # another transport, another deadline
    assert client.next_deadline() == 0.0


def test_rsocket_resume_client_resuming_deadline_defaults_to_max_lifetime_plus_interval() -> None:
    client = resuming()
    client.handle_timeout(10.0)
    assert client.next_deadline() == 16.0


def test_rsocket_resume_client_resume_ok_disarms_the_deadline() -> None:
    client = resuming(ConnectionConfig(resume_timeout=2.0))
    client.handle_timeout(10.0)
    client.receive_data(encode_frame_prefixed(ResumeOkFrame(0)), 11.0)
    assert client.state is ConnectionState.ESTABLISHED
    client.handle_timeout(12.5)
    assert client.state is ConnectionState.ESTABLISHED
    assert client.next_deadline() != 12.0


def test_rsocket_resume_timeout_config_must_be_positive() -> None:
    with pytest.raises(ValueError, match="resume_timeout"):
        ConnectionConfig(resume_timeout=0)

"""Property tests: a session's bytes cut at arbitrary points give the same
events as whole; random application scripts never break the protocol
between two sansrs connections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs.rsio import Connection, ConnectionConfig, Role
from sansrs.rsio import events as ev
from sansrs.trace import Direction, read_trace

TRACES = Path(__file__).resolve().parent.parent / "traces"


def _session_bytes() -> tuple[bytes, list[str]]:
    trace = read_trace(TRACES / "rsio_blobs_split.trace")
    data = trace.data(Direction.SERVER_TO_CLIENT)
    assert data.endswith(b"\x04\x00")  # the goodbyeAck to the recorded client
    return data[:-2], ["blobs"]


def _feed(data: bytes, cuts: list[int]) -> list[Any]:
    client = Connection(Role.CLIENT)
    client.subscribe("blobs", 10)
    events: list[Any] = []
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        if cut > last:
            client.receive_data(data[last:cut])
            last = cut
        events += client.events()
    return events


@given(st.lists(st.integers(0, 6000), max_size=30))
def test_arbitrary_chunking_gives_the_same_events(cuts: list[int]) -> None:
    data, _ = _session_bytes()
    cuts = [c for c in cuts if c < len(data)]
    assert _feed(data, cuts) == _feed(data, [])


actions = st.lists(
    st.tuples(st.sampled_from(["sub", "req", "cancel", "next", "packed", "complete", "err"]),
              st.integers(0, 5), st.integers(1, 40)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(actions, st.integers(1, 64))
def test_random_scripts_never_break_the_protocol(
    script: list[tuple[str, int, int]], chunk: int
) -> None:
    cfg = ConnectionConfig(split_size=16)
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER, cfg)
    accepted: dict[int, int] = {}

    def pump() -> None:
        for _ in range(50):
            moved = False
            for src, dst in ((client, server), (server, client)):
                data = src.data_to_send()
                for i in range(0, len(data), chunk):
                    dst.receive_data(data[i : i + chunk])  # never raises: both sides are sansrs
                moved = moved or bool(data)
            for e in server.events():
                if isinstance(e, ev.SubscribeReceived):
                    size = e.subscriber_id % 3
                    server.send_on_subscribe(e.subscriber_id, size)
                    accepted[e.subscriber_id] = size
                elif isinstance(e, ev.CancelReceived):
                    accepted.pop(e.subscriber_id, None)
            client.events()
            if not moved:
                return

    for op, k, n in script:
        sids = sorted(accepted)
        sid = sids[k % len(sids)] if sids else None
        mine = client.open_subscriptions
        mysid = mine[k % len(mine)] if mine else None
        if op == "sub":
            client.subscribe(f"p{k}", n % 4)
        elif op == "req" and mysid is not None:
            client.request(mysid, n)
        elif op == "cancel" and mysid is not None:
            client.cancel(mysid)
        elif sid is not None and server.demand_of(sid) > 0 and op in ("next", "packed"):
            size = accepted[sid]
            if op == "packed" and size:
                count = min(server.demand_of(sid), 3)
                server.send_packed(sid, b"p" * (size * count))
            else:
                server.send_next(sid, b"e" * (size or n))
        elif sid is not None and op in ("complete", "err"):
            if op == "complete":
                server.send_complete(sid)
            else:
                server.send_error(sid, "boom")
            accepted.pop(sid)
        pump()
    client.close("done")
    pump()
    assert client.state.value == server.state.value == "closed"

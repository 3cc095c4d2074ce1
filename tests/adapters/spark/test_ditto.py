"""Ditto history as a Spark source (``ws://`` URLs): partitions split by thing,
rows are the events, demand bounded by ``prefetch``; the data source batch
and streaming readers (offsets = revisions) on the shared SparkSession."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters import ditto as ditto_sync
from sansrs.adapters.ditto import DittoConnection
from sansrs.adapters.ditto.history import HistoryRequest, InMemoryHistory
from sansrs.adapters.spark import (
    Access,
    ClientTls,
    SourceError,
    open_partition_stream,
    partition_reader,
    read_rdd,
)
from sansrs.adapters.spark.ditto import (
    AHEAD,
    HEAD_START,
    assigned,
    event_columns,
    event_row,
    latest_revisions,
)
from sansrs.adapters.spark.remote import open_partition_columns

from sansrs.ditto import DittoError, DittoException
from tests.adapters.transport.tls_certs import certs

pytestmark = pytest.mark.timeout(240)

NS = "org.sansrs.test"
THINGS = [f"{NS}:sensor-{k}" for k in range(7)]
REVISIONS = 30  # revisions 1..30 per thing
SCHEMA = "thingId string, revision long, seq long, celsius double, action string"


def event(thing: str, revision: int) -> dict[str, Any]:
    k = THINGS.index(thing) if thing in THINGS else 99
    return {
        "topic": f"{thing.replace(':', '/')}/things/twin/events/modified",
        "path": "/features/temperature/properties",
        "value": {"seq": k * 1000 + revision, "celsius": k + revision / 8},
        "revision": revision,
        "timestamp": f"2026-01-01T00:{revision // 60:02d}:{revision % 60:02d}Z",
    }


def expected_rows(revisions: Iterable[tuple[str, int]]) -> list[tuple[Any, ...]]:
    rows = []
    for thing, r in revisions:
        k = THINGS.index(thing)
        rows.append((thing, r, k * 1000 + r, k + r / 8, "modified"))
    return sorted(rows)


class PullCounting:
    """Wraps a history source: counts the events pulled from it (on the
    session's thread, only within the subscriber's demand)."""

    def __init__(self, inner: InMemoryHistory) -> None:
        self.inner = inner
        self.pulled = 0
        self.lock = threading.Lock()

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        items = self.inner.open(request)
        if request.kind.name == "SEARCH":
            return items
        return self._counted(items)  # type: ignore[arg-type]

    def _counted(self, items: Iterable[Any]) -> Iterator[Any]:
        for item in items:
            with self.lock:
                self.pulled += 1
            yield item


HISTORY = InMemoryHistory(event(t, r) for t in THINGS for r in range(1, REVISIONS + 1))
SOURCE = PullCounting(HISTORY)


@pytest.fixture(scope="module")
def ditto_url() -> Iterator[str]:
    with ditto_sync.serve("ws://127.0.0.1:0/ws/2", SOURCE) as server:
        yield server.url


def test_event_row_flattens_the_event_and_keeps_its_own_columns() -> None:
    row = event_row({**event(THINGS[2], 5), "value": {"revision": "shadowed", "x": [1]}})
    assert row == {
        "x": [1],
        "thingId": THINGS[2],
        "revision": 5,
        "timestamp": "2026-01-01T00:00:05Z",
        "topic": f"{NS}/sensor-2/things/twin/events/modified",
        "action": "modified",
        "path": "/features/temperature/properties",
        "value": '{"revision":"shadowed","x":[1]}',
    }
    deleted = event_row({"topic": f"{NS}/t/things/twin/events/deleted", "revision": 3})
    assert deleted["value"] is None and deleted["action"] == "deleted"


def test_partitions_split_by_thing_exactly_once(ditto_url: str) -> None:
    n = 3
    got: dict[int, list[tuple[str, int]]] = {}
    for p in range(n):
        batches = list(open_partition_stream(ditto_url, NS, p, n, {}, prefetch=8, timeout=10))
        assert all(1 <= len(b) <= 4 for b in batches)  # at most prefetch // 2 per batch
        got[p] = [(row["thingId"], row["revision"]) for b in batches for row in b]
    everything = [pair for rows in got.values() for pair in rows]
    assert sorted(everything) == [(t, r) for t in sorted(THINGS) for r in range(1, 31)]
    for p, rows in got.items():
        assert {assigned(t, n) for t, _ in rows} <= {p}
        # each thing's events arrive in revision order
        for thing in {t for t, _ in rows}:
            assert [r for t, r in rows if t == thing] == list(range(1, REVISIONS + 1))


def test_options_narrow_things_and_revisions(ditto_url: str) -> None:
    options = {"things": [THINGS[1], THINGS[4], "other.ns:x"], "from_revision": 28,
               "filter": "gt(features/temperature/properties/celsius,4.6)"}
    rows = [r for b in open_partition_stream(ditto_url, NS, 0, 1, options, timeout=10) for r in b]
    # other.ns:x is outside the namespace; sensor-1 at revision 28 has celsius 4.5
    assert [(r["thingId"], r["revision"]) for r in rows] == [
        (THINGS[1], 29), (THINGS[1], 30),
        (THINGS[4], 28), (THINGS[4], 29), (THINGS[4], 30),
    ]
    found = open_partition_stream(
        ditto_url, "*", 0, 1, {"search_filter": f'eq(thingId,"{THINGS[6]}")'}, timeout=10
    )
    assert {r["thingId"] for b in found for r in b} == {THINGS[6]}


def test_demand_is_prefetch_events(ditto_url: str) -> None:
    prefetch = 6
    before = SOURCE.pulled
    stream = open_partition_stream(
        ditto_url, NS, 0, 1, {"things": [THINGS[0]]}, prefetch=prefetch, timeout=10
    )
    consumed = 0
    for batch in stream:
        consumed += len(batch)
        # Never more pulled from the history than the demand sent (prefetch
        # + what the iterator renewed: consumed, asked for as the batch's
        # last event was handed out, before this line runs) and the one
        # event the server reads ahead to learn whether it is the last
        # (drive.streams.Outbound; never sent before it is asked for). The
        # bound holds whenever the server pulls: without the +1 it failed
        # when the server got to its read-ahead before this line.
        assert SOURCE.pulled - before <= consumed + prefetch + 1
        if consumed >= 12:
            break
    stream.close()
    assert consumed == 12


def test_unknown_thing_is_a_source_error_with_dittos_message(ditto_url: str) -> None:
    stream = open_partition_stream(ditto_url, NS, 0, 1, {"things": [f"{NS}:ghost"]}, timeout=10)
    with pytest.raises(SourceError, match=r"404 things:thing\.notfound"):
        list(stream)


def test_latest_revisions(ditto_url: str) -> None:
    assert latest_revisions(ditto_url, NS, {}, 10) == dict.fromkeys(THINGS, REVISIONS)


def test_data_source_reads_ditto_history(spark: Any, ditto_url: str) -> None:
    df = (
        spark.read.format("sansrs").option("url", ditto_url).option("route", NS)
        .option("partitions", 3).option("prefetch", 16).option("schema", SCHEMA).load()
    )
    assert df.rdd.getNumPartitions() == 3
    rows = sorted(tuple(r) for r in df.collect())
    assert rows == expected_rows((t, r) for t in THINGS for r in range(1, REVISIONS + 1))
    per = df.groupBy("thingId").count().collect()
    assert {r["thingId"]: r["count"] for r in per} == dict.fromkeys(THINGS, REVISIONS)


def test_partition_reader_over_ditto(spark: Any, ditto_url: str) -> None:
    reader = partition_reader(ditto_url, route=NS, partitions=2,
                              options={"things": THINGS[:3], "to_revision": 2},
                              fields=["thingId", "revision"])
    assert reader.prefetch == 1024  # events, the Ditto default
    got = sorted(read_rdd(spark.sparkContext, reader).collect())
    assert got == [(t, r) for t in THINGS[:3] for r in (1, 2)]


def test_streaming_reader_offsets_are_revisions(spark: Any, tmp_path: Path) -> None:
    things = [f"{NS}:stream-{k}" for k in range(3)]
    history = InMemoryHistory(
        {**event(t, r), "value": {"seq": k * 1000 + r}}
        for k, t in enumerate(things) for r in range(1, 11)
    )
    offsets: list[dict[str, Any]] = []

    with ditto_sync.serve("ws://127.0.0.1:0/ws/2", history) as server:

        def run_available_now(batches: int) -> list[tuple[str, int]]:
            got: list[tuple[str, int]] = []

            def collect(df: Any, batch_id: int) -> None:  # on the driver
                got.extend((r["thingId"], r["revision"]) for r in df.collect())

            stream = (
                spark.readStream.format("sansrs").option("url", server.url)
                .option("route", NS).option("partitions", 2).option("max_rows_per_batch", 12)
                .option("query", json.dumps({"search_filter": 'like(thingId,"*:stream-*")'}))
                .option("schema", "thingId string, revision long, seq long").load()
            )
            query = (
                stream.writeStream.foreachBatch(collect)
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True).start()
            )
            assert query.awaitTermination(120)
            assert query.exception() is None
            sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
            assert len(sizes) == batches and max(sizes) <= 12  # max_rows_per_batch
            offsets.append(json.loads(query.lastProgress.sources[0].endOffset))
            return sorted(got)

        assert run_available_now(3) == [(t, r) for t in things for r in range(1, 11)]
        assert offsets[-1] == {"revisions": dict.fromkeys(things, 10)}
        for k, t in enumerate(things[:2]):  # new revisions: only they are read next
            for r in (11, 12):
                history.append({**event(t, r), "value": {"seq": k * 1000 + r}})
        assert run_available_now(1) == [(t, r) for t in things[:2] for r in (11, 12)]
        assert offsets[-1] == {"revisions": {things[0]: 12, things[1]: 12, things[2]: 10}}


def test_columns_without_value_skip_its_json_text_and_nothing_else(ditto_url: str) -> None:
    def rows(columns: tuple[str, ...] | None) -> list[dict[str, Any]]:
        batches = open_partition_stream(ditto_url, NS, 0, 1, {"things": [THINGS[1]]},
                                        prefetch=8, timeout=10, columns=columns)
        return [row for batch in batches for row in batch]

    full = rows(None)
    assert [json.loads(r["value"]) for r in full] == [
        event(THINGS[1], r)["value"] for r in range(1, REVISIONS + 1)]
    assert rows(("thingId", "value")) == full
    lean = rows(("thingId", "revision", "seq"))
    assert [r["value"] for r in lean] == [None] * REVISIONS
    assert [{**r, "value": None} for r in full] == lean
    assert event_row(event(THINGS[1], 2), value_text=False)["value"] is None


def test_things_are_read_one_after_the_other_within_one_window(ditto_url: str) -> None:
    prefetch = 4
    things = [THINGS[0], THINGS[3], THINGS[5]]
    before = SOURCE.pulled
    stream = open_partition_stream(ditto_url, NS, 0, 1, {"things": things},
                                   prefetch=prefetch, timeout=10)
    rows = []
    for batch in stream:
        rows.extend((r["thingId"], r["revision"]) for r in batch)
        # one subscription read at a time: its window, and the head start of
        # each one subscribed ahead (at most its window), each with
        # Outbound's item read ahead
        head = min(HEAD_START, prefetch)
        waiting = min(AHEAD, len(things) - 1)
        assert SOURCE.pulled - before <= len(rows) + (prefetch + 1) + waiting * (head + 1)
    assert rows == [(t, r) for t in things for r in range(1, REVISIONS + 1)]


class ClosingHistory:
    """``history`` (HISTORY by default), recording which things' histories
    were opened and closed."""

    def __init__(self, history: InMemoryHistory = HISTORY) -> None:
        self.history = history
        self.opened: list[str] = []
        self.closed: dict[str, threading.Event] = {}

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        items = self.history.open(request)
        if request.kind.name == "SEARCH":
            return items
        thing = request.entity_id
        self.opened.append(thing)
        self.closed[thing] = threading.Event()
        return _Closing(iter(items), self.closed[thing])


class _Closing:
    """An iterator whose end is recorded: its ``close`` (the server's, when
    the subscription ends early), started or not, or its last item read."""

    def __init__(self, items: Iterator[Any], closed: threading.Event) -> None:
        self.items, self.closed = items, closed

    def __iter__(self) -> _Closing:
        return self

    def __next__(self) -> Any:
        try:
            return next(self.items)
        except StopIteration:
            self.closed.set()
            raise

    def close(self) -> None:
        self.closed.set()


def test_a_reader_stopped_early_ends_its_subscription() -> None:
    history = ClosingHistory()
    with ditto_sync.serve("ws://127.0.0.1:0/ws/2", history) as server:
        stream = open_partition_stream(server.url, NS, 0, 1, {"things": THINGS[:3]},
                                       prefetch=4, timeout=10)
        first = next(stream)
        assert first[0]["thingId"] == THINGS[0]
        stream.close()  # mid-thing
        # One thing read at a time; the next ones subscribed (paused) while
        # it is read: their subscribes went out before the first thing's
        # request, so the server has opened them by now. All end.
        assert history.opened == THINGS[:3]
        assert history.closed[THINGS[0]].wait(10), "the history was left open"
        for thing in THINGS[1:3]:
            assert history.closed[thing].wait(10), "a paused history was left open"


def test_small_histories_are_subscribed_several_ahead_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Things of a few events each are read faster than a round trip: the
    next AHEAD are subscribed (paused, with a head start) while one is read,
    never more; the rows stay in thing order and every history ends."""
    things = [f"{NS}:small-{k:02d}" for k in range(AHEAD * 2 + 3)]
    small = InMemoryHistory(
        {**event(THINGS[0], r), "topic": f"{t.replace(':', '/')}/things/twin/events/modified"}
        for t in things for r in (1, 2, 3))
    history = ClosingHistory(small)
    subscribed: list[tuple[str, bool]] = []  # (thing, paused), in the reader's order
    subscribe = DittoConnection.persisted_event_batches

    def recording(self: DittoConnection, entity: str, **kwargs: Any) -> Any:
        subscribed.append((entity, kwargs.get("paused", False)))
        return subscribe(self, entity, **kwargs)

    monkeypatch.setattr(DittoConnection, "persisted_event_batches", recording)
    with ditto_sync.serve("ws://127.0.0.1:0/ws/2", history) as server:
        stream = open_partition_stream(server.url, NS, 0, 1, {"things": things},
                                       prefetch=8, timeout=10)
        rows: list[tuple[str, int]] = []
        for batch in stream:
            if not rows:  # the first thing, then the next AHEAD paused
                assert subscribed == [(things[0], False)] + [(t, True) for t in things[1:AHEAD + 1]]
            rows.extend((r["thingId"], r["revision"]) for r in batch)
            reading = things.index(rows[-1][0])
            assert len(subscribed) == min(reading + 1 + AHEAD, len(things))
        assert rows == [(t, r) for t in things for r in (1, 2, 3)]
        assert subscribed == [(things[0], False)] + [(t, True) for t in things[1:]]
        assert history.opened == things
        for thing in things:
            assert history.closed[thing].wait(10), "a history was left open"


class FailingAtFirst:
    """HISTORY, whose subscriptions of ``thing`` fail at subscribe time
    (Ditto's ``failed`` 503) the first ``times`` times."""

    def __init__(self, thing: str, times: int) -> None:
        self.thing, self.left = thing, times

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        if request.kind.name != "SEARCH" and request.entity_id == self.thing and self.left:
            self.left -= 1
            raise DittoException(
                DittoError(status=503, error="things:unavailable", message="try again")
            )
        return HISTORY.open(request)


def test_a_paused_subscription_that_failed_before_its_turn_is_subscribed_again() -> None:
    """The next thing is subscribed paused while one is read; Ditto may end
    it before its turn (an idle one, 408; here at once): it is subscribed
    again when its turn comes, once, and that answer stands."""
    with ditto_sync.serve("ws://127.0.0.1:0/ws/2", FailingAtFirst(THINGS[1], 1)) as server:
        stream = open_partition_stream(server.url, NS, 0, 1, {"things": THINGS[:3]},
                                       prefetch=8, timeout=10)
        got = sorted((row["thingId"], row["revision"]) for batch in stream for row in batch)
    assert got == sorted((t, r) for t in THINGS[:3] for r in range(1, REVISIONS + 1))
    with ditto_sync.serve("ws://127.0.0.1:0/ws/2", FailingAtFirst(THINGS[1], 2)) as server:
        stream = open_partition_stream(server.url, NS, 0, 1, {"things": THINGS[:3]},
                                       prefetch=8, timeout=10)
        with pytest.raises(SourceError, match=r"503 things:unavailable"):
            for _ in stream:
                pass


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_KEYS = st.sampled_from(["thingId", "revision", "timestamp", "topic", "action", "path", "value",
                         "seq", "x", ""])
_EVENTS = st.lists(
    st.dictionaries(
        st.sampled_from(["topic", "path", "revision", "timestamp", "value", "headers"]),
        _JSON
        | st.sampled_from(["ns/thing/things/twin/events/modified", "a/b", "x", ""])
        | st.dictionaries(_KEYS, _JSON, max_size=4),
    ),
    min_size=1,
    max_size=5,
)


@given(events=_EVENTS, fields=st.lists(_KEYS, unique=True, max_size=6))
@settings(max_examples=300, deadline=None)
def test_event_columns_are_the_rows_columns(
    events: list[dict[str, Any]], fields: list[str]
) -> None:
    """The data source's column path (Arrow batches without a dict per row)
    reads what the rows hold: every field, every event, value text included."""
    columns = event_columns(events, fields)
    assert list(columns) == fields
    for name in fields:
        assert columns[name] == [event_row(e).get(name) for e in events]


def test_data_source_arrow_columns_and_rows_read_the_same(spark: Any, ditto_url: str) -> None:
    def read(arrow: str) -> list[tuple[Any, ...]]:
        df = (
            spark.read.format("sansrs").option("url", ditto_url).option("route", NS)
            .option("partitions", 2).option("arrow", arrow)
            .option("schema", SCHEMA + ", topic string, path string, value string").load()
        )
        return sorted(tuple(r) for r in df.collect())

    columns, rows = read("true"), read("false")
    assert columns == rows
    assert len(columns) == len(THINGS) * REVISIONS


# -- wss:// with the reader's TLS settings ------------------------------------------


@pytest.fixture(scope="module")
def wss_url() -> Iterator[str]:
    context = certs().server_context()
    with ditto_sync.serve("wss://127.0.0.1:0/ws/2", SOURCE, ssl_context=context) as server:
        yield server.url


def _pem(ca: Any) -> str:
    return str(ca.cert_pem.bytes().decode())


WSS_OPTIONS = {"things": [THINGS[0], THINGS[3]], "from_revision": 29}
WSS_EVENTS = [(THINGS[0], 29), (THINGS[0], 30), (THINGS[3], 29), (THINGS[3], 30)]


@pytest.fixture
def only_the_given_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    # A self-signed server must be trusted through ClientTls / tls_ca, not
    # through the process's CA environment.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.mark.usefixtures("only_the_given_ca")
def test_spark_wss_ditto_reads_trust_client_tls(wss_url: str) -> None:
    tls = ClientTls(ca=_pem(certs().ca))
    reader = partition_reader(wss_url, route=NS, partitions=1, options=WSS_OPTIONS, tls=tls,
                              fields=["thingId", "revision"])
    assert list(reader.read(0)) == WSS_EVENTS
    rows = open_partition_stream(wss_url, NS, 0, 1, WSS_OPTIONS, access=Access(tls=tls))
    assert [(r["thingId"], r["revision"]) for b in rows for r in b] == WSS_EVENTS
    columns = open_partition_columns(wss_url, NS, 0, 1, WSS_OPTIONS, prefetch=8, timeout=10,
                                     fields=["thingId", "revision"], access=Access(tls=tls))
    assert columns is not None
    got = [pair for c in columns for pair in zip(c["thingId"], c["revision"], strict=True)]
    assert got == WSS_EVENTS
    assert latest_revisions(wss_url, NS, WSS_OPTIONS, 10, tls) == {THINGS[0]: 30, THINGS[3]: 30}


@pytest.mark.usefixtures("only_the_given_ca")
@pytest.mark.parametrize("arrow", ["true", "false"])
def test_spark_wss_ditto_data_source_honours_tls_ca(wss_url: str, arrow: str) -> None:
    # The data source's reader and streaming reader as Spark calls them on
    # the executors and the driver (no JVM needed for these calls).
    from pyspark.sql.datasource import InputPartition
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    from sansrs.adapters.spark.datasource import SansrsDataSource

    options = {"url": wss_url, "route": NS, "query": json.dumps(WSS_OPTIONS),
               "arrow": arrow, "tls_ca": _pem(certs().ca)}
    schema = StructType([StructField("thingId", StringType()), StructField("revision", LongType())])
    source = SansrsDataSource(options)
    got: list[tuple[Any, ...]] = []
    for item in source.reader(schema).read(InputPartition(0)):
        if arrow == "true":
            got.extend(zip(*item.to_pydict().values(), strict=True))
        else:
            got.append(tuple(item))
    assert got == WSS_EVENTS
    stream = source.streamReader(schema)
    assert stream.latestOffset() == {"revisions": {THINGS[0]: 30, THINGS[3]: 30}}


@pytest.mark.usefixtures("only_the_given_ca")
def test_spark_wss_ditto_reads_refuse_a_server_they_do_not_trust(wss_url: str) -> None:
    stranger = Access(tls=ClientTls(ca=_pem(certs().stranger_ca)))
    with pytest.raises(ssl.SSLCertVerificationError):
        list(open_partition_stream(wss_url, NS, 0, 1, WSS_OPTIONS, access=stranger))

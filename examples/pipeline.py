"""``make demo``: the end-to-end Spark pipeline on embedded defaults.

A *source service* publishes a generated history of device events (one
Ditto thing per device; the Ditto streaming protocol over WebSocket, as
``sansrs ditto serve`` serves it), Spark (``local[2]`` unless told otherwise)
reads it through the ``sansrs`` data source (each partition subscribes for
the persisted events of its devices, under Ditto's demand), aggregates per
device, and writes the results through the partition writer to a *sink
service* (RSocket over TCP) that stores them in a JSON-lines file. Both
services run in this process on 127.0.0.1. The run ends with a summary and
checks that every event was counted exactly once; the exit status is 1 if not.

    python examples/pipeline.py [--events N] [--devices D] [--partitions P]
                                [--source ditto|rsocket] [--master URL]
                                [--host ADDR] [--out FILE]

``--source rsocket`` serves the same history as an RSocket row source
(REQUEST_STREAM per partition) instead. ``--master`` (or
``$SANSRS_SPARK_MASTER``) runs the same job on a cluster; ``--host`` (or
``$SANSRS_PIPELINE_HOST``) must then be an address of this machine the
executors can reach.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sansrs.adapters import ditto as ditto_sync
from sansrs.adapters.ditto import (
    HistoryRequest,
    search_pages,
    select_events,
    thing_not_found,
)
from sansrs.adapters.spark import (
    MASTER_ENV,
    JsonLinesSink,
    Service,
    local_session,
    partition_writer,
    serve,
)

from sansrs.ditto import Kind, SearchOptions

HOST_ENV = "SANSRS_PIPELINE_HOST"
EVENTS_ROUTE = "device-events"
STATS_ROUTE = "device-stats"
SCHEMA = "device string, seq long, ts double, temperature double"
START_TS = 1_790_000_000.0  # seconds since the epoch of the first event
NAMESPACE = "org.sansrs.demo"  # the Ditto namespace of the device things
SOURCES = ("ditto", "rsocket")
DITTO_PREFETCH = 512  # events each partition's subscription has requested ahead


@dataclass(frozen=True)
class DeviceHistory:
    """A deterministic history of ``events`` readings from ``devices`` devices.
    Event i comes from device ``i % devices``; partition p of n serves the
    contiguous range of events ``[p*events//n, (p+1)*events//n)``."""

    events: int
    devices: int

    def device(self, i: int) -> str:
        return f"device-{i % self.devices:04d}"

    @staticmethod
    def temperature(i: int) -> float:
        # A spread of readings that is cheap to recompute for the check.
        return 15.0 + ((i * 2654435761) % 2000) / 100.0

    def __call__(
        self, partition: int, partitions: int, options: Mapping[str, Any]
    ) -> Iterator[Any]:
        lo = partition * self.events // partitions
        hi = (partition + 1) * self.events // partitions
        device, temperature = self.device, self.temperature
        for i in range(lo, hi):
            yield {
                "device": device(i),
                "seq": i,
                "ts": START_TS + i * 0.25,
                "temperature": temperature(i),
            }

    def reading(self, i: int) -> dict[str, Any]:
        return {
            "device": self.device(i),
            "seq": i,
            "ts": START_TS + i * 0.25,
            "temperature": self.temperature(i),
        }

    def expected(self) -> dict[str, dict[str, float]]:
        """Per-device figures the job must produce, computed without Spark."""
        out: dict[str, dict[str, float]] = {}
        for i in range(self.events):
            t = self.temperature(i)
            d = out.setdefault(
                self.device(i), {"events": 0, "sum": 0.0, "min": math.inf, "max": -math.inf}
            )
            d["events"] += 1
            d["sum"] += t
            d["min"] = min(d["min"], t)
            d["max"] = max(d["max"], t)
        return out


class Served:
    """Counts the events a source has handed out (sessions run on threads)."""

    def __init__(self) -> None:
        self.rows_served = 0
        self.first_served_at: float | None = None
        self.last_served_at: float | None = None
        self._lock = threading.Lock()

    def count(self, events: Iterable[Any], every: int = 256) -> Iterator[Any]:
        pending = 0
        for event in events:
            yield event
            pending += 1
            if pending == every:
                self._add(pending)
                pending = 0
        self._add(pending)

    def _add(self, n: int) -> None:
        now = time.perf_counter()
        with self._lock:
            self.rows_served += n
            if self.first_served_at is None:
                self.first_served_at = now
            self.last_served_at = now


class DittoDevices(Served):
    """The history as Ditto serves it: device ``d`` is the thing
    ``org.sansrs.demo:device-dddd``; its revision r (from 1) is the reading of
    event ``(r - 1) * devices + d``, a ``modified`` event of the feature
    ``environment`` whose value is the reading. Generated per subscription,
    only as far as the subscriber's demand pulls it. Search lists the things."""

    def __init__(self, history: DeviceHistory) -> None:
        super().__init__()
        self.history = history

    def thing(self, device: int) -> str:
        return f"{NAMESPACE}:{self.history.device(device)}"

    def revisions(self, device: int) -> int:
        h = self.history
        return max(0, (h.events - device + h.devices - 1) // h.devices)

    def event(self, device: int, revision: int) -> dict[str, Any]:
        i = (revision - 1) * self.history.devices + device
        reading = self.history.reading(i)
        stamp = datetime.fromtimestamp(reading["ts"], UTC).isoformat(timespec="milliseconds")
        return {
            "topic": f"{NAMESPACE}/{reading['device']}/things/twin/events/modified",
            "path": "/features/environment/properties",
            "value": reading,
            "revision": revision,
            "timestamp": stamp.replace("+00:00", "Z"),
        }

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        devices = self.history.devices
        if request.kind is Kind.SEARCH:
            assert isinstance(request.options, SearchOptions)
            things = {self.thing(d): {"thingId": self.thing(d)} for d in range(devices)}
            return search_pages(things, request.options)
        namespace, _, name = request.entity_id.partition(":")
        device = int(name[7:]) if name.startswith("device-") and name[7:].isdigit() else -1
        if namespace != NAMESPACE or not 0 <= device < devices or request.topic.group != "things":
            raise thing_not_found(request.entity_id)
        latest = self.revisions(device)
        options: Any = request.options
        first = options.from_historical_revision
        # Start the generator where the subscription starts (a resumed read
        # does not regenerate the revisions before it).
        begin = first if first is not None and first > 0 else 1
        events = (self.event(device, r) for r in range(begin, latest + 1))
        return self.count(select_events(events, options, request.entity_id, latest))


class RowDevices(Served):
    """The history as an RSocket row source (``--source rsocket``)."""

    def __init__(self, history: DeviceHistory) -> None:
        super().__init__()
        self.history = history

    def __call__(
        self, partition: int, partitions: int, options: Mapping[str, Any]
    ) -> Iterator[Any]:
        return self.count(self.history(partition, partitions, options))


def aggregate(spark: Any, source_url: str, partitions: int) -> Any:
    """The job: read the history through the data source, aggregate per device."""
    from pyspark.sql import functions as F

    ditto = source_url.startswith(("ws://", "wss://"))
    events = (
        spark.read.format("sansrs")
        .option("url", source_url)
        # Ditto: the namespace whose things are read; RSocket: the route.
        .option("route", NAMESPACE if ditto else EVENTS_ROUTE)
        .option("partitions", partitions)
        .option("prefetch", DITTO_PREFETCH if ditto else 8)
        .option("schema", SCHEMA)
        .load()
    )
    return events.groupBy("device").agg(
        F.count("*").alias("events"),
        F.sum("temperature").alias("sum_temperature"),
        F.min("temperature").alias("min_temperature"),
        F.max("temperature").alias("max_temperature"),
        F.max("seq").alias("last_seq"),
    )


class Progress(threading.Thread):
    """Prints what the services have moved, once a second, until stopped."""

    def __init__(self, spark: Any, service: Served, sink: JsonLinesSink, events: int) -> None:
        super().__init__(name="pipeline-progress", daemon=True)
        self.service, self.sink, self.events = service, sink, events
        self.tracker = spark.sparkContext.statusTracker()
        self.started = time.perf_counter()
        self.stop = threading.Event()

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        served = self.service.rows_served
        tasks = ""
        for stage_id in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(stage_id)
            if info is not None:
                tasks += f"  spark stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks"
        return (
            f"  [{elapsed:6.1f}s] source: {served:,}/{self.events:,} events served"
            f"  sink: {self.sink.rows_published:,} device rows stored{tasks}"
        )

    def run(self) -> None:
        while not self.stop.wait(1.0):
            print(self.line(), flush=True)


def check_output(path: Path, history: DeviceHistory) -> list[str]:
    """Every device exactly once, with exactly the expected figures."""
    problems: list[str] = []
    expected = history.expected()
    seen: dict[str, dict[str, Any]] = {}
    with path.open("rb") as f:
        for line in f:
            row = json.loads(line)
            if row["device"] in seen:
                problems.append(f"device {row['device']} stored twice")
            seen[row["device"]] = row
    lost = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    if lost:
        problems.append(f"{len(lost)} devices lost, e.g. {lost[:3]}")
    if extra:
        problems.append(f"{len(extra)} unexpected devices, e.g. {extra[:3]}")
    for device in sorted(set(seen) & set(expected)):
        got, want = seen[device], expected[device]
        if got["events"] != want["events"]:
            problems.append(f"{device}: {got['events']} events, expected {want['events']}")
        elif not math.isclose(got["sum_temperature"], want["sum"], rel_tol=1e-9):
            problems.append(f"{device}: temperature sum {got['sum_temperature']} != {want['sum']}")
        elif (got["min_temperature"], got["max_temperature"]) != (want["min"], want["max"]):
            problems.append(f"{device}: min/max differ")
    total = sum(int(r["events"]) for r in seen.values())
    if total != history.events:
        problems.append(f"{total} events counted, expected {history.events}")
    return problems


def run(
    spark: Any,
    *,
    events: int,
    devices: int,
    partitions: int,
    out: Path,
    host: str = "127.0.0.1",
    progress: bool = True,
    source_kind: str = "ditto",
) -> int:
    history = DeviceHistory(events, devices)
    sink = JsonLinesSink(out)
    sink_service = Service(sinks={STATS_ROUTE: sink})
    source: Served
    src_server: Any
    if source_kind == "ditto":
        source = DittoDevices(history)
        src_server = ditto_sync.serve(f"ws://{host}:0/ws/2", source)
        what = f"Ditto history, namespace {NAMESPACE!r}"
    elif source_kind == "rsocket":
        source = RowDevices(history)
        src_server = serve(f"tcp://{host}:0", Service(sources={EVENTS_ROUTE: source}))
        what = f"RSocket route {EVENTS_ROUTE!r}"
    else:
        raise ValueError(f"source must be one of {SOURCES}, not {source_kind!r}")
    with src_server as src, serve(f"tcp://{host}:0", sink_service) as dst:
        print(f"source service  {src.url}  {what}: {events:,} events, "
              f"{devices:,} devices", flush=True)
        print(f"sink service    {dst.url}  route {STATS_ROUTE!r} -> {out}", flush=True)
        ticker = Progress(spark, source, sink, events)
        if progress:
            ticker.start()
        started = time.perf_counter()
        try:
            stats = aggregate(spark, src.url, partitions)
            stats.foreachPartition(partition_writer(dst.url, route=STATS_ROUTE))
        finally:
            ticker.stop.set()
            sink.close_file()
        elapsed = time.perf_counter() - started
        if progress:
            print(ticker.line(), flush=True)
        problems = check_output(out, history)
        with out.open("rb") as f:
            rows_out = sum(1 for _ in f)
        print()
        print("summary")
        print(f"  rows in:     {source.rows_served:,} events read by Spark "
              f"({partitions} partitions)")
        print(f"  rows out:    {rows_out:,} device rows stored "
              f"({sink.partitions_published} partition(s) acknowledged, {sink.duplicates} "
              "duplicate attempt(s) dropped)")
        print(f"  time:        {elapsed:.2f} s for the job, {events / elapsed:,.0f} events/s "
              "(Spark planning and task start-up included)")
        if source.first_served_at is not None and source.last_served_at is not None:
            reading = max(source.last_served_at - source.first_served_at, 1e-6)
            print(f"  reading:     {source.rows_served:,} events in {reading:.2f} s, "
                  f"{source.rows_served / reading:,.0f} events/s")
        if source.rows_served < events:
            problems.append(f"the source served {source.rows_served} events, not {events}")
        elif source.rows_served > events:  # Spark re-ran some read tasks
            print(f"  note:        {source.rows_served - events:,} events re-read by retried "
                  "tasks (counted once: see the check)")
        if problems:
            for p in problems:
                print(f"  FAIL {p}")
            print("  check: FAILED")
            return 1
        print("  check: every event counted exactly once, no device lost or duplicated: ok")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--master",
        default=os.environ.get(MASTER_ENV, "local[2]"),
        help=f"Spark master (default ${MASTER_ENV} or local[2])",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get(HOST_ENV, "127.0.0.1"),
        help=f"address the services listen on, reachable by the executors (default ${HOST_ENV}"
        " or 127.0.0.1)",
    )
    parser.add_argument("--out", type=Path, default=None, help="the sink's JSON-lines file")
    parser.add_argument("--source", choices=SOURCES, default="ditto",
                        help="the source service's protocol: Ditto over WebSocket (default) "
                        "or RSocket over TCP")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.gettempdir()) / "sansrs-device-stats.jsonl"
    print(f"starting Spark ({args.master}) ...", flush=True)
    t0 = time.perf_counter()
    spark = local_session("sansrs-pipeline", master=args.master)
    print(f"Spark {spark.version} ready in {time.perf_counter() - t0:.1f} s", flush=True)
    try:
        return run(spark, events=args.events, devices=args.devices,
                   partitions=args.partitions, out=out, host=args.host,
                   source_kind=args.source)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())

"""Spark: 1M rows through sansrs writers and readers vs a raw-socket baseline.

In one Spark session (``local[2]`` by default), for ``--rows`` rows in
``--partitions`` partitions, each of ``--runs`` runs:

writers (``df.foreachPartition`` over ``spark.range`` with three columns)
  raw      each task opens a socket and sends length-prefixed records (4-byte
           length + the row as JSON, buffered writes), then waits for the
           server's 8-byte count (it frames records from 1 MiB reads): no
           protocol, no batching, no exactly-once
  sansrs   ``partition_writer``: REQUEST_CHANNEL of JSON-lines batches within
           the sink's credit, staged and acknowledged by a ``Sink``
  source   ``df.write.format("sansrs")``: the data source (job commit)
  and both sansrs writers again with ``encoding="arrow"`` (Arrow IPC payloads)
readers
  raw      ``mapPartitionsWithIndex``: each task connects, sends its index, and
           reads length-prefixed JSON records until a zero length (1 MiB
           reads, one ``json.loads`` per record); ``count()``
  sansrs   ``partition_reader`` (REQUEST_STREAM per partition); ``count()``
  source   ``spark.read.format("sansrs")`` (Arrow batches); ``count()`` of a
           column sum, so every row is read
  and both sansrs readers again over Ditto history (``ws://``: one Ditto
  event per row, ``--ditto-rows`` events spread over 64 things, each
  partition subscribing for the persisted events of its things, demand 1,024),
  against the raw reader of the same data: as many rows as events (the raw
  reader runs once more when ``--ditto-rows`` differs from ``--rows``)

Rows are the same JSON objects everywhere, so the ratios measure the
protocol and plumbing, not the encoding. The servers run in this process.

    .venv/bin/python benchmarks/bench_spark.py --runs 3
    .venv/bin/python benchmarks/bench_spark.py --rows 200000 --runs 1   # quick
    .venv/bin/python benchmarks/bench_spark.py --codec --rows 300000 --runs 5
    .venv/bin/python benchmarks/bench_spark.py --ditto-rows 0    # without the Ditto readers
    .venv/bin/python benchmarks/bench_spark.py --readers --cpu --rows 300000 --ditto-rows 100000

``--readers``: the readers only. ``--cpu``: also the CPU time per row of each
kind of process (Linux ``/proc``): this one (Spark's driver side and the
servers), Spark's JVM, its Python workers; the Ditto readers' and the raw
reader's side by side show which side their difference is on.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import socketserver
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sansrs.adapters import ditto as ditto_sync
from sansrs.adapters.ditto import HistoryRequest, search_pages, select_events
from sansrs.adapters.spark import (
    Service,
    Sink,
    Stage,
    WriteHeader,
    local_session,
    partition_reader,
    partition_writer,
    read_rdd,
    serve,
)

LEN = struct.Struct(">I")
COUNT = struct.Struct(">Q")
SCHEMA = "id long, device long, value double"


def make_row(i: int) -> dict[str, Any]:
    return {"id": i, "device": i % 100, "value": i / 3}


def share(partition: int, partitions: int, total: int) -> range:
    return range(partition * total // partitions, (partition + 1) * total // partitions)


# -- the raw-socket baseline -----------------------------------------------


class RawServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, total: int, partitions: int) -> None:
        super().__init__(("127.0.0.1", 0), RawHandler)
        self.total, self.partitions = total, partitions
        self.received = 0
        self.lock = threading.Lock()


class RawHandler(socketserver.StreamRequestHandler):
    rbufsize = 1 << 16
    wbufsize = 1 << 16
    server: RawServer

    def _count_records(self) -> int:
        """Frame the records of a write: big reads, one ``unpack_from`` per
        record (the cheapest framing Python does), so the baseline server is
        not what limits the baseline."""
        n = 0
        buf = b""
        pos = 0
        unpack_from = LEN.unpack_from
        read1 = self.rfile.read1
        while True:
            while len(buf) - pos >= 4:
                (size,) = unpack_from(buf, pos)
                if size == 0:
                    return n
                if len(buf) - pos - 4 < size:
                    break
                pos += 4 + size
                n += 1
            chunk = read1(1 << 20)
            if not chunk:
                raise ConnectionError("raw writer went away")
            buf = buf[pos:] + chunk
            pos = 0

    def handle(self) -> None:
        op = self.rfile.read(1)
        if op == b"W":  # write: records until a zero length, answer the count
            n = self._count_records()
            with self.server.lock:
                self.server.received += n
            self.wfile.write(COUNT.pack(n))
        elif op == b"R":  # read: partition index, then records and a zero length
            (index,) = LEN.unpack(self.rfile.read(4))
            encode = json.JSONEncoder(separators=(",", ":")).encode
            write = self.wfile.write
            for i in share(index, self.server.partitions, self.server.total):
                data = encode(make_row(i)).encode()
                write(LEN.pack(len(data)) + data)
            write(LEN.pack(0))


def raw_writer(address: tuple[str, int]) -> Callable[[Iterator[Any]], None]:
    def write(rows: Iterator[Any]) -> None:
        # Built here: this function is pickled by value (a Struct cannot be).
        encode = json.JSONEncoder(separators=(",", ":")).encode
        pack = struct.Struct(">I").pack
        with socket.create_connection(address, timeout=60) as sock:
            out = sock.makefile("wb", buffering=1 << 16)
            out.write(b"W")
            n = 0
            for row in rows:
                data = encode(dict(zip(row.__fields__, row, strict=True))).encode()
                out.write(pack(len(data)) + data)
                n += 1
            out.write(pack(0))
            out.flush()
            (acked,) = struct.unpack(">Q", sock.makefile("rb").read(8))
            if acked != n:
                raise RuntimeError(f"raw sink counted {acked} of {n}")

    return write


def raw_reader(address: tuple[str, int]) -> Callable[[int, Iterator[Any]], Iterator[Any]]:
    def read(index: int, _: Iterator[Any]) -> Iterator[Any]:
        loads = json.loads
        length = struct.Struct(">I")
        unpack_from = length.unpack_from
        with socket.create_connection(address, timeout=60) as sock:
            sock.sendall(b"R" + length.pack(index))
            # Big reads, framed with one unpack_from per record.
            buf = b""
            pos = 0
            while True:
                while len(buf) - pos >= 4:
                    (size,) = unpack_from(buf, pos)
                    if size == 0:
                        return
                    end = pos + 4 + size
                    if end > len(buf):
                        break
                    yield loads(buf[pos + 4 : end])
                    pos = end
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise ConnectionError("raw source went away")
                buf = buf[pos:] + chunk
                pos = 0

    return read


# -- sansrs services -----------------------------------------------------------


class CountingSink(Sink):
    """Stages and acknowledges like every sink, publishes nowhere."""

    def publish(self, header: WriteHeader, stage: Stage) -> None:
        pass


def rows_source(total: int) -> Callable[[int, int, Mapping[str, Any]], Iterator[Any]]:
    def source(partition: int, partitions: int, options: Mapping[str, Any]) -> Iterator[Any]:
        return map(make_row, share(partition, partitions, total))

    return source


class DittoRows:
    """Ditto history of ``total`` events over ``things`` things: revision r
    of thing k carries ``make_row((r - 1) * things + k)``; generated within
    the subscriber's demand. Search lists the things."""

    NS = "bench"

    def __init__(self, total: int, things: int = 64) -> None:
        self.total, self.things = total, things
        # Thing ID -> k, made once: a subscription costs a lookup, as in a
        # store's index (not a scan of every thing).
        self.index = {f"{self.NS}:t-{k}": k for k in range(things)}

    def open(self, request: HistoryRequest) -> Any:
        if request.kind.name == "SEARCH":
            return search_pages({t: {"thingId": t} for t in self.index}, request.options)
        k = self.index[request.entity_id]
        latest = max(0, (self.total - k + self.things - 1) // self.things)
        topic = f"{self.NS}/t-{k}/things/twin/events/modified"
        events = (
            {"topic": topic, "path": "/attributes", "revision": r,
             "value": make_row((r - 1) * self.things + k)}
            for r in range(1, latest + 1)
        )
        return select_events(events, request.options, request.entity_id, latest)


# -- the runs --------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


#: Kinds of process whose CPU ``--cpu`` reports, in its table's order.
CPU_KINDS = ("driver and servers", "JVM", "Python workers")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds (user + system) so far of this process and of every
    process below it (Spark's JVM, and its Python workers below that), by
    kind; empty where ``/proc`` is missing. Processes that ended are not
    counted: Spark keeps its workers for the session."""
    stats: dict[int, tuple[int, float, bool]] = {}  # pid -> (parent, seconds, java)
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                name, rest = f.read().rsplit(")", 1)
        except OSError:
            continue  # ended meanwhile
        fields = rest.split()
        seconds = (int(fields[11]) + int(fields[12])) / _TICKS
        stats[pid] = (int(fields[1]), seconds, name.endswith("(java"))
    me = os.getpid()
    out = dict.fromkeys(CPU_KINDS, 0.0)
    for pid, (_, seconds, java) in stats.items():
        chain = []
        at = pid
        while at in stats and at != me and len(chain) < 64:
            chain.append(at)
            at = stats[at][0]
        if at != me:
            continue  # not ours
        if pid == me:
            out["driver and servers"] += seconds
        elif java or any(stats[p][2] for p in chain):
            out["JVM" if java else "Python workers"] += seconds
    return out


def bench_codec(total: int, runs: int) -> None:
    """Row encodings in process, no Spark job: ``encode_rows`` (JSON lines, what
    sansrs sends) against Arrow IPC streams of the same 1000-row batches."""
    import pyarrow as pa
    from pyspark.sql import Row
    from sansrs.adapters.spark import decode_rows, encode_rows

    make = Row("id", "device", "value")
    rows = [make(i, i % 100, i / 3) for i in range(total)]
    names = ["id", "device", "value"]

    def arrow_encode() -> list[bytes]:
        out = []
        for k in range(0, total, 1000):
            columns = [pa.array(c) for c in zip(*rows[k : k + 1000], strict=True)]
            batch = pa.RecordBatch.from_arrays(columns, names=names)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            out.append(sink.getvalue().to_pybytes())
        return out

    json_payloads = list(encode_rows(rows, 1000, 1 << 20))
    arrow_payloads = arrow_encode()
    cases: dict[str, Callable[[], object]] = {
        "JSON lines encode (encode_rows)": lambda: list(encode_rows(rows, 1000, 1 << 20)),
        "Arrow IPC encode": arrow_encode,
        "JSON lines decode (decode_rows)": lambda: [decode_rows(p) for p in json_payloads],
        "Arrow IPC decode (to_pylist)": lambda: [
            b.to_pylist() for p in arrow_payloads for b in pa.ipc.open_stream(p)
        ],
    }
    print(f"\n{total:,} pyspark Rows (3 columns), 1000-row payloads, median of {runs} runs\n")
    print("| codec | rows/s |")
    print("| --- | --- |")
    for name, fn in cases.items():
        rate = total / statistics.median(timed(fn) for _ in range(runs))
        print(f"| {name} | {rate:,.0f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--ditto-rows", type=int, default=200_000,
                        help="events for the Ditto readers (0: skip them; one Ditto "
                        "message per row makes them slower than the others)")
    parser.add_argument("--codec", action="store_true",
                        help="only compare the row encodings in process (no Spark job)")
    parser.add_argument("--readers", action="store_true", help="the readers only")
    parser.add_argument("--cpu", action="store_true",
                        help="also CPU per row of this process, the JVM and the Python workers")
    args = parser.parse_args(argv)
    total, parts = args.rows, args.partitions
    if args.codec:
        bench_codec(total, args.runs)
        return 0

    spark = local_session("sansrs-bench", master=args.master)
    sc = spark.sparkContext
    df = spark.range(0, total, numPartitions=parts).selectExpr(
        "id", "id % 100 AS device", "CAST(id AS DOUBLE) / 3 AS value"
    )
    raw = RawServer(total, parts)
    threading.Thread(target=raw.serve_forever, daemon=True).start()
    address = raw.server_address[:2]
    sink = CountingSink(prefetch=8)
    service = Service(sources={"rows": rows_source(total)}, sinks={"bench": sink})
    server = serve("tcp://127.0.0.1:0", service)
    url = server.url
    ditto_total = args.ditto_rows
    ditto_server = ditto_sync.serve("ws://127.0.0.1:0/ws/2", DittoRows(ditto_total))
    ditto_url = ditto_server.url
    # The Ditto readers are compared with the raw reader of the same data:
    # as many rows as they read events (each query has a fixed cost, about
    # 0.17 s through Spark here, which weighs more on fewer rows).
    raw_same = raw
    if 0 < ditto_total != total:
        raw_same = RawServer(ditto_total, parts)
        threading.Thread(target=raw_same.serve_forever, daemon=True).start()
    raw_same_address = raw_same.server_address[:2]

    def check(n: int, what: str, expected: int = total) -> None:
        if n != expected:
            raise SystemExit(f"{what}: {n} rows, expected {expected}")

    def w_raw() -> None:
        before = raw.received
        df.foreachPartition(raw_writer(address))
        check(raw.received - before, "raw writer")

    def w_sansrs() -> None:
        before = sink.rows_published
        df.foreachPartition(partition_writer(url, route="bench"))
        check(sink.rows_published - before, "sansrs writer")

    def w_source() -> None:
        before = sink.rows_published
        df.write.format("sansrs").option("url", url).option("route", "bench").mode(
            "append"
        ).save()
        check(sink.rows_published - before, "data source writer")

    def w_sansrs_arrow() -> None:
        before = sink.rows_published
        df.foreachPartition(partition_writer(url, route="bench", encoding="arrow"))
        check(sink.rows_published - before, "sansrs writer (arrow)")

    def w_source_arrow() -> None:
        before = sink.rows_published
        df.write.format("sansrs").option("url", url).option("route", "bench").option(
            "encoding", "arrow"
        ).mode("append").save()
        check(sink.rows_published - before, "data source writer (arrow)")

    def r_raw() -> None:
        check(sc.parallelize(range(parts), parts).mapPartitionsWithIndex(
            raw_reader(address)).count(), "raw reader")

    def r_sansrs() -> None:
        reader = partition_reader(url, route="rows", partitions=parts)
        check(read_rdd(sc, reader).count(), "sansrs reader")

    def r_source() -> None:
        got = (
            spark.read.format("sansrs").option("url", url).option("route", "rows")
            .option("partitions", parts).option("schema", SCHEMA).load()
            .selectExpr("count(*) AS n", "sum(id) AS s").collect()[0]
        )
        check(got["n"], "data source reader")
        if got["s"] != total * (total - 1) // 2:
            raise SystemExit("data source reader: wrong content")

    def r_ditto_raw() -> None:
        check(sc.parallelize(range(parts), parts).mapPartitionsWithIndex(
            raw_reader(raw_same_address)).count(), "raw reader (Ditto's count)", ditto_total)

    def r_ditto_sansrs() -> None:
        reader = partition_reader(ditto_url, route=DittoRows.NS, partitions=parts)
        check(read_rdd(sc, reader).count(), "sansrs reader (ditto)", ditto_total)

    def r_ditto_source() -> None:
        got = (
            spark.read.format("sansrs").option("url", ditto_url).option("route", DittoRows.NS)
            # "value" is the event's own column (the JSON text) over Ditto
            .option("partitions", parts).option("schema", "id long, device long, revision long")
            .load().selectExpr("count(*) AS n", "sum(id) AS s").collect()[0]
        )
        check(got["n"], "data source reader (ditto)", ditto_total)
        if got["s"] != ditto_total * (ditto_total - 1) // 2:
            raise SystemExit("data source reader (ditto): wrong content")

    cases: dict[str, Callable[[], None]] = {} if args.readers else {
        "writer raw": w_raw, "writer sansrs": w_sansrs, "writer source": w_source,
        "arrow-writer sansrs": w_sansrs_arrow, "arrow-writer source": w_source_arrow,
    }
    cases.update({"reader raw": r_raw, "reader sansrs": r_sansrs, "reader source": r_source})
    if ditto_total > 0:
        cases.update({"ditto-reader raw": r_ditto_raw, "ditto-reader sansrs": r_ditto_sansrs,
                      "ditto-reader source": r_ditto_source})
    sizes = {name: ditto_total if name.startswith("ditto") else total for name in cases}
    for fn in cases.values():  # warm up: worker processes, JIT, imports
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    for run in range(args.runs):
        for name, fn in cases.items():
            before = cpu_by_kind() if args.cpu else {}
            times[name].append(timed(fn))
            if args.cpu:
                after = cpu_by_kind()
                cpus[name].append({k: (after[k] - before.get(k, 0.0)) / sizes[name] * 1e6
                                   for k in after})
        print(f"run {run + 1}/{args.runs}: " + ", ".join(
            f"{n} {sizes[n] / t[-1]:,.0f}/s" for n, t in times.items()), file=sys.stderr,
            flush=True)
    server.close()
    ditto_server.close()
    raw.shutdown()
    if raw_same is not raw:
        raw_same.shutdown()
    spark.stop()

    load = os.getloadavg()[0]
    print(f"\n{total:,} rows, {parts} partitions, {args.master}, median of {args.runs} runs, "
          f"load average {load:.1f}; each ratio is the median of the runs' ratios (the "
          "readers of one run back to back)\n")
    print("| path | raw socket rows/s | sansrs partition fn rows/s | sansrs data source rows/s "
          "| partition fn / raw | data source / raw |")
    print("| --- | --- | --- | --- | --- | --- |")
    kinds = [("reader", "reader")]
    if not args.readers:
        times["arrow-writer raw"] = times["writer raw"]  # the same baseline
        sizes["arrow-writer raw"] = total
        kinds[:0] = [("writer", "writer"), ("arrow-writer", "writer, encoding arrow")]
    if ditto_total > 0:
        kinds.append(("ditto-reader", f"reader, Ditto over WebSocket ({ditto_total:,} events; "
                                      f"raw: {ditto_total:,} rows)"))
    for kind, label in kinds:
        med = {v: sizes[f"{kind} {v}"] / statistics.median(times[f"{kind} {v}"]) for v in
               ("raw", "sansrs", "source")}
        ratio = {v: statistics.median(raw_t / t for raw_t, t in zip(
            times[f"{kind} raw"], times[f"{kind} {v}"], strict=True)) for v in ("sansrs", "source")}
        print(f"| {label} | {med['raw']:,.0f} | {med['sansrs']:,.0f} | {med['source']:,.0f} "
              f"| {ratio['sansrs']:.2f} | {ratio['source']:.2f} |")
    if args.cpu:
        print_cpu(cpus)
    return 0


def print_cpu(cpus: dict[str, list[dict[str, float]]]) -> None:
    """``--cpu``: medians of the runs, µs of CPU per row (per event for Ditto)."""
    if not any(cpus.values()) or not any(any(run.values()) for r in cpus.values() for run in r):
        print("\n(--cpu: no /proc here)")
        return
    print("\nCPU µs per row (medians of the runs; the readers)\n")
    print("| reader | " + " | ".join(CPU_KINDS) + " | all |")
    print("| --- |" + " ---: |" * (len(CPU_KINDS) + 1))
    for name, runs in cpus.items():
        if "reader" not in name or not runs:
            continue
        medians = [statistics.median(run[k] for run in runs) for k in CPU_KINDS]
        total = statistics.median(sum(run.values()) for run in runs)
        print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in medians) + f" | {total:.2f} |")


if __name__ == "__main__":
    sys.exit(main())

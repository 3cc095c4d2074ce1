"""sansrs for Spark: partition writers and readers, a sink and a source
service, and the PySpark Python Data Source ``sansrs`` (docs/spark.md).
Services require their secret from every client by default; ``server.url``
carries it (docs/security.md).

pyspark is needed only by :mod:`.datasource` and :func:`local_session`
(``pip install sansrs[spark]``); the services and the partition functions
import without it.
"""

from __future__ import annotations

from typing import Any

from ._arrow import count_rows_arrow, decode_rows_arrow, encode_rows_arrow
from ._wire import (
    Ack,
    JobRequest,
    OffsetQuery,
    ReadRequest,
    WireError,
    WriteHeader,
    decode_rows,
    encode_rows,
)
from .auth import SECRET_ENV, Access, ClientTls, new_secret
from .errors import SinkError, SourceError, StagingLimitError
from .local import MASTER_ENV, local_session
from .partitions import (
    PartitionReader,
    PartitionWriter,
    partition_reader,
    partition_writer,
    read_rdd,
    task_info,
)
from .remote import (
    WriteTarget,
    commit_job,
    connect_service,
    latest_offset,
    open_partition_stream,
    register_stream_opener,
    write_partition,
)
from .service import RowSource, Service, SparkServer, serve
from .sink import JsonLinesSink, MemorySink, Sink, SinkConfig, Stage

__all__ = [
    "MASTER_ENV",
    "SECRET_ENV",
    "Access",
    "Ack",
    "ClientTls",
    "JobRequest",
    "JsonLinesSink",
    "MemorySink",
    "OffsetQuery",
    "PartitionReader",
    "PartitionWriter",
    "ReadRequest",
    "RowSource",
    "Service",
    "Sink",
    "SinkConfig",
    "SinkError",
    "SourceError",
    "SparkServer",
    "Stage",
    "StagingLimitError",
    "WireError",
    "WriteHeader",
    "WriteTarget",
    "commit_job",
    "connect_service",
    "count_rows_arrow",
    "decode_rows",
    "decode_rows_arrow",
    "encode_rows",
    "encode_rows_arrow",
    "latest_offset",
    "local_session",
    "new_secret",
    "open_partition_stream",
    "partition_reader",
    "partition_writer",
    "read_rdd",
    "register",
    "register_stream_opener",
    "serve",
    "task_info",
    "write_partition",
]


def register(spark: Any) -> None:
    """Make ``spark.read.format("sansrs")`` / ``df.write.format("sansrs")`` available."""
    from .datasource import register as _register

    _register(spark)

"""Byte traces: capture, replay and dissection of protocol connections.

A trace file records one connection's bytes in both directions, chunk by
chunk as they were read, with timestamps supplied by the capturing tool (the
core never reads a clock). docs/trace.md specifies the format.

- ``TraceWriter`` / ``TraceReader`` / ``read_trace``: the file format;
  ``TraceFormatError`` (a ``RemoteProtocolError``) for any bad input.
- ``replay``: feed a trace into sans-IO receivers, chunk by chunk.
- ``StreamDissector`` / ``dissect_records`` / ``format_frame_info``: the
  RSocket dissector behind ``python -m sansrs.trace decode``.
"""

from ._dissect import FrameInfo, StreamDissector, dissect_records, format_frame_info
from ._format import (
    FORMAT_VERSION,
    MAGIC,
    MAX_METADATA_SIZE,
    MAX_RECORD_SIZE,
    DataRecord,
    Direction,
    EndReason,
    EndRecord,
    Record,
    Trace,
    TraceFormatError,
    TraceReader,
    TraceWriter,
    read_trace,
)
from ._replay import Receiver, Replayed, RSocketFrameReceiver, replay

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_METADATA_SIZE",
    "MAX_RECORD_SIZE",
    "DataRecord",
    "Direction",
    "EndReason",
    "EndRecord",
    "FrameInfo",
    "RSocketFrameReceiver",
    "Receiver",
    "Record",
    "Replayed",
    "StreamDissector",
    "Trace",
    "TraceFormatError",
    "TraceReader",
    "TraceWriter",
    "dissect_records",
    "format_frame_info",
    "read_trace",
    "replay",
]

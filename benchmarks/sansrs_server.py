"""``python -m sansrs`` (``sansrs serve ...``) started as every benchmark
process is: its allocator settled first (``raw_peer.settle_allocator``), as
the raw and rsocket-py servers it is compared with; arguments as the CLI's.

    python benchmarks/sansrs_server.py serve tcp://127.0.0.1:0
"""

from __future__ import annotations

import runpy
import sys

from raw_peer import settle_allocator  # this script's folder is on sys.path

if __name__ == "__main__":
    settle_allocator()
    sys.argv[0] = "sansrs"
    runpy.run_module("sansrs", run_name="__main__", alter_sys=True)

"""One SparkSession for every Spark test: ``local[2,4]`` (2 threads, a failed
task is retried up to 3 more times), UI off, quiet logging, fast JVM flags
(sansrs.adapters.spark.local_session sets them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.spark import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("sansrs-tests", master="local[2,4]")
    try:
        yield session
    finally:
        session.stop()

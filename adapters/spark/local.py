"""Building a SparkSession that works on this kind of machine: the workers run
this interpreter, everything binds to 127.0.0.1 in local mode, and logging,
UI and JIT are kept quiet and quick (docs/spark.md lists each setting)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MASTER_ENV", "local_session", "session_conf"]

#: Environment variable naming the Spark master when none is passed.
MASTER_ENV = "SANSRS_SPARK_MASTER"
DEFAULT_MASTER = "local[2]"

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.py4j.name = py4j
logger.py4j.level = warn
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""


def _log4j2_file() -> str:
    path = Path(tempfile.gettempdir()) / "sansrs-spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)
    return str(path)


def session_conf(master: str) -> dict[str, str]:
    """The Spark configuration :func:`local_session` applies for ``master``."""
    java = f"-Dlog4j2.configurationFile=file:{_log4j2_file()}"
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.extraJavaOptions": f"{java} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.executor.extraJavaOptions": java,
    }
    if master.startswith("local"):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def local_session(
    app_name: str = "sansrs",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> Any:
    """A SparkSession on ``master`` (default: ``$SANSRS_SPARK_MASTER`` or
    ``local[2]``) with the data source ``sansrs`` registered.

    In local mode the workers run this interpreter (``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` are set to it) and ``SPARK_LOCAL_IP`` is
    127.0.0.1; on a cluster those are left to the environment."""
    master = master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    if master.startswith("local"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**session_conf(master), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from .datasource import register

    register(spark)
    return spark

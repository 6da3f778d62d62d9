"""The Spark session both jobs use: small and explicit by default, the cluster's when submitted.

Imported only by the pipeline's jobs (pyspark is the ``spark`` extra, never the service's).
"""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_CONF: dict[str, str] = {
    # Few, large tasks: each runs the vectorised numpy rules over a whole bucket of groups.
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",  # dates of recordings and percentiles are UTC days
    # Recording folders are cluster=<name>/date=<YYYY-MM-DD>: keep both as strings.
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # transformWithStateInPandas keeps its state in RocksDB.
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.ui.showConsoleProgress": "false",
}


def spark_session(
    master: str | None = None, app: str = "kafka-monitor-pipeline",
    conf: dict[str, str] | None = None,
) -> Any:
    """A SparkSession. ``master`` None keeps what spark-submit set (or ``local[*]``). The
    Python workers run this interpreter unless ``PYSPARK_PYTHON`` says otherwise: they import
    ``monitor`` (on a cluster, ship it: see the README)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()

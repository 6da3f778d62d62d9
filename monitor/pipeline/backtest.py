"""The backtest: a recorded history (``monitor/record/``) evaluated under a given evaluator
configuration, giving each group's status timeline, the alerts that would have fired and its
lag-in-seconds percentiles per day, so windows and thresholds can be tuned before they change
in production.

Spark's part is the split, never the rules: rows are bucketed by group (a topic's log ends go
to the buckets of the groups that read it, metadata and clock rows to every bucket), each
bucket is replayed by one :class:`Replayer` in one pandas call (the service's store, windows
and vectorised rules over all of the bucket's groups), and the per-group results are plain
aggregations. The same functions run without Spark
(:func:`backtest_local`) for small recordings, tests and the benchmark's reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from monitor.config import EvaluatorConfig
from monitor.pipeline.replay import Replayer
from monitor.record.rows import VERDICT_COLUMNS, empty_verdicts, extend

OBSERVATIONS = "observations"
STATUSES = "statuses"

ALERT_RULES: dict[str, float] = {"STOP": 300.0, "STALL": 300.0, "WARN": 900.0}
"""Status -> seconds it must hold before the alert fires (``alerts/kafka-monitor.rules.yml``:
``kafka_monitor_group_status_state{status=...}`` with ``for:``)."""

TIMELINE_DDL = (
    "`cluster` string, `group` string, `status` string, `since` double, `until` double, "
    "`evaluations` bigint, `open` boolean"
)
ALERT_DDL = (
    "`cluster` string, `group` string, `status` string, `fired_at` double, "
    "`resolved_at` double"
)


def read_local(root: str | Path, dataset: str = OBSERVATIONS) -> Any:
    """A recording's dataset as one pandas frame (``cluster`` and ``date`` from the folders);
    in-progress (hidden) files are skipped."""
    import pyarrow.dataset as ds

    path = Path(root) / dataset
    if not path.exists():
        import pandas as pd

        return pd.DataFrame()
    data = ds.dataset(path, format="parquet", partitioning="hive")
    return data.to_table().to_pandas()


# ---------------------------------------------------------------------- per-group results


_DTYPES = {"double": "float64", "bigint": "int64", "boolean": "bool", "string": "object"}


def _typed(frame: Any, ddl: str) -> Any:
    """Columns in the schema's dtypes even when empty (an empty bucket's frame would be all
    object columns, which Spark's Arrow conversion rejects)."""
    cols = [c.strip().split(" ", 1) for c in ddl.split(",")]
    return frame.astype({name.strip("`"): _DTYPES[t.strip()] for name, t in cols})


def evaluations_frame(columns: Mapping[str, list[Any]]) -> Any:
    import pandas as pd

    frame = pd.DataFrame({n: columns[n] for n, _ in VERDICT_COLUMNS})
    return _typed(frame, ", ".join(f"`{n}` {t}" for n, t in VERDICT_COLUMNS))


def replay_frame(
    rows: Any, config: EvaluatorConfig, *, rounds: bool = True, step: float | None = None
) -> Any:
    """Every evaluation of a frame of rows (one bucket, or a whole small recording)."""
    out = empty_verdicts()
    for found in Replayer(config).replay(rows, rounds=rounds, step=step):
        extend(out, found)
    return evaluations_frame(out)


def timelines(evals: Any) -> Any:
    """Status runs per group: one row per stretch of equal status (``until`` is the first
    evaluation with another status, or the last evaluation for the ``open`` last stretch)."""
    import numpy as np
    import pandas as pd

    cols = ["cluster", "group", "status", "since", "until", "evaluations", "open"]
    if len(evals) == 0:
        return _typed(pd.DataFrame(columns=cols), TIMELINE_DDL)
    e = evals.sort_values(["cluster", "group", "evaluated_at"], kind="stable")
    # A separator pandas keeps (it drops a NUL when concatenating strings, and then cluster
    # "a" with group "bc" would be one key with cluster "ab" and group "c").
    key = (e["cluster"] + "\x1f" + e["group"]).to_numpy(object)
    status = e["status"].to_numpy(object)
    t = e["evaluated_at"].to_numpy(np.float64)
    new_group = np.r_[True, key[1:] != key[:-1]]
    start = new_group | np.r_[True, status[1:] != status[:-1]]
    idx = np.flatnonzero(start)
    stop = np.r_[idx[1:], len(e)]  # first row of the next run
    last_of_group = np.r_[new_group[1:], True][stop - 1]
    until = np.where(last_of_group, t[stop - 1], t[np.minimum(stop, len(e) - 1)])
    return pd.DataFrame({
        "cluster": e["cluster"].to_numpy(object)[idx], "group": e["group"].to_numpy(object)[idx],
        "status": status[idx], "since": t[idx], "until": until,
        "evaluations": (stop - idx).astype(np.int64), "open": last_of_group,
    })


def alerts(timeline: Any, rules: Mapping[str, float] = ALERT_RULES) -> Any:
    """The alerts that would have fired: a status held for its rule's duration fires then, and
    resolves when the status changes (``resolved_at`` NaN while still open)."""
    import numpy as np
    import pandas as pd

    cols = ["cluster", "group", "status", "fired_at", "resolved_at"]
    if len(timeline) == 0:
        return _typed(pd.DataFrame(columns=cols), ALERT_DDL)
    hold = timeline["status"].map(lambda s: rules.get(s, np.inf)).to_numpy(np.float64)
    since = timeline["since"].to_numpy(np.float64)
    until = timeline["until"].to_numpy(np.float64)
    fires = since + hold <= until
    t = timeline[fires]
    return pd.DataFrame({
        "cluster": t["cluster"].to_numpy(object), "group": t["group"].to_numpy(object),
        "status": t["status"].to_numpy(object), "fired_at": since[fires] + hold[fires],
        "resolved_at": np.where(t["open"].to_numpy(bool), np.nan, until[fires]),
    })


def percentiles(evals: Any, qs: Iterable[float] = (0.5, 0.9, 0.99)) -> Any:
    """Lag in seconds per group and UTC day: evaluations, percentiles (linear), maximum."""
    import pandas as pd

    qs = list(qs)
    if len(evals) == 0:
        return pd.DataFrame()
    e = evals.assign(date=pd.to_datetime(evals["evaluated_at"], unit="s").dt.strftime("%Y-%m-%d"))
    g = e.groupby(["cluster", "group", "date"])["lag_seconds"]
    out = g.quantile(qs).unstack()
    out.columns = [f"p{round(q * 100):d}" for q in qs]
    out["max"] = g.max()
    out["evaluations"] = g.size()
    return out.reset_index()


def backtest_local(
    rows: Any, config: EvaluatorConfig, *, rounds: bool = True, step: float | None = None,
    rules: Mapping[str, float] = ALERT_RULES,
) -> dict[str, Any]:
    """The whole backtest in this process (pandas frames)."""
    evals = replay_frame(rows, config, rounds=rounds, step=step)
    line = timelines(evals)
    return {"evaluations": evals, "timelines": line, "alerts": alerts(line, rules),
            "percentiles": percentiles(evals)}


# ---------------------------------------------------------------------- on Spark


def bucketed(rows: Any, buckets: int, *, route_log_ends: bool = False) -> Any:
    """Rows with a ``bucket``: a group's rows go to its bucket, rows that concern every group
    (log ends, metadata, clock marks) to every bucket; canary snapshots are left out.

    ``route_log_ends`` (batch only: it needs the whole input): a topic's log ends go only to
    the buckets of the groups that commit to it, not to every bucket. A group's verdict reads
    only the log ends of its own partitions, so the verdicts are the same, and with B buckets
    the log ends are shuffled and replayed about once instead of B times."""
    from pyspark.sql import functions as F

    per_group = rows.filter(F.col("group").isNotNull() & (F.col("kind") != "canary"))
    per_group = per_group.withColumn(
        "bucket", F.pmod(F.xxhash64("group"), F.lit(buckets)).cast("int")
    )
    shared = rows.filter(F.col("group").isNull())
    if route_log_ends:
        readers = (per_group.filter(F.col("kind") == "commits")
                   .select("cluster", "topic", "bucket").distinct())
        log_ends = shared.filter(F.col("kind") == "log_ends").join(
            F.broadcast(readers), ["cluster", "topic"])
        shared = shared.filter(F.col("kind") != "log_ends")
    shared = shared.withColumn("bucket", F.explode(F.sequence(F.lit(0), F.lit(buckets - 1))))
    out = per_group.unionByName(shared)
    return out.unionByName(log_ends) if route_log_ends else out


def run_backtest(
    spark: Any, recording: str, config: EvaluatorConfig, *, out: str | None = None,
    buckets: int = 4, rounds: bool = True, step: float | None = None,
    rules: Mapping[str, float] = ALERT_RULES, dates: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The backtest on Spark; Spark DataFrames, written under ``out`` when given."""
    from pyspark.sql import functions as F

    rows = spark.read.parquet(str(Path(recording) / OBSERVATIONS))
    if dates is not None:
        rows = rows.filter((F.col("date") >= dates[0]) & (F.col("date") <= dates[1]))
    rows = rows.drop("date")  # a folder name, not an observation: not shipped to Python
    verdict_ddl = ", ".join(f"`{n}` {t}" for n, t in VERDICT_COLUMNS)

    def replay_bucket(frame: Any) -> Any:
        return replay_frame(frame, config, rounds=rounds, step=step)

    evals = (
        bucketed(rows, buckets, route_log_ends=True).groupBy("cluster", "bucket")
        .applyInPandas(replay_bucket, schema=verdict_ddl)
        .withColumn("bucket", F.pmod(F.xxhash64("group"), F.lit(buckets)).cast("int"))
        .persist()
    )
    line = evals.groupBy("cluster", "bucket").applyInPandas(timelines, schema=TIMELINE_DDL)
    fired = line.groupBy("cluster").applyInPandas(
        lambda t: alerts(t, rules), schema=ALERT_DDL
    )
    day = F.date_format(F.from_unixtime("evaluated_at"), "yyyy-MM-dd")
    pct = evals.withColumn("date", day).groupBy("cluster", "group", "date").agg(
        F.percentile("lag_seconds", F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99))).alias("q"),
        F.max("lag_seconds").alias("max"), F.count("*").alias("evaluations"),
    ).select(
        "cluster", "group", "date", F.col("q")[0].alias("p50"), F.col("q")[1].alias("p90"),
        F.col("q")[2].alias("p99"), "max", "evaluations",
    )
    result = {"evaluations": evals.drop("bucket"), "timelines": line, "alerts": fired,
              "percentiles": pct}
    if out is not None:
        for name, frame in result.items():
            frame.write.mode("overwrite").parquet(str(Path(out) / name))
    return result

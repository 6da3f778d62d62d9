"""``kafka-monitor pipeline stream|backtest|score``: the Spark jobs from the command line (also
what ``spark-submit`` runs), and the alert-quality score of a labelled recording. pyspark is
imported only when a job starts."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from typing import Any

from monitor.config import EvaluatorConfig, load_config, parse_duration


def _evaluator(args: argparse.Namespace) -> EvaluatorConfig:
    """The ``evaluator`` section of ``--config`` (defaults without one), with ``--set``
    overrides: the settings to try."""
    base = load_config(args.config).evaluator if args.config else EvaluatorConfig()
    data: dict[str, Any] = base.model_dump()
    for item in args.set or []:
        key, _, value = item.partition("=")
        data[key] = value
    return EvaluatorConfig.model_validate(data)


def _rules(items: list[str] | None) -> dict[str, float]:
    from monitor.pipeline.backtest import ALERT_RULES

    rules = dict(ALERT_RULES)
    for item in items or []:
        status, _, duration = item.partition("=")
        rules[status.upper()] = parse_duration(duration)
    return rules


def _backtest(args: argparse.Namespace) -> int:
    from monitor.pipeline.backtest import run_backtest
    from monitor.pipeline.spark import spark_session

    spark = spark_session(args.master)
    try:
        result = run_backtest(
            spark, args.recording, _evaluator(args), out=args.out, buckets=args.buckets,
            rounds=args.step is None or args.rounds,
            step=parse_duration(args.step) if args.step else None,
            rules=_rules(args.alert),
            dates=(args.since, args.until) if args.since or args.until else None,
        )
        summary = {
            "out": args.out,
            "evaluations": result["evaluations"].count(),
            "status_changes": result["timelines"].count(),
            "alerts": result["alerts"].count(),
        }
        print(json.dumps(summary))
    finally:
        spark.stop()
    return 0


def _score(args: argparse.Namespace) -> int:
    from monitor.pipeline.labels import LabelError, load_labels
    from monitor.pipeline.score import score, summary_rows
    from monitor.pipeline.scorecard import (
        DEFAULTS,
        Thresholds,
        labelled_keys,
        markdown_table,
        plot,
        rule_set_episodes,
    )

    try:
        labels = load_labels(args.labels)
    except LabelError as exc:
        raise SystemExit(f"kafka-monitor pipeline score: {exc}") from None
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise SystemExit("kafka-monitor pipeline score: --plot needs matplotlib "
                         "(pip install 'kafka-monitor[bench]')")
    if not (Path(args.recording) / "observations").is_dir():
        raise SystemExit(f"kafka-monitor pipeline score: {args.recording}: no recording "
                         "(an observations/ folder) there")
    configs = {DEFAULTS: EvaluatorConfig()} if not args.config else {
        f"config {path.stem}": load_config(path).evaluator for path in args.config
    }
    thresholds = Thresholds(args.lag_records, args.lag_seconds, hold=args.hold)
    evaluate = None
    spark = None
    if args.spark:
        from monitor.pipeline.backtest import run_backtest
        from monitor.pipeline.spark import spark_session

        spark = spark_session(args.master)

        from pyspark.sql import functions as F

        keys = labelled_keys(labels)

        def evaluate(config: EvaluatorConfig) -> Any:
            """Only the labelled groups' evaluations reach the driver."""
            evals = run_backtest(spark, args.recording, config)["evaluations"]
            return evals.filter(F.concat_ws("\x1f", "cluster", "group").isin(keys)).toPandas()

    try:
        episodes = rule_set_episodes(args.recording, labels, configs=configs,
                                     thresholds=thresholds, evaluate=evaluate)
    finally:
        if spark is not None:
            spark.stop()
    results = score(episodes, labels)
    if args.plot:
        plot(results, args.plot)
    if args.format == "json":
        print(json.dumps(summary_rows(results), indent=1))
    else:
        print(markdown_table(results), end="")
    return 0


def _stream(args: argparse.Namespace) -> int:
    from monitor.pipeline.spark import spark_session
    from monitor.pipeline.stream import start_stream

    spark = spark_session(args.master)
    try:
        query = start_stream(
            spark, str(args.config), args.out, args.checkpoint, cluster=args.cluster,
            topic=args.topic, buckets=args.buckets, tasks=args.tasks,
            trigger=parse_duration(args.trigger),
        )
        query.awaitTermination()
    finally:
        spark.stop()
    return 0


def add_pipeline_parser(commands: Any) -> None:
    """The ``pipeline`` command and its two jobs, on ``kafka-monitor``'s subparsers."""
    pipeline = commands.add_parser("pipeline", help="the Spark jobs (needs the spark extra)")
    jobs = pipeline.add_subparsers(dest="job", required=True, metavar="JOB")
    master = {"help": "Spark master (default: spark-submit's, else local[*])"}

    stream = jobs.add_parser("stream", help="evaluate every group continuously on Spark")
    stream.add_argument("--config", "-c", type=Path, required=True,
                        help="the monitor's configuration (readable on every executor)")
    stream.add_argument("--cluster", help="which cluster of the file (default: the first)")
    stream.add_argument("--out", required=True, help="Parquet folder for the statuses")
    stream.add_argument("--checkpoint", required=True, help="Spark checkpoint folder")
    stream.add_argument("--topic", help="also produce statuses to this (compacted) topic")
    stream.add_argument("--buckets", type=int, default=4, help="state keys: buckets of groups")
    stream.add_argument("--tasks", type=int, default=2, help="tasks reading __consumer_offsets")
    stream.add_argument("--trigger", default="5s", help="micro-batch interval")
    stream.add_argument("--master", **master)
    stream.set_defaults(func=_stream)

    back = jobs.add_parser("backtest", help="evaluate a recording under given settings")
    back.add_argument("--recording", required=True, help="the recorder's path")
    back.add_argument("--out", required=True, help="folder for evaluations, timelines, "
                      "alerts and percentiles (Parquet)")
    back.add_argument("--config", "-c", type=Path, help="take its evaluator section")
    back.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="override an evaluator setting, e.g. --set window=20")
    back.add_argument("--step", help="evaluate every STEP (e.g. 30s) instead of at the "
                      "recorded rounds")
    back.add_argument("--rounds", action="store_true", help="with --step, also the rounds")
    back.add_argument("--alert", action="append", metavar="STATUS=DURATION",
                      help="alert rule, e.g. STOP=5m (defaults: STOP 5m, STALL 5m, WARN 15m)")
    back.add_argument("--since", help="first date (YYYY-MM-DD)")
    back.add_argument("--until", help="last date (YYYY-MM-DD)")
    back.add_argument("--buckets", type=int, default=8, help="buckets of groups (tasks)")
    back.add_argument("--master", **master)
    back.set_defaults(func=_backtest)

    rate = jobs.add_parser(
        "score", help="score alert rule sets on a labelled recording (recall, false alarms, "
        "time to detect and to clear)")
    rate.add_argument("--recording", required=True, help="the recorder's path")
    rate.add_argument("--labels", required=True, type=Path,
                      help="incident windows over the recording (YAML or JSON; see the README)")
    rate.add_argument("--config", "-c", type=Path, action="append",
                      help="score this configuration's evaluator section (repeatable; "
                      "default: the project's defaults)")
    rate.add_argument("--lag-records", type=int, default=1000,
                      help="the records threshold alert scored beside (default 1000)")
    rate.add_argument("--lag-seconds", type=float, default=60.0,
                      help="the lag-in-seconds threshold alert scored beside (default 60)")
    rate.add_argument("--hold", type=parse_duration, default=300.0,
                      help="how long a threshold must hold before it alerts (default 5m)")
    rate.add_argument("--format", choices=("markdown", "json"), default="markdown")
    rate.add_argument("--plot", type=Path, help="also draw the scores to this PNG")
    rate.add_argument("--spark", action="store_true",
                      help="replay on Spark (recordings too large for one process)")
    rate.add_argument("--master", **master)
    rate.set_defaults(func=_score)

"""``kafka-monitor pipeline stream|backtest``: the Spark jobs from the command line (also what
``spark-submit`` runs). pyspark is imported only when a job starts."""

from __future__ import annotations

import argparse
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

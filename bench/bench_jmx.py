"""Benchmark: one full JMX scrape of a 3-broker cluster against a single one-MBean jmxquery call.

    .venv/bin/python bench/bench_jmx.py               # 3 local Kafka 0.9 brokers, 9 rounds
    .venv/bin/python bench/bench_jmx.py --rounds 15

Every jmxquery call starts a JVM, so the cost of a scrape is dominated by JVM start-up, not by
the number of MBeans. Starts a local 3-broker cluster, then, round by round (same run, so the
machine's noise hits all alike; the order rotates each round):

* ``reference``: ``jmxquery.JMXConnection.query()`` for one MBean on one broker, as the library
  does it (one JVM, the smallest useful JMX call);
* ``full_scrape``: ``JmxCollector.scrape()``: every configured MBean (the default catalogue,
  18 attributes plus the JVM uptime) of all 3 brokers, in one JVM (``JmxMulti``);
* ``full_scrape_jvm_per_broker``: the same scrape the way it falls back without ``javac``:
  one jmxquery JVM per broker, in parallel.

Prints one JSON object with each one's median, best and worst wall time, the ratios of the
medians (``ratio_full_vs_single`` is the issue's target, <= 1.5) and ``ratio_full_vs_single``
per round (min/max: the spread when the machine is shared). The scrapes' JVMs run with
start-up-friendly flags (C1 only, class-data sharing), the reference with jmxquery's defaults.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jmxquery import JMXConnection, JMXQuery  # noqa: E402

from monitor.config import ClusterConfig  # noqa: E402
from monitor.dev.localkafka import LocalKafka  # noqa: E402
from monitor.ingest.jmx import JmxCollector  # noqa: E402
from monitor.ingest.jmx_launcher import Launcher  # noqa: E402
from monitor.model.jmx_metrics import BY_NAME, DEFAULT_MBEANS, JmxScrape  # noqa: E402
from monitor.store.store import Store  # noqa: E402

TARGET = 1.5


def stats(seconds: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(seconds), 4), "best": round(min(seconds), 4),
            "worst": round(max(seconds), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    logging.getLogger("monitor.collectors.jmx").setLevel(logging.ERROR)  # the forced fallback
    urp = BY_NAME["under_replicated_partitions"]
    with LocalKafka(3, offsets_topic_partitions=3) as kafka, \
            tempfile.TemporaryDirectory() as no_launcher:
        config = ClusterConfig(
            name="bench",
            bootstrap_servers=kafka.bootstrap_servers.split(","),
            jmx=[{"broker_id": b.id, "host": "127.0.0.1", "port": b.jmx_port}
                 for b in kafka.brokers],
        )
        one_jvm = JmxCollector(config, 30, 30, Store())
        per_broker = JmxCollector(config, 30, 30, Store(),
                                  launcher=Launcher(Path(no_launcher), javac=""))
        single = JMXConnection(kafka.jmx_service_url(0))
        query = [JMXQuery(urp.mbean, attribute=urp.attribute)]
        answered: list[int] = []

        def reference() -> None:
            got = single.query(query, timeout=30)
            assert len(got) == 1, got

        def scrape(collector: JmxCollector) -> Callable[[], None]:
            def run() -> None:
                result: JmxScrape = collector.scrape()
                assert all(b.ok for b in result.brokers.values()), result
                answered.append(sum(len(b.values) for b in result.brokers.values()))
            return run

        cases = {"reference": reference, "full_scrape": scrape(one_jvm),
                 "full_scrape_jvm_per_broker": scrape(per_broker)}
        time.sleep(6)  # past the brokers' first metrics tick
        for run in cases.values():  # compile the launcher, write the CDS archives
            run()
        times: dict[str, list[float]] = {name: [] for name in cases}
        try:
            for i in range(args.rounds):
                names = list(cases)
                for name in names[i % 3:] + names[:i % 3]:
                    t = time.perf_counter()
                    cases[name]()
                    times[name].append(time.perf_counter() - t)
        finally:
            one_jvm.close()
            per_broker.close()
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = med["full_scrape"] / med["reference"]
    per_round = [f / r for f, r in zip(times["full_scrape"], times["reference"], strict=True)]
    print(json.dumps({
        "benchmark": "jmx_scrape",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_1m": round(os.getloadavg()[0], 2)},
        "brokers": 3,
        "queries_per_broker": len(DEFAULT_MBEANS) + 1,
        "values_per_scrape": statistics.median(answered),
        "rounds": args.rounds,
        "reference_single_call_s": stats(times["reference"]),
        "full_scrape_s": stats(times["full_scrape"]),
        "full_scrape_jvm_per_broker_s": stats(times["full_scrape_jvm_per_broker"]),
        "ratio_full_vs_single": round(ratio, 3),
        "ratio_full_vs_single_per_round": {"min": round(min(per_round), 3),
                                           "max": round(max(per_round), 3)},
        "ratio_jvm_per_broker_vs_single": round(
            med["full_scrape_jvm_per_broker"] / med["reference"], 3),
        "ratio_full_vs_jvm_per_broker": round(
            med["full_scrape"] / med["full_scrape_jvm_per_broker"], 3),
        "target": TARGET,
        "target_met": ratio <= TARGET,
    }, indent=2))


if __name__ == "__main__":
    main()

"""Benchmark: one full JMX scrape of a 3-broker cluster against a single one-MBean jmxquery call.

    .venv/bin/python bench/bench_jmx.py               # 3 local Kafka 0.9 brokers, 7 rounds
    .venv/bin/python bench/bench_jmx.py --rounds 15

Every jmxquery call starts a JVM, so the cost of a scrape is dominated by JVM start-up, not by
the number of MBeans. Starts a local 3-broker cluster, then alternates (same run, so the
machine's noise hits both alike):

* ``reference``: ``jmxquery.JMXConnection.query()`` for one MBean on one broker, as the library
  does it (the smallest useful JMX call);
* ``full_scrape``: ``JmxCollector.scrape()``: every configured MBean (the default catalogue,
  18 attributes plus the JVM uptime) of all 3 brokers, one call per broker, in parallel.

* ``three_single_calls_parallel``: the reference call on each of the 3 brokers at once,
  through jmxquery: as many JVMs as the full scrape, so ``ratio_full_vs_three_single`` is the
  cost of batching every MBean (and of our JVM flags), and ``ratio_three_single_vs_single``
  the floor that starting 3 JVMs at once puts under the full scrape on this machine's cores.

Prints one JSON object with the median and best wall times, ``ratio_full_vs_single``
(medians) and ``target_met`` (ratio <= 1.5). The full scrape's JVMs run with start-up-friendly
flags (C1 only, class-data sharing), the reference with jmxquery's defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from concurrent.futures import ThreadPoolExecutor  # noqa: E402

from jmxquery import JMXConnection, JMXQuery  # noqa: E402

from monitor.collectors.jmx import JmxCollector  # noqa: E402
from monitor.config import ClusterConfig  # noqa: E402
from monitor.jmx_metrics import BY_NAME, DEFAULT_MBEANS  # noqa: E402
from monitor.localkafka import LocalKafka  # noqa: E402
from monitor.store import Store  # noqa: E402

TARGET = 1.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    urp = BY_NAME["under_replicated_partitions"]
    with LocalKafka(3, offsets_topic_partitions=3) as kafka:
        config = ClusterConfig(
            name="bench",
            bootstrap_servers=kafka.bootstrap_servers.split(","),
            jmx=[{"broker_id": b.id, "host": "127.0.0.1", "port": b.jmx_port}
                 for b in kafka.brokers],
        )
        collector = JmxCollector(config, 30, 30, Store())
        single = JMXConnection(kafka.jmx_service_url(0))
        singles = [JMXConnection(kafka.jmx_service_url(b.id)) for b in kafka.brokers]
        pool = ThreadPoolExecutor(len(singles))
        query = [JMXQuery(urp.mbean, attribute=urp.attribute)]
        time.sleep(6)  # past the brokers' first metrics tick
        single_s: list[float] = []
        full_s: list[float] = []
        three_s: list[float] = []
        answered: list[int] = []
        try:
            for _ in range(args.rounds):
                t = time.perf_counter()
                got = single.query(query, timeout=30)
                single_s.append(time.perf_counter() - t)
                assert len(got) == 1, got
                t = time.perf_counter()
                answers = list(pool.map(lambda c: c.query(query, timeout=30), singles))
                three_s.append(time.perf_counter() - t)
                assert all(len(a) == 1 for a in answers), answers
                t = time.perf_counter()
                scrape = collector.scrape()
                full_s.append(time.perf_counter() - t)
                assert all(b.ok for b in scrape.brokers.values()), scrape
                answered.append(sum(len(b.values) for b in scrape.brokers.values()))
        finally:
            collector.close()
            pool.shutdown()
    med = statistics.median
    ratio = med(full_s) / med(single_s)
    print(json.dumps({
        "benchmark": "jmx_scrape",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "brokers": 3,
        "queries_per_broker": len(DEFAULT_MBEANS) + 1,
        "values_per_scrape": statistics.median(answered),
        "rounds": args.rounds,
        "reference_single_call_s": {"median": round(statistics.median(single_s), 4),
                                    "best": round(min(single_s), 4)},
        "full_scrape_s": {"median": round(statistics.median(full_s), 4),
                          "best": round(min(full_s), 4)},
        "three_single_calls_parallel_s": {"median": round(med(three_s), 4),
                                          "best": round(min(three_s), 4)},
        "ratio_full_vs_single": round(ratio, 3),
        "ratio_full_vs_three_single": round(med(full_s) / med(three_s), 3),
        "ratio_three_single_vs_single": round(med(three_s) / med(single_s), 3),
        "target": TARGET,
        "target_met": ratio <= TARGET,
    }, indent=2))


if __name__ == "__main__":
    main()

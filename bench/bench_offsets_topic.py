"""Benchmark of the ``__consumer_offsets`` reader against a real Kafka 0.9 broker.

    .venv/bin/python bench/bench_offsets_topic.py                    # ~1-2 minutes
    .venv/bin/python bench/bench_offsets_topic.py --records 200000   # quicker look

Starts its own local Kafka 0.9.0.1 broker (``monitor.dev.localkafka``, 50 offsets-topic partitions
as Kafka's default), then makes the broker write ``--records`` offset-commit records into
``__consumer_offsets`` the way consumers do: OffsetCommit requests, one per group and round,
each committing ``--partitions`` partitions (``AdminClient.alter_consumer_group_offsets``, many
in flight), so every record is written by the broker's group coordinator itself. The topic
then holds ``groups x partitions`` distinct group-partitions, each committed ``rounds`` times.

Then, in the same run, alternating so both see the same machine conditions (best of
``--repeat``):

* ``raw``: a plain consumer assigned to every partition reads the topic to the high
  watermarks, touching each record's key, value, partition and offset: the practical limit.
* ``collector``: ``OffsetsTopicCollector`` (its reader thread) catches up from the earliest
  offset, decoding every batch and handing it to a fresh ``Store`` as the service uses it:
  keeping Burrow's sliding windows (default ``EvaluatorConfig``), which every commit feeds.

Both are timed from ``assign()`` to reaching the high watermarks. Printed as one JSON object:
``raw_records_per_s``, ``collector_records_per_s``, ``ratio`` (target >= 0.70),
``records_per_reader_cpu_s`` (records per CPU-second of the reader thread: the rate on one
core; target >= 250,000), ``catch_up_seconds_per_million``, and ``store_memory``: bytes the
store allocated (tracemalloc, a separate pass) per tracked group-partition.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient  # noqa: E402

from monitor.config import ClusterConfig  # noqa: E402
from monitor.dev.localkafka import LocalKafka  # noqa: E402
from monitor.dev.localkafka.workload import librdkafka_logger  # noqa: E402
from monitor.ingest.offsets_topic import (  # noqa: E402
    READER_PROPERTIES,
    OffsetsTopicCollector,
)
from monitor.runtime import tune_gc  # noqa: E402
from monitor.store.store import Store  # noqa: E402

OFFSETS_TOPIC = "__consumer_offsets"
RATIO_TARGET = 0.70
RATE_TARGET = 250_000
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(native_id: int) -> float:
    """user + system CPU of one thread of this process (Linux /proc)."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM (Linux >= 4.0)


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def write_commits(
    config: dict[str, Any], topic: str, groups: int, partitions: int, rounds: int
) -> float:
    """``groups x rounds`` OffsetCommit requests of ``partitions`` partitions each."""
    admin = AdminClient(config)
    pending: list[Any] = []
    t0 = time.perf_counter()
    for r in range(rounds):
        for g in range(groups):
            request = ConsumerGroupTopicPartitions(
                f"bench-group-{g:05d}",
                [TopicPartition(topic, p, 1000 * r + p) for p in range(partitions)],
            )
            pending.extend(admin.alter_consumer_group_offsets([request]).values())
            if len(pending) >= 256:
                for future in pending:
                    future.result()
                pending.clear()
    for future in pending:
        future.result()
    return time.perf_counter() - t0


def high_watermarks(config: dict[str, Any]) -> dict[int, int]:
    consumer = Consumer({**config, "group.id": "bench-watermarks"})
    try:
        md = consumer.list_topics(OFFSETS_TOPIC, timeout=10)
        return {
            p: consumer.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, p), timeout=10)[1]
            for p in sorted(md.topics[OFFSETS_TOPIC].partitions)
        }
    finally:
        consumer.close()


def raw_consume(config: dict[str, Any], hw: dict[int, int], batch_size: int) -> dict[str, float]:
    """Read every partition up to ``hw`` touching each record, without decoding, with the
    collector's consumer settings."""
    consumer = Consumer({**config, **READER_PROPERTIES, "group.id": "bench-raw"})
    done = {p for p, h in hw.items() if h == 0}
    records = 0
    try:
        cpu0 = time.thread_time()
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in hw])
        while len(done) < len(hw):
            # As the collector does: what is queued now, else wait (see its reader loop).
            messages = consumer.consume(batch_size, 0) or consumer.consume(batch_size, 0.5)
            for m in messages:
                err = m.error()
                if err is None:
                    m.key()
                    m.value()
                    m.partition()
                    m.offset()
                    records += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition() or 0)
                else:
                    raise RuntimeError(err.str())
        elapsed = time.perf_counter() - t0
        cpu = time.thread_time() - cpu0
    finally:
        consumer.close()
    return {"records": records, "seconds": elapsed, "thread_cpu_s": cpu}


def collector_catch_up(cluster: ClusterConfig, batch_size: int, timeout: float) -> dict[str, Any]:
    """Catch up from the earliest offset with the real collector into a fresh store."""
    store = Store()
    collector = OffsetsTopicCollector(cluster, store, batch_size=batch_size)
    rss0 = rss_bytes()
    reset_peak_rss()
    t0 = time.perf_counter()
    collector.start()
    thread = collector._thread
    assert thread is not None and thread.native_id is not None
    cpu0 = thread_cpu_seconds(thread.native_id)
    deadline = time.monotonic() + timeout
    while not collector.ready:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"collector did not catch up: {collector.progress}")
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    cpu = thread_cpu_seconds(thread.native_id) - cpu0
    rss = rss_bytes() - rss0
    peak = peak_rss_bytes() - rss0
    progress = collector.progress
    stats = collector.stats
    collector.close()
    groups = store.groups(cluster.name)
    tracked = sum(len(g.commits) for name in groups if (g := store.group(cluster.name, name)))
    assert progress.catch_up_seconds is not None
    return {
        "records": progress.records_read,
        "seconds": progress.catch_up_seconds,
        "wall_from_start_s": wall,
        "reader_cpu_s": cpu,
        "rss_delta_bytes": rss,
        "peak_rss_delta_bytes": peak,
        "groups": len(groups),
        "group_partitions": tracked,
        "commits_stored": stats.commits_stored,
        "skipped": stats.decoder.skipped_by_reason,
        "records_by_type": stats.decoder.records_by_type,
    }


def store_memory(cluster: ClusterConfig, batch_size: int, timeout: float) -> dict[str, Any]:
    """Bytes allocated by ``monitor/store/store.py`` (tracemalloc) per tracked group-partition,
    after a full catch-up through the collector (slow under tracemalloc: not timed)."""
    gc.collect()
    tracemalloc.start()
    store = Store()
    collector = OffsetsTopicCollector(cluster, store, batch_size=batch_size)
    collector.start()
    deadline = time.monotonic() + timeout
    while not collector.ready:
        if time.monotonic() > deadline:
            raise RuntimeError("collector did not catch up under tracemalloc")
        time.sleep(0.05)
    collector.close()
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    store_file = str(Path(__file__).resolve().parent.parent / "monitor" / "store.py")
    by_file: dict[str, int] = {}
    for stat in snapshot.statistics("filename"):
        by_file[stat.traceback[0].filename] = stat.size
    held = by_file.get(store_file, 0)
    names = store.groups(cluster.name)
    tracked = sum(len(g.commits) for name in names if (g := store.group(cluster.name, name)))
    decoder_file = next((f for f in by_file if f.endswith("consumer_offsets/decoder.py")), "")
    return {
        "group_partitions": tracked,
        "groups": len(names),
        "store_bytes": held,
        "store_bytes_per_group_partition": round(held / max(1, tracked), 1),
        "decoder_cache_bytes": by_file.get(decoder_file, 0),
        "note": "store.py allocations only; group/topic name strings are shared with the "
        "decoder's key cache (decoder_cache_bytes)",
    }


def main() -> None:
    tune_gc()  # as kafka-monitor run does
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100, help="partitions per commit request")
    ap.add_argument("--batch-size", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    args = ap.parse_args()
    # librdkafka warns at every client creation that 0.9's settings are deprecated: noise here.
    logging.getLogger("monitor.kafka").setLevel(logging.ERROR)
    rounds = max(1, -(-args.records // (args.groups * args.partitions)))

    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "note": "broker JVM, librdkafka threads and Python share these CPUs",
        },
        "broker": "local Kafka 0.9.0.1 (monitor.dev.localkafka), 1 broker, 50 offsets partitions",
        "store": "Store() with sliding windows, EvaluatorConfig defaults (as the service)",
    }
    kafka = LocalKafka(1, offsets_topic_partitions=50, heap="512m").start()
    try:
        config = {**kafka.client_config(), "logger": librdkafka_logger}
        topic = "bench-committed-topic"
        # 0.9 checks only that a committed topic exists, not the partition numbers.
        kafka.create_topic(topic, 1)
        write_s = write_commits(config, topic, args.groups, args.partitions, rounds)
        hw = high_watermarks(config)
        total = sum(hw.values())
        result.update(
            records=total,
            commit_requests=args.groups * rounds,
            distinct_group_partitions=args.groups * args.partitions,
            commits_per_group_partition=rounds,
            write_records_per_s=round(total / write_s),
            batch_size=args.batch_size,
        )
        cluster = ClusterConfig(
            name="bench",
            bootstrap_servers=kafka.bootstrap_servers.split(","),
            broker_version_fallback="0.9.0.1",
        )
        raws: list[dict[str, float]] = []
        runs: list[dict[str, Any]] = []
        for _ in range(args.repeat):
            gc.collect()
            raws.append(raw_consume(config, hw, args.batch_size))
            gc.collect()
            runs.append(collector_catch_up(cluster, args.batch_size, timeout=300))
        for run in [*raws, *runs]:
            assert run["records"] == total, (run["records"], total)
        raw = min(raws, key=lambda r: r["seconds"])
        best = min(runs, key=lambda r: r["seconds"])
        raw_rate = total / raw["seconds"]
        rate = total / best["seconds"]
        per_core = total / best["reader_cpu_s"]
        result.update(
            raw_records_per_s=round(raw_rate),
            raw_runs_s=[round(r["seconds"], 3) for r in raws],
            collector_records_per_s=round(rate),
            collector_runs_s=[round(r["seconds"], 3) for r in runs],
            ratio=round(rate / raw_rate, 4),
            ratio_target=RATIO_TARGET,
            meets_ratio_target=rate / raw_rate >= RATIO_TARGET,
            reader_cpu_s=round(best["reader_cpu_s"], 3),
            records_per_reader_cpu_s=round(per_core),
            raw_thread_cpu_s=round(raw["thread_cpu_s"], 3),
            rate_target=RATE_TARGET,
            meets_rate_target_on_one_core=per_core >= RATE_TARGET,
            broker_caps_wall_rate=raw_rate < RATE_TARGET,
            catch_up_seconds_per_million=round(best["seconds"] * 1_000_000 / total, 3),
            catch_up_wall_from_start_s=round(best["wall_from_start_s"], 3),
            collector_rss_delta_bytes=best["rss_delta_bytes"],
            collector_peak_rss_delta_bytes=best["peak_rss_delta_bytes"],
            store_groups=best["groups"],
            store_group_partitions=best["group_partitions"],
            commits_stored=best["commits_stored"],
            records_by_type=best["records_by_type"],
            skipped=best["skipped"],
        )
        if not args.no_memory:
            result["store_memory"] = store_memory(cluster, args.batch_size, timeout=600)
    finally:
        kafka.stop(graceful=False)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

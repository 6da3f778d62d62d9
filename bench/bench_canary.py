"""Canary benchmark: CPU cost at 100 partitions and a 1 s interval, and the accuracy of its
end-to-end latency.

Against a real local Kafka 0.9 broker (one topic of 100 partitions):

* reference: a bare producer + consumer thread pair sending one 100-byte record per partition
  per second and reading them back, nothing else (the floor for this traffic in this process);
* canary: a ``CanaryProbe`` doing the same traffic with tracking, metrics and a snapshot per
  round (``collect()`` every interval, as the service runs it).

CPU is this process's CPU time over the run, as % of one core; the ratio compares the two.
Accuracy, record by record: an independent consumer in a separate process reads the canary
topic, decodes each record of this probe's run (``monitor/ingest/canary/record.py``) and notes
(partition, sequence, receive time - send time); the probe reports the same figure for each
record it consumes during the measured run (its ``on_record`` hook, unset in the service). The
two are matched by (partition, sequence): the result gives the matched count, the per-record
difference canary - independent (median, p99 of the absolute differences, max absolute), and
both sides' p50/p99 over the matched records only. Prints one JSON object.
Usage: ``python bench/bench_canary.py [--seconds 30]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor.config import parse_config  # noqa: E402
from monitor.dev.localkafka import LocalKafka  # noqa: E402
from monitor.dev.localkafka.workload import librdkafka_logger  # noqa: E402
from monitor.ingest.canary.metrics import CanaryMetrics  # noqa: E402
from monitor.ingest.canary.probe import CanaryProbe  # noqa: E402

PARTITIONS = 100

_INDEPENDENT = r"""
import json, sys, time
from confluent_kafka import Consumer, TopicPartition, OFFSET_END
from monitor.ingest.canary.record import decode
bootstrap, topic, n, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
instance, stream, epoch_ms = sys.argv[5], sys.argv[6], int(sys.argv[7])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-independent",
              "api.version.request": False, "broker.version.fallback": "0.9.0.1",
              "enable.auto.commit": False, "fetch.wait.max.ms": 100})
c.assign([TopicPartition(topic, p, OFFSET_END) for p in range(n)])
out = []
print("ready", flush=True)
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    for m in c.consume(1000, 0.2):
        now = time.time()
        if m.error() is None:
            r = decode(m.value())
            if r is not None and (r.instance, r.stream, r.epoch_ms) == (instance, stream,
                                                                         epoch_ms):
                out.append([r.partition, r.seq, now - r.send_ns / 1e9])
c.close()
print(json.dumps(out))
"""


def cpu_percent(fn: object, seconds: float) -> float:
    start_cpu, start = time.process_time(), time.monotonic()
    fn()  # type: ignore[operator]
    return 100.0 * (time.process_time() - start_cpu) / (time.monotonic() - start)


def reference(kafka: LocalKafka, topic: str, seconds: float) -> None:
    conf = {**kafka.client_config(), "logger": librdkafka_logger}
    producer = Producer({**conf, "acks": "all", "linger.ms": 0})
    consumer = Consumer({**conf, "group.id": "bench-reference", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, -1) for p in range(PARTITIONS)])
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            consumer.consume(1000, 0.2)

    thread = threading.Thread(target=consume)
    thread.start()
    deadline = time.monotonic() + seconds
    payload = b"x" * 100
    while time.monotonic() < deadline:
        tick = time.monotonic()
        for p in range(PARTITIONS):
            producer.produce(topic, payload, partition=p)
        producer.poll(0)
        while time.monotonic() < tick + 1.0:
            producer.poll(0.2)
    stop.set()
    thread.join()
    producer.flush(5)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    seconds = args.seconds
    with LocalKafka(1) as kafka:
        topic = "bench-canary"
        kafka.create_topic(topic, partitions=PARTITIONS)
        kafka.create_topic("bench-reference", partitions=PARTITIONS)
        ref_cpu = cpu_percent(lambda: reference(kafka, "bench-reference", seconds), seconds)

        cfg = parse_config({
            "clusters": [{"name": "bench", "bootstrap_servers": kafka.bootstrap_servers,
                          "broker_version_fallback": "0.9.0.1"}],
            "canary": {"enabled": True, "topic": topic, "interval": "1s",
                       "window": f"{int(seconds) + 60}s", "instance_id": "bench"},
        })
        cluster = cfg.clusters[0]
        probe = CanaryProbe("bench", cluster, cluster, cfg.canary,
                            CanaryMetrics("kafka_canary", "cluster"))
        probe.run_once()  # starts the threads (the consumer is positioned first)
        independent = subprocess.Popen(
            [sys.executable, "-c", _INDEPENDENT, kafka.bootstrap_servers, topic,
             str(PARTITIONS), str(seconds + 5), probe.instance_id, probe.stream,
             str(probe.epoch_ms)],
            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1],
        )
        assert independent.stdout is not None
        independent.stdout.readline()  # "ready"
        time.sleep(3)  # the probe's consumer group settles; both now read the same records

        def run_probe() -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                tick = time.monotonic()
                probe.run_once()
                time.sleep(max(0.0, tick + 1.0 - time.monotonic()))

        # The canary's own figure per record consumed during the measured run (bounded: one
        # entry per record sent, PARTITIONS per second; a list append is thread-safe).
        canary_rows: list[tuple[int, int, float]] = []
        probe.on_record = lambda p, s, lat: canary_rows.append((p, s, lat))
        canary_cpu = cpu_percent(run_probe, seconds)
        probe.on_record = None
        out, _ = independent.communicate(timeout=seconds + 60)
        snap = probe.snapshot()
        probe.close()
    independent_rows = json.loads(out.strip().splitlines()[-1])
    result = {
        "partitions": PARTITIONS,
        "interval_seconds": 1.0,
        "seconds": seconds,
        "reference_cpu_percent_of_one_core": round(ref_cpu, 2),
        "canary_cpu_percent_of_one_core": round(canary_cpu, 2),
        "cpu_ratio_canary_to_reference": round(canary_cpu / ref_cpu, 2) if ref_cpu else None,
        "canary_records_consumed": snap["counts"]["received"],
        "canary_lost": snap["counts"]["lost"],
        **accuracy(canary_rows, independent_rows),
    }
    print(json.dumps(result))


def accuracy(
    canary: list[tuple[int, int, float]], independent: list[list[float]]
) -> dict[str, object]:
    """The canary's end-to-end latency against the independent consumer's, for the records
    both timed (matched by partition and sequence), in milliseconds."""
    theirs = {(int(p), int(s)): lat for p, s, lat in independent}
    ours = {(p, s): lat for p, s, lat in canary}
    keys = sorted(ours.keys() & theirs.keys())
    out: dict[str, object] = {
        "canary_records_timed": len(ours),
        "independent_records_timed": len(theirs),
        "matched_records": len(keys),
    }
    if not keys:
        return out
    c = np.array([ours[k] for k in keys]) * 1000
    i = np.array([theirs[k] for k in keys]) * 1000
    diff = c - i
    absdiff = np.abs(diff)

    def ms(x: float) -> float:
        return round(float(x), 3)

    out.update({
        "difference_ms_median": ms(np.median(diff)),
        "abs_difference_ms_median": ms(np.median(absdiff)),
        "abs_difference_ms_p99": ms(np.percentile(absdiff, 99)),
        "abs_difference_ms_max": ms(absdiff.max()),
        "canary_e2e_p50_ms": ms(np.percentile(c, 50)),
        "canary_e2e_p99_ms": ms(np.percentile(c, 99)),
        "independent_e2e_p50_ms": ms(np.percentile(i, 50)),
        "independent_e2e_p99_ms": ms(np.percentile(i, 99)),
    })
    return out


if __name__ == "__main__":
    main()

"""Mirror checks on two real Kafka 0.9 clusters mirrored by Kafka's own MirrorMaker
(``kafka.tools.MirrorMaker``), watched by the real service: replication latency measured by
the canary; MirrorMaker stopped -> loss and lag; records skipped on the way (offsets moved past
them) -> loss counted; MirrorMaker killed before committing -> duplicates counted.

Each test has a pipeline of its own (topics, MirrorMaker, monitor), mirroring from the shared
1-broker cluster to the shared 3-broker one, so the tests pass alone, in any order and side by
side. The window counts off Kafka: tests/unit/ingest/test_mirror.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import parse_config
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.mirrormaker import MirrorMaker
from monitor.dev.localkafka.workload import end_offsets, librdkafka_logger
from monitor.serve.probe_views import mirror_view
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = [pytest.mark.kafka, pytest.mark.slow(50)]
MIRROR = "dr"


@dataclass
class Pipeline:
    source: LocalKafka
    destination: LocalKafka
    mm: MirrorMaker
    monitor: ServiceThread
    data: str
    canary: str

    def view(self) -> dict[str, Any]:
        collector = next(c for c in self.monitor.service.collectors
                         if c.kind == "mirror" and c.cluster == MIRROR)
        return mirror_view(collector, self.monitor.service.evaluator)  # type: ignore[arg-type]

    def produce(self, count: int) -> None:
        producer = Producer({**self.source.client_config(), "logger": librdkafka_logger})
        for i in range(count):
            producer.produce(self.data, value=b"x" * 40, partition=i % 2)
        assert producer.flush(15) == 0

    def topic_row(self) -> dict[str, Any]:
        return self.view()["topics"][0]

    def canary_counts(self) -> dict[str, int]:
        snap = self.view()["canary"]
        return dict(snap["counts"]) if snap else {}


def total_end(kafka: LocalKafka, topic: str) -> int:
    ends = end_offsets({**kafka.client_config(), "logger": librdkafka_logger}, topic)
    return sum(ends.values())


@pytest.fixture
def pipeline(kafka: LocalKafka, kafka3: LocalKafka) -> Iterator[Pipeline]:
    prefix = make_unique_name("mirror")
    data, canary = f"{prefix}-data", f"{prefix}-canary"
    kafka.create_topic(data, partitions=2)
    kafka.create_topic(canary, replica_assignment=[[0], [0]])
    destination = kafka3
    destination.create_topic(data, partitions=2)
    destination.create_topic(canary, partitions=2)
    # Commits only when stopped gracefully: a SIGKILL then re-mirrors since the last stop.
    mm = MirrorMaker(kafka, destination, f"{prefix}.*", f"{prefix}-mm",
                     commit_interval_ms=600_000)
    try:
        mm.start()
        p = Pipeline(kafka, destination, mm, None, data, canary)  # type: ignore[arg-type]
        p.produce(2)
        wait_for(lambda: total_end(destination, data), 90, "MirrorMaker to mirror",
                 ok=lambda n: n == 2, retry_on=(Exception,))
        config = parse_config({
            "clusters": [
                {"name": name, "bootstrap_servers": k.bootstrap_servers.split(","),
                 "broker_version_fallback": "0.9.0.1",
                 "groups": {"allow": [f"^{prefix}"]}, "topics": {"allow": [f"^{prefix}"]}}
                for name, k in (("src", kafka), ("dst", destination))
            ],
            "collectors": {"metadata_interval": "2s", "broker_offsets_interval": "1s",
                           "group_offsets_interval": "1s"},
            "evaluator": {"interval": "1s"},
            "canary": {"interval": "500ms", "loss_sla": "6s", "window": "30s",
                       "commit_interval": "1s", "instance_id": f"{prefix}-inst"},
            "mirrors": [{"name": MIRROR, "source": "src", "destination": "dst",
                         "topics": [data], "group": f"{prefix}-mm", "canary_topic": canary,
                         "count_window": "3s", "count_delay": "2s"}],
            "http": {"host": "127.0.0.1", "port": 0},
        })
        with ServiceThread(config) as monitor:
            p.monitor = monitor
            # Window counts start at an anchor where nothing is in flight (the topic is
            # quiet now): let it be placed before the tests stop the mirror.
            wait_for(lambda: p.view()["windows"], 60, "the first window counted")
            yield p
    finally:
        mm.close()


def test_replication_latency_is_measured(pipeline: Pipeline) -> None:
    p = pipeline
    snap = wait_for(lambda: p.view()["canary"], 90, "canary records across the mirror",
                    ok=lambda s: s["counts"]["received"] >= 10)
    latency = snap["end_to_end_latency_seconds"]
    assert 0 < latency["p50"] <= latency["p99"] < 6.0
    assert snap["counts"]["lost"] == snap["counts"]["duplicated"] == 0
    assert snap["consume_availability"] == 1.0
    p.produce(20)
    wait_for(p.topic_row, 30, "no mirror lag", ok=lambda r: r["source_log_end_sum"] == 22
             and r["lag"] == 0)
    group = wait_for(lambda: p.view()["group"], 60, "the mirroring group evaluated",
                     ok=lambda g: g["status"] != "NOTFOUND")
    assert group["status"] == "OK"
    base = f"http://127.0.0.1:{p.monitor.service.http_port}"
    body = requests.get(f"{base}/v3/mirror/{MIRROR}", timeout=5).json()
    assert body["mirror"]["canary"]["counts"]["received"] >= 10
    assert requests.get(f"{base}/v3/mirror/nope", timeout=5).status_code == 404
    metrics = requests.get(f"{base}/metrics", timeout=5).text
    assert f'kafka_mirror_topic_lag{{mirror="{MIRROR}",topic="{p.data}"}} 0.0' in metrics
    assert 'kafka_mirror_canary_end_to_end_latency_seconds_bucket' in metrics


def fresh_canary_window(p: Pipeline) -> int:
    """The canary's counts are over its window: start from a window without losses, so a new
    loss shows as a rise from 0 (a windowed count can fall while a new loss happens). Returns
    the baseline, 0."""
    wait_for(p.canary_counts, 90, "no canary loss in the window",
             ok=lambda c: c["lost"] == 0)
    return 0


def test_stopped_mirror_reports_loss_and_lag(pipeline: Pipeline) -> None:
    p = pipeline
    lost_before = fresh_canary_window(p)
    p.mm.stop()
    p.produce(30)
    wait_for(p.topic_row, 30, "mirror lag of the 30 records", ok=lambda r: r["lag"] == 30)
    wait_for(p.canary_counts, 30, "canary records lost",
             ok=lambda c: c["lost"] > lost_before)
    wait_for(lambda: p.view()["windows"], 30, "a window showing the missing records",
             ok=lambda ws: any(w["difference"] > 0 for w in ws))
    p.mm.start()
    wait_for(p.topic_row, 90, "lag back to 0", ok=lambda r: r["lag"] == 0)
    wait_for(p.canary_counts, 60, "the lost records arriving late", ok=lambda c: c["late"] > 0)


def canary_net_lost(p: Pipeline) -> int:
    """Canary records counted lost and never arrived late, from the cumulative counters on
    /metrics: a windowed count would let a loss age out while a test waits on something else."""
    base = f"http://127.0.0.1:{p.monitor.service.http_port}"
    text = requests.get(f"{base}/metrics", timeout=5).text
    totals = {"lost": 0.0, "late": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for kind in totals:
                if (sample.name == f"kafka_mirror_canary_records_{kind}_total"
                        and sample.labels.get("mirror") == MIRROR):
                    totals[kind] += sample.value
    return int(totals["lost"] - totals["late"])


def test_records_skipped_on_the_way_are_counted_lost(pipeline: Pipeline) -> None:
    p = pipeline
    # Everything so far reached the destination (the stopped mirror's backlog included): once
    # every window up to now has closed, the running sum (anchored at 0) is back at 0.
    caught_up = time.time()
    wait_for(lambda: p.view()["windows"], 30, "windows closed past now",
             ok=lambda ws: bool(ws) and ws[-1]["end"] >= caught_up)
    net_before = p.topic_row()["window_difference_sum"]
    assert net_before == 0
    fresh_canary_window(p)
    lost_before = canary_net_lost(p)
    p.mm.stop()
    p.produce(40)
    # Canary records pile up unmirrored: past the loss SLA they count as lost.
    wait_for(p.canary_counts, 30, "canary records lost while the mirror is stopped",
             ok=lambda c: c["lost"] > 0)
    # The operator moves the mirror's offsets to the end: those records never get mirrored.
    admin = AdminClient({**p.source.client_config(), "logger": librdkafka_logger})
    config = {**p.source.client_config(), "logger": librdkafka_logger}
    parts = [TopicPartition(t, part, end) for t in (p.data, p.canary)
             for part, end in sorted(end_offsets(config, t).items())]
    # Graceful stops only so far: the destination holds exactly the records mirrored.
    mirrored = end_offsets({**p.destination.client_config(), "logger": librdkafka_logger},
                           p.canary)
    skipped = sum(tp.offset - mirrored[tp.partition] for tp in parts if tp.topic == p.canary)
    assert skipped > 0

    def skip() -> bool:
        futures = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(p.mm.group, parts)])
        futures[p.mm.group].result(10)
        return True

    wait_for(skip, 60, "the mirror group's offsets moved", retry_on=(Exception,), interval=1)
    p.mm.start()
    wait_for(p.topic_row, 60, "windows to count the 40 skipped records",
             ok=lambda r: r["window_difference_sum"] - net_before == 40 and r["lag"] == 40)
    # Records sent after the skip arrive late once the mirror is back; the skipped ones never
    # do: the net loss settles at exactly their number.
    wait_for(lambda: canary_net_lost(p) - lost_before, 90, f"a net loss of {skipped}",
             ok=lambda n: n == skipped)


def test_records_duplicated_on_the_way_are_counted(pipeline: Pipeline) -> None:
    p = pipeline
    dup_before = p.canary_counts()["duplicated"]
    dst_before = total_end(p.destination, p.data)
    src_before = total_end(p.source, p.data)
    p.produce(20)
    wait_for(lambda: total_end(p.destination, p.data), 60, "the 20 records mirrored",
             ok=lambda n: n == dst_before + 20)
    lag_before = src_before - dst_before  # 0: everything was mirrored
    wait_for(p.topic_row, 30, "the 20 records counted at both ends",
             ok=lambda r: r["source_log_end_sum"] == src_before + 20 and r["lag"] == lag_before)
    windows_before = len(p.view()["windows"])
    p.mm.kill()  # no commit since it started: a restart mirrors the same records again
    p.mm.start()
    wait_for(p.canary_counts, 90, "duplicated canary records",
             ok=lambda c: c["duplicated"] > dup_before)
    # Offset lag only falls, as if the mirror were catching up (here the destination ends up
    # past the source: the lag goes below 0); a window shows the duplicates.
    wait_for(p.topic_row, 60, "the destination past where it was",
             ok=lambda r: r["lag"] < lag_before)
    wait_for(lambda: p.view()["windows"][windows_before:], 60, "a window with duplicates",
             ok=lambda ws: any(w["difference"] < 0 for w in ws))

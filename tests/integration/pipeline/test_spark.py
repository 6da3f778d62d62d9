"""The Spark pipeline on a real scenario, against the real Kafka 0.9 broker.

One fleet of real groups (healthy, lagging, stalled, stopped) is watched at once by the real
service (reading ``__consumer_offsets``, recorder on) and by the streaming job (Spark local[2],
the Python data source reading the same topic). Then:

* the streaming job's statuses equal the in-process evaluator's for every group;
* after the service stops, the Spark backtest of its recording reproduces every status it
  recorded, round by round, as does the in-process replay.

One SparkSession for the module (local[2], 2 shuffle partitions), stopped at the end.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import EvaluatorConfig, MonitorConfig, parse_config
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    GroupConsumer,
    HealthyConsumer,
    LaggingConsumer,
    ProducerLoad,
    StalledConsumer,
    StoppedConsumer,
    librdkafka_logger,
)
from monitor.pipeline.backtest import backtest_local, read_local, run_backtest
from monitor.pipeline.spark import spark_session
from monitor.pipeline.stream import start_stream
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

# Building the image and running Spark each keep both cores busy for a minute: they take
# turns on one worker (xdist group "cpu") rather than starve the time-judged tests together.
pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow(270),
              pytest.mark.xdist_group("cpu")]

CLUSTER = "local"
TICK = 1.0
EXPECTED = {"healthy": "OK", "lagging": "WARN", "stalled": "STALL", "stopped": "STOP"}


def config_data(kafka: LocalKafka, prefix: str, recordings: Path) -> dict:
    return {
        "clusters": [{
            "name": CLUSTER,
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "offsets_source": "offsets_topic",
            "groups": {"allow": [f"^{prefix}"]},
            "topics": {"allow": [f"^{prefix}"]},
        }],
        "collectors": {"metadata_interval": "2s", "broker_offsets_interval": f"{TICK}s"},
        "evaluator": {"interval": f"{TICK}s"},
        "http": {"host": "127.0.0.1", "port": 0},
        "recorder": {"enabled": True, "path": str(recordings), "flush_interval": "2s"},
    }


@dataclass
class Fleet:
    kafka: LocalKafka
    names: dict[str, str]
    config: MonitorConfig
    config_path: Path
    recordings: Path
    work: Path
    service: ServiceThread
    spark: object
    consumers: dict[str, GroupConsumer] = field(default_factory=dict)

    def service_statuses(self) -> dict[str, str]:
        result = self.service.service.evaluator.result(CLUSTER)
        if result is None:
            return {}
        out = {}
        for scenario, name in self.names.items():
            g = result.group(name)
            if g is not None and g.partition_count == 2:
                out[scenario] = g.status
        return out

    def stream_statuses(self) -> dict[str, str]:
        frame = read_local(self.work, "stream-out")
        if len(frame) == 0:
            return {}
        latest = frame.sort_values("evaluated_at").groupby("group").tail(1)
        by_name = {r.group: (r.status, r.partitions) for r in latest.itertuples()}
        return {s: by_name[n][0] for s, n in self.names.items()
                if n in by_name and by_name[n][1] == 2}


@pytest.fixture(scope="module")
def fleet(kafka: LocalKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    prefix = make_unique_name("pipeline")
    names = {s: f"{prefix}-{s}" for s in EXPECTED}
    for topic in names.values():
        kafka.create_topic(topic, partitions=2)
    work = tmp_path_factory.mktemp("pipeline")
    data = config_data(kafka, prefix, work / "recordings")
    config_path = work / "monitor.yaml"
    config_path.write_text(yaml.safe_dump(data))
    cfg = {**kafka.client_config(), "logger": librdkafka_logger}
    spark = spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                            "spark.ui.enabled": "false"})
    with contextlib.ExitStack() as stack:
        stack.callback(spark.stop)
        service = ServiceThread(parse_config(data)).start()
        stack.callback(service.stop)
        fleet = Fleet(kafka, names, parse_config(data), config_path, work / "recordings", work,
                      service, spark)
        for name in names.values():
            producer = ProducerLoad(cfg, name, rate=20)
            producer.start()
            stack.callback(producer.stop)
        consumers: dict[str, GroupConsumer] = {
            "healthy": HealthyConsumer(cfg, names["healthy"], names["healthy"]),
            "lagging": LaggingConsumer(cfg, names["lagging"], names["lagging"], max_rate=4,
                                       commit_interval=2.0),
            "stalled": StalledConsumer(cfg, names["stalled"], names["stalled"], stall_after_s=4),
            "stopped": StoppedConsumer(cfg, names["stopped"], names["stopped"], stop_after_s=8),
        }
        for scenario, consumer in consumers.items():
            consumer.start()
            stack.callback(consumer.stop)
            fleet.consumers[scenario] = consumer
        yield fleet


@dataclass
class Streamed:
    service: dict[str, str]
    stream: dict[str, str]
    topic: str
    published: dict[str, dict]
    stream_seen: dict[str, set[str]]  # every verdict the stream gave each group while waiting


@pytest.fixture(scope="module")
def streamed(fleet: Fleet) -> Streamed:
    """Run the streaming job (Parquet and compacted-topic sinks) until it and the service
    agree on every group with the service's verdicts settled (healthy OK, stopped STOP), then
    stop it; returns both views at that moment (or the last ones seen) and what the topic
    holds."""
    topic = make_unique_name("pipeline-statuses")
    fleet.kafka.create_topic(topic, partitions=1, config={"cleanup.policy": "compact"})
    query = start_stream(
        fleet.spark, str(fleet.config_path), str(fleet.work / "stream-out"),
        str(fleet.work / "checkpoint"), topic=topic, buckets=2, tasks=2, trigger=2.0,
    )
    seen: dict[str, dict[str, str]] = {"service": {}, "stream": {}}
    stream_seen: dict[str, set[str]] = {}
    try:
        def agreed() -> bool:
            if query.exception() is not None:
                raise AssertionError(f"streaming query failed: {query.exception()}")
            seen["service"] = fleet.service_statuses()
            seen["stream"] = fleet.stream_statuses()
            for group, word in seen["stream"].items():
                stream_seen.setdefault(group, set()).add(word)
            settled = (seen["service"].get("healthy"), seen["service"].get("stopped")) == (
                "OK", "STOP")
            return settled and agree(seen["service"], seen["stream"])

        with contextlib.suppress(AssertionError):
            wait_for(agreed, 120, "the stream and the service agreeing on every group",
                     interval=1.0)
    finally:
        query.stop()
    consumer = Consumer({**fleet.kafka.client_config(), "group.id": topic,
                         "enable.partition.eof": True, "logger": librdkafka_logger})
    consumer.assign([TopicPartition(topic, 0, 0)])
    published: dict[str, dict] = {}
    deadline = time.monotonic() + 30
    try:
        at_end = False
        while not at_end:  # to the end: the last verdict of each group is the one that counts
            assert time.monotonic() < deadline, "statuses topic not read to its end"
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None:
                    at_end = at_end or m.error().code() == KafkaError._PARTITION_EOF
                elif m.key() is not None:
                    published[m.key().decode()] = json.loads(m.value())
    finally:
        consumer.close()
    return Streamed(seen["service"], seen["stream"], topic, published, stream_seen)


def agree(service: dict[str, str], stream: dict[str, str]) -> bool:
    """Same verdict for every group. The stream samples log ends at the service's cadence
    and replays commits at their commit times, so even the lagging group's WARN (a trend of
    the lags stored at each commit, which hangs on when the log end was sampled) is the
    service's; the replay test below checks exact equality round by round."""
    return set(service) == set(EXPECTED) and all(stream.get(g) == service[g] for g in service)


def test_streaming_statuses_equal_the_in_process_evaluators(streamed: Streamed) -> None:
    assert len(streamed.service) == 4, streamed
    assert streamed.service["healthy"] == "OK" and streamed.service["stopped"] == "STOP"
    assert agree(streamed.service, streamed.stream), streamed
    # No false alarm on the way: the running consumers were never STALL or STOP.
    for scenario in ("healthy", "lagging"):
        assert not streamed.stream_seen[scenario] & {"STALL", "STOP"}, streamed


def test_stream_publishes_statuses_to_a_compacted_topic(fleet: Fleet, streamed: Streamed) -> None:
    """Keyed cluster/group, valued with the API's status object: the latest verdict per group
    is what compaction keeps, and what a service can serve from (next test)."""
    for name in fleet.names.values():
        value = streamed.published[f"{CLUSTER}/{name}"]
        assert value["group"] == name and value["partition_count"] == 2
        assert sorted(p["partition"] for p in value["partitions"]) == [0, 1]
        assert value["status"] in ("OK", "WARN", "STALL", "STOP")
    assert streamed.published[f"{CLUSTER}/{fleet.names['stopped']}"]["status"] == "STOP"


def test_a_service_serves_the_statuses_the_stream_published(
    fleet: Fleet, streamed: Streamed
) -> None:
    """A second service with ``offsets_source: pipeline`` on the statuses topic answers the v3
    API and /metrics with the stream's verdicts; records that are not verdicts are skipped
    and counted; a tombstone makes the group NOTFOUND."""
    producer = Producer({**fleet.kafka.client_config(), "logger": librdkafka_logger})
    producer.produce(streamed.topic, key=f"{CLUSTER}/junk".encode(), value=b"not a verdict")
    producer.produce(streamed.topic, key=b"no-separator", value=b"{}")
    assert producer.flush(15) == 0
    data = config_data(fleet.kafka, "unused", fleet.work / "unused")
    data["clusters"][0].update({"offsets_source": "pipeline", "groups": {},
                                "pipeline_statuses": {"topic": streamed.topic, "max_age": "1h"}})
    del data["recorder"]
    with ServiceThread(parse_config(data)) as reader:
        base = f"http://127.0.0.1:{reader.service.http_port}/v3/kafka/{CLUSTER}"
        wait_for(lambda: requests.get(f"{base}/consumer", timeout=5).json()["consumers"], 60,
                 "the published groups listed",
                 ok=lambda names: set(fleet.names.values()) <= set(names))
        for name in fleet.names.values():
            want = streamed.published[f"{CLUSTER}/{name}"]
            got = requests.get(f"{base}/consumer/{name}/lag", timeout=5).json()["status"]
            for key in ("status", "totallag", "partition_count", "lag_seconds", "evaluated_at",
                        "partitions", "maxlag", "complete"):
                assert got[key] == want[key], (name, key)
            assert got["stale"] is False
        stopped = fleet.names["stopped"]
        text = requests.get(f"http://127.0.0.1:{reader.service.http_port}/metrics",
                            timeout=5).text
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        labels = (("cluster", CLUSTER), ("group", stopped))
        assert samples[("kafka_monitor_group_status", labels)] == 5  # STOP
        assert samples[("kafka_consumergroup_group_sum_lag", labels)] == \
            streamed.published[f"{CLUSTER}/{stopped}"]["totallag"]
        for reason in ("key", "value"):
            key = (("cluster", CLUSTER), ("reason", reason))
            assert samples[("kafka_monitor_pipeline_statuses_records_skipped_total", key)] == 1
        # The stream tombstones a group that is gone: the service stops reporting it.
        healthy = fleet.names["healthy"]
        producer.produce(streamed.topic, key=f"{CLUSTER}/{healthy}".encode(), value=None)
        assert producer.flush(15) == 0
        wait_for(lambda: requests.get(f"{base}/consumer/{healthy}/status", timeout=5), 30,
                 "the tombstoned group NOTFOUND", ok=lambda r: r.status_code == 404)
        assert requests.get(f"{base}/consumer/{stopped}/status",
                            timeout=5).json()["status"]["status"] == "STOP"


def test_backtest_reproduces_the_statuses_the_service_recorded(
    fleet: Fleet, streamed: Streamed
) -> None:
    fleet.service.stop()  # the recorder closes its files
    recorded = read_local(fleet.recordings, "statuses")
    mine = recorded[recorded["group"].isin(list(fleet.names.values()))]
    assert {"OK", "STOP"} <= set(mine["status"]), set(mine["status"])
    rounds = mine["evaluated_at"].nunique()
    assert rounds >= 10

    def keyed(frame: object) -> dict[tuple[float, str], str]:
        return {(round(r.evaluated_at, 6), r.group): r.status
                for r in frame.itertuples()  # type: ignore[attr-defined]
                if r.group in fleet.names.values()}

    want = keyed(mine)
    evaluator = fleet.config.evaluator
    local = backtest_local(read_local(fleet.recordings), evaluator)["evaluations"]
    assert keyed(local) == want
    result = run_backtest(fleet.spark, str(fleet.recordings), evaluator,
                          out=str(fleet.work / "backtest"), buckets=2)
    spark_evals = result["evaluations"].toPandas()
    assert keyed(spark_evals) == want
    # What it would have said with other settings: a huge allowed lag silences everything.
    calm = run_backtest(fleet.spark, str(fleet.recordings), EvaluatorConfig(allowed_lag=10**9),
                        buckets=2, rules={"STOP": 1.0, "STALL": 1.0, "WARN": 1.0})
    assert set(calm["evaluations"].toPandas()["status"]) == {"OK"}
    assert calm["alerts"].count() == 0
    fired = read_local(fleet.work / "backtest", "alerts")
    del fired  # default rules (5 min) fire nothing in a one-minute run; the files exist
    pct = read_local(fleet.work / "backtest", "percentiles").set_index("group")
    assert pct.loc[fleet.names["stopped"], "max"] > pct.loc[fleet.names["healthy"], "p50"]
    shutil.rmtree(fleet.work / "backtest")

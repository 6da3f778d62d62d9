"""The streaming job: ``__consumer_offsets`` and broker offsets into Spark, per-bucket windows in
Spark state, statuses out to Parquet and to a compacted Kafka topic.

* Source: a Python data source (``pyspark.sql.datasource``; Spark has no Kafka connector jar
  here). Its offsets are the high watermarks of the offsets topic's partitions; each micro-batch
  is split into tasks that each read their own ranges of partitions with confluent-kafka and
  decode them with the service's reader (:class:`OffsetsTopicCollector`'s batch handling and
  decoder, not a copy), plus one task that hands over the metadata and log ends the driver
  sampled with the service's collectors at the service's cadence since the last batch.
  Everything comes out as :mod:`monitor.record.rows`; commits are replayed at their commit
  times, between the log-end samples taken before and after them, as the service sees them.
* Judged as of each batch's end offsets (its ``fresh`` mark), not the wall clock.
* State: rows are keyed by (cluster, bucket of groups); ``transformWithStateInPandas`` keeps one
  :class:`Replayer` per bucket (the service's store and windows, pickled into a value state) and
  evaluates all of the bucket's groups at once with the service's vectorised rules each batch.
* Sink: with a topic, each group's status object (the v3 API's, :mod:`monitor.model.status_json`)
  produced to it keyed ``cluster/group``, a tombstone when the group is gone; then every
  batch's verdicts appended to Parquet (``cluster=/date=`` folders). Create the topic with
  ``cleanup.policy=compact``: it keeps the latest verdict per group, and a service with
  ``offsets_source: pipeline`` serves from it
  (:mod:`monitor.ingest.pipeline_statuses`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from monitor.config import ClusterConfig, CollectorsConfig, EvaluatorConfig, load_config
from monitor.ingest.broker_offsets import BrokerOffsetsCollector
from monitor.ingest.kafka_client import client_config
from monitor.ingest.metadata import MetadataCollector
from monitor.ingest.offsets_topic import READER_PROPERTIES, OffsetsTopicCollector
from monitor.model.observations import CommitBatch
from monitor.pipeline.backtest import bucketed
from monitor.pipeline.replay import Replayer
from monitor.record.rows import SPARK_DDL, VERDICT_DDL, ClockMark, RowBuilder, extend
from monitor.store.store import Store

SOURCE_NAME = "kafka_monitor_observations"
_READ_TIMEOUT = 60.0  # a task that cannot reach its end offsets in this long fails (retried)


def load_cluster(path: str, name: str | None) -> tuple[ClusterConfig, EvaluatorConfig]:
    config = load_config(path)
    cluster = config.cluster(name) if name else config.clusters[0]
    return cluster, config.evaluator


@dataclass
class _Capture:
    """Stands in for the store inside a Spark task: the service's collectors write their
    observations here, and they leave as rows."""

    observations: list[object] = field(default_factory=list)
    _metadata: dict[str, Any] = field(default_factory=dict)

    def metadata(self, cluster: str) -> Any:
        return self._metadata.get(cluster)

    def put_metadata(self, m: Any) -> None:
        self._metadata[m.cluster] = m
        self.observations.append(m)

    def _put(self, obs: object) -> None:
        self.observations.append(obs)

    put_commits = put_broker_offsets = put_group = put_group_deleted = _put
    put_offsets_deleted = put_group_fetch_failed = _put


# Python workers are reused between tasks: clients and collectors live as long as the worker.
_WORKER: dict[tuple[str, str], Any] = {}


def _worker_state(path: str, cluster: ClusterConfig) -> Any:
    key = (path, cluster.name)
    state = _WORKER.get(key)
    if state is None:
        capture = _Capture()
        store = cast(Store, capture)
        state = _WORKER[key] = {
            "capture": capture,
            "metadata": MetadataCollector(cluster, 60.0, store),
            "offsets": BrokerOffsetsCollector(cluster, 10.0, store),
            "reader": OffsetsTopicCollector(cluster, store),
            "consumer": None,
        }
    return state


def _consumer(cluster: ClusterConfig, role: str) -> Consumer:
    return Consumer(client_config(cluster, **{
        "group.id": f"kafka-monitor-pipeline-{cluster.name}",  # never joined or committed
        "client.id": f"kafka-monitor-pipeline-{role}", **READER_PROPERTIES,
    }))


class _LogEndSampler:
    """Metadata and every partition's log end sampled on the driver, every
    ``collectors.broker_offsets_interval`` as the service samples them, not once per batch:
    Burrow's rules judge each commit against the log end known when it was stored, so the
    stream must see log ends at the service's cadence to reach the service's verdicts (a
    lagging consumer's lag grows at each commit only if the log end moved in between)."""

    def __init__(self, cluster: ClusterConfig, collectors: CollectorsConfig) -> None:
        self._capture = _Capture()
        store = cast(Store, self._capture)
        self._metadata = MetadataCollector(cluster, collectors.metadata_interval, store)
        self._offsets = BrokerOffsetsCollector(cluster, collectors.broker_offsets_interval,
                                               store)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._next_metadata = 0.0
        self._round()  # the first batch has log ends to judge its commits against
        self._thread = threading.Thread(target=self._run, name="log-end-sampler", daemon=True)
        self._thread.start()

    def _round(self) -> None:
        with self._lock:  # run_once never raises: a failed round is simply not sampled
            if time.monotonic() >= self._next_metadata and self._metadata.run_once():
                self._next_metadata = time.monotonic() + self._metadata.interval
            self._offsets.run_once()

    def _run(self) -> None:
        while not self._stop.wait(self._offsets.interval):
            self._round()

    def drain(self) -> list[object]:
        """The observations sampled since the last drain."""
        with self._lock:
            taken, self._capture.observations = self._capture.observations, []
        return taken

    def close(self) -> None:
        self._stop.set()
        self._thread.join(self._offsets.interval + 30)
        with self._lock:
            self._metadata.close()
            self._offsets.close()


class ObservationsSource(DataSource):
    """Options: ``config`` (the monitor's YAML, readable on every executor), ``cluster``
    (default: the first), ``tasks`` (Spark tasks reading the offsets topic, default 2)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SPARK_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return ObservationsReader(dict(self.options))


class ObservationsReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.path = options["config"]
        self.cluster_name = options.get("cluster")
        self.tasks = max(1, int(options.get("tasks", "2")))
        self._driver_consumer: Consumer | None = None
        self._sampler: _LogEndSampler | None = None
        self._samples: dict[int, list[object]] = {}  # tick -> what the sampler saw before it

    def _cluster(self) -> ClusterConfig:
        return load_cluster(self.path, self.cluster_name)[0]

    def _watermarks(self) -> dict[str, tuple[int, int]]:
        cluster = self._cluster()
        if self._driver_consumer is None:
            self._driver_consumer = _consumer(cluster, "driver")
        c, topic = self._driver_consumer, cluster.offsets_topic.topic
        timeout = cluster.request_timeout
        meta = c.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        out = {}
        for p in sorted(meta.partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            out[str(p)] = (int(low), int(high))
        return out

    def initialOffset(self) -> dict:
        earliest = self._cluster().offsets_topic.start == "earliest"
        marks = self._watermarks()
        start = {p: lo if earliest else hi for p, (lo, hi) in marks.items()}
        return {"p": start, "tick": 0, "at": time.time()}

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        # A new tick every trigger: every batch brings the log ends sampled since the last
        # one and re-evaluates.
        if self._sampler is None:
            self._sampler = _LogEndSampler(self._cluster(), load_config(self.path).collectors)
        tick = int(start["tick"]) + 1
        self._samples[tick] = self._sampler.drain()
        marks = self._watermarks()
        return {"p": {p: hi for p, (_lo, hi) in marks.items()}, "tick": tick, "at": time.time()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ranges = [
            (int(p), int(start["p"].get(p, 0)), int(hi))
            for p, hi in end["p"].items()
            if int(hi) > int(start["p"].get(p, 0))
        ]
        parts = [
            InputPartition({"kind": "offsets", "ranges": ranges[i :: self.tasks]})
            for i in range(self.tasks)
            if ranges[i :: self.tasks]
        ]
        # Samples are None for a batch planned by an earlier driver (a restart): its task
        # then samples once itself.
        parts.append(InputPartition({"kind": "broker", "at": float(end["at"]),
                                     "samples": self._samples.get(int(end["tick"]))}))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        value = partition.value
        cluster = self._cluster()
        state = _worker_state(self.path, cluster)
        capture: _Capture = state["capture"]
        capture.observations = []
        if value["kind"] == "broker":
            if value.get("samples") is not None:
                capture.observations.extend(value["samples"])
            else:
                state["metadata"].collect()
                state["offsets"].collect()
            capture.observations.append(ClockMark(cluster.name, "fresh", value["at"]))
        else:
            if state["consumer"] is None:
                state["consumer"] = _consumer(cluster, "task")
            _read_ranges(state["consumer"], state["reader"], cluster, value["ranges"])
        rows = RowBuilder()
        for i, obs in enumerate(capture.observations):
            at = cast(float, getattr(obs, "observed_at", None) or getattr(obs, "at", 0.0))
            first = len(rows)
            rows.add(0, int(at * 1e6) * 16 + i % 16, obs)  # time order across tasks
            if isinstance(obs, CommitBatch):
                _at_commit_times(rows, first)
        capture.observations = []
        yield from rows.to_arrow().to_batches()

    def commit(self, end: dict) -> None:
        for tick in [t for t in self._samples if t <= int(end["tick"])]:
            del self._samples[tick]

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        if self._driver_consumer is not None:
            self._driver_consumer.close()
            self._driver_consumer = None


def _at_commit_times(rows: RowBuilder, first: int) -> None:
    """Replay the commits from ``first`` on at their commit times (Kafka's, in ms), not at the
    time the task read them: the replay then stores each commit after the log-end samples
    taken before it was made and before those taken after, as the service (which reads
    commits as they are written) does. Commits of one millisecond form one observation."""
    seq, times = rows.cols["seq"], rows.cols["commit_time"]
    for j in range(first, len(seq)):
        if times[j] is not None:
            seq[j] = int(times[j]) * 16_000  # the microsecond * 16 scale of the other keys


def _read_ranges(
    consumer: Consumer, reader: OffsetsTopicCollector, cluster: ClusterConfig,
    ranges: list[tuple[int, int, int]],
) -> None:
    """Consume [lo, hi) of each offsets-topic partition, decoded by the service's reader."""
    topic = cluster.offsets_topic.topic
    consumer.assign([TopicPartition(topic, p, lo) for p, lo, _hi in ranges])
    left = {p: hi for p, _lo, hi in ranges}
    deadline = time.monotonic() + _READ_TIMEOUT
    while left:
        if time.monotonic() > deadline:
            raise TimeoutError(f"offsets topic partitions {sorted(left)} not read to the end")
        batch = []
        for m in consumer.consume(10_000, 0.5):
            p, o = m.partition(), m.offset()
            if p not in left or o is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and o >= left[p]:
                    del left[p]
                continue
            if o < left[p]:
                batch.append(m)
                if o >= left[p] - 1:
                    del left[p]
        if batch:
            reader.handle_messages(batch)


STREAM_DDL = VERDICT_DDL + ", `detail` string"
"""The stream's output: the verdict columns, plus (when it publishes to a topic) each group's
status object as JSON; ``detail`` null with status NOTFOUND is a group that left the bucket
(expired or deleted): a tombstone on the topic."""


class BucketProcessor(StatefulProcessor):
    """One bucket of groups: its replayer (store, windows) in state, evaluated every batch.
    ``publish``: also render each group's status object, and tombstone groups that went."""

    def __init__(self, config: EvaluatorConfig, publish: bool = False) -> None:
        self.config = config
        self.publish = publish

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("replayer", "blob binary")

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import pandas as pd

        stored = self.state.get() if self.state.exists() else None
        replayer = Replayer.from_bytes(stored[0]) if stored else Replayer(self.config)
        frame = pd.concat(list(rows), ignore_index=True)
        for _ in replayer.replay(frame, rounds=False):
            pass
        cluster = str(key[0])
        # Judged as of the moment the batch's end offsets were taken (its "fresh" mark): the
        # commits made since are not read yet, and a clock run on to the wall time would
        # count the batch's own delay as consumer silence (a false STALL or STOP).
        now = replayer.seen_until(cluster) or time.time()
        out = replayer.evaluate(cluster, now, detail=self.publish)
        if self.publish:
            gone = sorted(replayer.published.difference(out["group"]))
            replayer.published = set(out["group"])
            extend(out, {"cluster": [cluster] * len(gone), "group": gone,
                         "evaluated_at": [now] * len(gone), "status": ["NOTFOUND"] * len(gone),
                         "lag_seconds": [0.0] * len(gone), "totallag": [0] * len(gone),
                         "partitions": [0] * len(gone), "detail": [None] * len(gone)})
        else:
            out["detail"] = [None] * len(out["group"])
        self.state.update((replayer.to_bytes(),))
        # Object columns: pandas 3's Arrow-backed strings reach Spark 4.3's converter as
        # chunked arrays, which it rejects.
        yield pd.DataFrame(out).astype(
            {"cluster": object, "group": object, "status": object, "detail": object}
        )

    def close(self) -> None:
        pass


def _produce(cluster: ClusterConfig, topic: str) -> Any:
    def send(rows: Iterator[Any]) -> None:
        # Imported here: the closure is pickled to the executors, the module is not.
        from confluent_kafka import Producer

        from monitor.ingest.kafka_client import client_config

        producer = Producer(client_config(cluster, **{"client.id": "kafka-monitor-pipeline"}))
        for r in rows:
            detail = r["detail"]
            producer.produce(topic, key=f"{r['cluster']}/{r['group']}".encode(),
                             value=detail.encode() if detail is not None else None)
            producer.poll(0)
        if producer.flush(30) > 0:
            raise RuntimeError(f"statuses not delivered to {topic}")
    return send


def start_stream(
    spark: Any, config_path: str, out: str, checkpoint: str, *, cluster: str | None = None,
    topic: str | None = None, buckets: int = 4, tasks: int = 2, trigger: float = 5.0,
) -> Any:
    """Start the streaming query (returned: ``awaitTermination()`` or ``stop()`` it)."""
    from pyspark.sql import functions as F

    cluster_cfg, evaluator = load_cluster(config_path, cluster)
    spark.dataSource.register(ObservationsSource)
    rows = (
        spark.readStream.format(SOURCE_NAME)
        .option("config", config_path).option("cluster", cluster_cfg.name)
        .option("tasks", str(tasks)).load()
    )
    verdicts = bucketed(rows, buckets).groupBy("cluster", "bucket").transformWithStateInPandas(
        statefulProcessor=BucketProcessor(evaluator, publish=topic is not None),
        outputStructType=STREAM_DDL,
        outputMode="Update", timeMode="None",
    )
    send = _produce(cluster_cfg, topic) if topic else None

    def sink(batch: Any, batch_id: int) -> None:
        day = F.date_format(F.from_unixtime("evaluated_at"), "yyyy-MM-dd")
        batch = batch.withColumn("date", day).persist()
        # The topic first: it is what services serve live, and a verdict in the Parquet
        # record is then always in the topic too (a query stopped mid-batch used to leave
        # the record ahead of the topic).
        if send is not None:
            batch.foreachPartition(send)
        batch.drop("detail").write.mode("append").partitionBy("cluster", "date").parquet(out)
        batch.unpersist()

    return (
        verdicts.writeStream.outputMode("update").foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger} seconds").start()
    )

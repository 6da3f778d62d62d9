"""Verdicts the Spark stream published, read into the store (``offsets_source: pipeline``).

For fleets one service cannot evaluate, ``kafka-monitor pipeline stream --topic T`` evaluates
the groups on Spark and produces each group's verdict (the API's status object, keyed
``cluster/group``) to a compacted topic on the cluster; a tombstone when the group is gone.
This collector reads that topic so the service answers the v3 API and Prometheus from it:
the first round reads the whole topic (compaction keeps the latest verdict per group), later
rounds what arrived since.

* **A plain consumer**, owned by the collector and used by one round at a time: ``assign()``
  from the beginning, never joined or committed to (like the ``__consumer_offsets`` reader).
* **Ready** once every partition has been read to its end once.
* **Bad records are skipped and counted** by reason (``key``: not ``cluster/group``,
  ``value``: not a verdict) and logged once per reason; verdicts of other clusters and of
  groups the cluster's filter excludes are left out and counted too.
"""

from __future__ import annotations

import json
import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from monitor.config import ClusterConfig
from monitor.ingest.base import Collector
from monitor.ingest.kafka_client import client_config
from monitor.model.metric_catalogue import Reading
from monitor.model.status_json import group_from_json
from monitor.model.verdicts import GroupStatus
from monitor.store.store import Store

_log = logging.getLogger("monitor.collector.pipeline_statuses")

_BATCH = 10_000
_POLL = 0.2  # a round ends at the first empty consume of this long


class PipelineStatusesCollector(Collector):
    """``round_budget``: the longest one round reads; what is left is read by the next."""

    kind = "pipeline_statuses"

    def __init__(
        self, cluster: ClusterConfig, interval: float, store: Store, *, round_budget: float = 10.0
    ) -> None:
        super().__init__(cluster.name, interval)
        self._config = cluster
        self._store = store
        self.topic = cluster.pipeline_statuses.topic
        self.round_budget = round_budget
        self._consumer: Consumer | None = None
        self._unread: set[int] | None = None  # partitions not yet read to the end once
        self.records = 0
        self.skipped: dict[str, int] = {}
        self._logged: set[str] = set()
        store.put_published(cluster.name, {})  # served from the stream from the start

    @property
    def ready(self) -> bool:
        return self._unread is not None and not self._unread

    def counters(self) -> list[Reading]:
        """Records read and left out (``kafka_monitor_pipeline_statuses_*``)."""
        c, p = (self.cluster,), "kafka_monitor_pipeline_statuses"
        return [Reading(f"{p}_records", c, self.records),
                *(Reading(f"{p}_records_skipped", (*c, reason), n)
                  for reason, n in sorted(self.skipped.items()))]

    def _assign(self) -> Consumer:
        consumer = Consumer(client_config(self._config, **{
            "group.id": f"kafka-monitor-statuses-{self.cluster}",  # never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
        }))
        try:
            meta = consumer.list_topics(self.topic, timeout=self._config.request_timeout)
            topic = meta.topics.get(self.topic)
            if topic is None or topic.error is not None or not topic.partitions:
                reason = topic.error if topic is not None else "absent"
                raise KafkaException(f"statuses topic {self.topic!r} not readable: {reason}")
            parts = sorted(topic.partitions)
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in parts])
        except BaseException:
            consumer.close()
            raise
        self._unread = set(parts)
        return consumer

    def collect(self) -> None:
        if self._consumer is None:
            self._consumer = self._assign()
        deadline = time.monotonic() + self.round_budget
        found: dict[str, GroupStatus | None] = {}
        try:
            while time.monotonic() < deadline:
                messages = self._consumer.consume(_BATCH, _POLL)
                if not messages:
                    break
                for m in messages:
                    err = m.error()
                    if err is None:
                        self._take(m.key(), m.value(), found)
                    elif err.code() == KafkaError._PARTITION_EOF:
                        if self._unread is not None:
                            self._unread.discard(m.partition())
                    else:
                        raise KafkaException(err)
        finally:
            if found:  # what was read before an error is kept
                self._store.put_published(self.cluster, found)

    def _take(self, key: bytes | None, value: bytes | None,
              found: dict[str, GroupStatus | None]) -> None:
        self.records += 1
        try:
            cluster, group = (key or b"").decode().split("/", 1)
        except ValueError:  # no separator, or not UTF-8
            self._skip("key")
            return
        if cluster != self.cluster or not group:
            self._skip("other_cluster" if group else "key")
            return
        if not self._config.groups.matches(group):
            self._skip("filtered")
            return
        if value is None:
            found[group] = None
            return
        try:
            verdict = group_from_json(json.loads(value))
        except (ValueError, KeyError, TypeError, AttributeError):
            self._skip("value")
            return
        if verdict.group != group or verdict.cluster != cluster:
            self._skip("value")
            return
        found[group] = verdict

    def _skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if reason not in self._logged and reason in ("key", "value"):
            self._logged.add(reason)
            _log.warning("statuses record skipped (logged once per reason)",
                         extra={"cluster": self.cluster, "topic": self.topic, "reason": reason})

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

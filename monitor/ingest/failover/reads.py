"""What the failover translation reads from (and ``failover apply`` writes to) one cluster, over
librdkafka clients built like every other (:mod:`monitor.ingest.kafka_client`): partition
counts, log ends, lookups by time, the records at given offsets, scans from given offsets,
and a group's committed offsets, members and commits for the command line."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from monitor.config import ClusterConfig
from monitor.ingest.kafka_client import client_config
from monitor.ingest.record_fetch import ONE_RECORD, Position, fetch_records
from monitor.rules.failover import Record, Scan

_SCAN_BATCH = 500


def digest(key: bytes | None, value: bytes | None) -> str:
    """A record's identity across the mirror, with its timestamp: the mirror keeps key and
    value (MirrorMaker 2 does), offsets it does not. Lengths are hashed too, so (key, value)
    pairs never collide by concatenation."""
    h = hashlib.blake2b(digest_size=16)
    for part in (key, value):
        h.update(b"\xff" if part is None else len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def to_record(m: Message) -> Record | str:
    """The record as the translation compares it, or ``no_timestamp`` (brokers before 0.10)."""
    kind, ts = m.timestamp()
    if kind == TIMESTAMP_NOT_AVAILABLE or ts <= 0:
        return "no_timestamp"
    return Record(int(m.offset() or 0), int(ts), digest(m.key(), m.value()))


class ClusterReads:
    """One cluster's clients for the translation; ``timeout``: seconds per request."""

    def __init__(self, cluster: ClusterConfig, timeout: float, purpose: str) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self._id = f"kafka-monitor-{purpose}-{cluster.name}"
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None
        self._scanner: Consumer | None = None

    # -------------------------------------------------------------------- clients

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(client_config(self.cluster, **{"client.id": self._id}))
        return self._admin

    def _one_record(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(client_config(self.cluster, **{
                "group.id": self._id, "client.id": self._id, **ONE_RECORD}))  # never joined
        return self._consumer

    def _scan_consumer(self) -> Consumer:
        if self._scanner is None:
            self._scanner = Consumer(client_config(self.cluster, **{
                "group.id": self._id, "client.id": f"{self._id}-scan",
                **ONE_RECORD, "max.partition.fetch.bytes": 1_048_576,
                "queued.max.messages.kbytes": 16_384}))
        return self._scanner

    def close(self) -> None:
        for consumer in (self._consumer, self._scanner):
            if consumer is not None:
                consumer.close()
        self._consumer = self._scanner = None
        self._admin = None

    # -------------------------------------------------------------------- reads

    def partitions(self, topic: str) -> int | None:
        """The topic's partition count; None when the cluster does not have it. Asked of the
        whole metadata: a request naming the topic would create it on a broker that creates
        topics on demand."""
        meta = self.admin().list_topics(timeout=self.timeout)
        found = meta.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return None
        return len(found.partitions)

    def log_ends(self, topic: str, partitions: int) -> dict[int, int]:
        consumer = self._one_record()
        return {p: int(consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=self.timeout, cached=False)[1])
                for p in range(partitions)}

    def lookup(self, topic: str, targets: Mapping[int, int]) -> dict[int, tuple[int, int | None]]:
        """Per partition, the first offset whose record's timestamp is at least the target
        (ms) and that timestamp; (-1, None) when no record is that recent."""
        if not targets:
            return {}
        specs = {TopicPartition(topic, p): OffsetSpec.for_timestamp(ts)
                 for p, ts in targets.items()}
        out: dict[int, tuple[int, int | None]] = {}
        for tp, future in self.admin().list_offsets(
                specs, request_timeout=self.timeout).items():
            info = future.result()
            ts = int(info.timestamp) if info.offset >= 0 and info.timestamp >= 0 else None
            out[tp.partition] = (int(info.offset), ts)
        return out

    def records(self, positions: Sequence[Position]) -> dict[Position, Record | str]:
        """The record at each position (with its timestamp and digest) or why there is none
        (``no_timestamp`` or the reasons of :func:`fetch_records`)."""
        found = fetch_records(self._one_record(), positions, self.timeout)
        return {p: to_record(m) if isinstance(m, Message) else m for p, m in found.items()}

    def scan(self, topic: str, starts: Mapping[int, int], stop_after_ms: Mapping[int, int],
             max_records: int) -> dict[int, Scan]:
        """Records from each start offset on, per partition, until one is later than its
        ``stop_after_ms``, ``max_records`` were read, or the log end."""
        consumer = self._scan_consumer()
        read: dict[int, list[Record]] = {p: [] for p in starts}
        ended: set[int] = set()
        open_ = set(starts)
        consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        deadline = time.monotonic() + self.timeout
        try:
            while open_ and time.monotonic() < deadline:
                for m in consumer.consume(_SCAN_BATCH, 0.2):
                    p = m.partition()
                    if p is None or p not in open_:
                        continue
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            ended.add(p)
                            open_.discard(p)
                            continue
                        raise KafkaException(err)
                    record = to_record(m)
                    if isinstance(record, str):
                        open_.discard(p)
                        continue
                    read[p].append(record)
                    if record.timestamp_ms > stop_after_ms[p] or len(read[p]) >= max_records:
                        open_.discard(p)
        finally:
            consumer.unassign()
        return {p: Scan(p, tuple(read[p]), p in ended) for p in starts}

    # -------------------------------------------------------------------- groups

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (Admin API)."""
        request = [ConsumerGroupTopicPartitions(group)]
        result = self.admin().list_consumer_group_offsets(
            request, request_timeout=self.timeout)[group].result()
        return {(tp.topic, tp.partition): int(tp.offset)
                for tp in result.topic_partitions or [] if tp.offset >= 0}

    def members(self, group: str) -> list[str]:
        """The group's live members, as ``client_id@host (member_id)``."""
        described = self.admin().describe_consumer_groups(
            [group], request_timeout=self.timeout)[group].result()
        return [f"{m.client_id}@{m.host} ({m.member_id})" for m in described.members or []]

    def commit(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        request = [ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])]
        result = self.admin().alter_consumer_group_offsets(
            request, request_timeout=self.timeout)[group].result()
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)

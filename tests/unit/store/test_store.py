"""The store's semantics, which every offset source relies on: ordering, staleness instead of
loss, and what deletes a topic or a group."""

from __future__ import annotations

from monitor.model.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    GroupDeleted,
    GroupFetchFailed,
    GroupMember,
    GroupMembership,
    OffsetsDeleted,
    OffsetSource,
    PartitionMetadata,
)
from monitor.store.store import Store

C = "c1"


def commits(
    rows: list[tuple[str, str, int, int, int | None, int]],
    source: OffsetSource = "offsets_topic",
    at: float = 1000.0,
) -> CommitBatch:
    return CommitBatch(
        cluster=C, source=source, observed_at=at,
        groups=[r[0] for r in rows], topics=[r[1] for r in rows],
        partitions=[r[2] for r in rows], offsets=[r[3] for r in rows],
        commit_times=[r[4] for r in rows], orders=[r[5] for r in rows],
    )


def metadata(topics: dict[str, int], at: float = 1000.0) -> ClusterMetadata:
    return ClusterMetadata(
        cluster=C, observed_at=at, brokers={0: "h:1"}, controller_id=0,
        topics={
            t: tuple(PartitionMetadata(p, 0, (0,), (0,)) for p in range(n))
            for t, n in topics.items()
        },
    )


def membership(group: str, owned: tuple[tuple[str, int], ...] = ()) -> GroupMembership:
    return GroupMembership(
        cluster=C, group=group, source="admin", observed_at=1000.0, state="Stable",
        protocol_type="consumer", protocol="range", generation=None,
        members=(GroupMember("m1", "client-1", "/10.0.0.1", owned),),
    )


def test_newest_commit_wins_by_order_within_a_source() -> None:
    store = Store()
    store.put_commits(commits([("g", "t", 0, 100, 5_000, 10), ("g", "t", 0, 90, 4_000, 9)]))
    commit = store.group(C, "g").commits[("t", 0)]  # type: ignore[union-attr]
    assert (commit.offset, commit.order, commit.commit_time) == (100, 10, 5.0)
    store.put_commits(commits([("g", "t", 0, 120, 6_000, 11)]))
    assert store.group(C, "g").commits[("t", 0)].offset == 120  # type: ignore[union-attr]


def test_admin_commit_uses_observation_time_and_the_offsets_topic_wins_between_sources() -> None:
    store = Store()
    store.put_commits(commits([("g", "t", 0, 50, None, 1)], source="admin", at=2000.0))
    commit = store.group(C, "g").commits[("t", 0)]  # type: ignore[union-attr]
    assert commit.commit_time == 2000.0 and commit.source == "admin"
    # The offsets topic sees every commit with its time: its first commit of the group
    # restarts the group's windows from it, even if it is older than the Admin read ...
    store.put_commits(commits([("g", "t", 0, 40, 1_500_000, 99)], at=2001.0))
    commit = store.group(C, "g").commits[("t", 0)]  # type: ignore[union-attr]
    assert (commit.offset, commit.source) == (40, "offsets_topic")
    # ... Admin reads of that group are then ignored (freshness included) ...
    store.put_commits(commits([("g", "t", 0, 70, None, 2)], source="admin", at=2600.0))
    assert store.group(C, "g").commits[("t", 0)].offset == 40  # type: ignore[union-attr]
    assert store.group_states(C)["g"].offsets_at == 2001.0
    # ... and its commits go on.
    store.put_commits(commits([("g", "t", 0, 60, 2_500_000, 100)], at=2500.0))
    assert store.group(C, "g").commits[("t", 0)].offset == 60  # type: ignore[union-attr]
    assert store.group_windows(C, "g") is not None
    assert [e["offset"] for e in store.group_windows(C, "g")[("t", 0)]] == [40, 60]  # type: ignore[index]


def test_failed_partitions_keep_previous_values_marked_stale() -> None:
    store = Store()
    store.put_broker_offsets(BrokerOffsets(C, 1.0, ["t", "t"], [0, 1], [0, 5], [10, 20]))
    store.put_broker_offsets(
        BrokerOffsets(C, 2.0, ["t"], [0], [0], [15], failed={("t", 1): "_TIMED_OUT"})
    )
    offsets = store.broker_offsets(C)
    assert offsets[("t", 0)].log_end == 15 and not offsets[("t", 0)].stale
    assert offsets[("t", 1)].log_end == 20 and offsets[("t", 1)].stale
    assert offsets[("t", 1)].error == "_TIMED_OUT" and offsets[("t", 1)].observed_at == 1.0
    store.put_broker_offsets(BrokerOffsets(C, 3.0, ["t"], [1], [5], [25]))
    assert not store.broker_offsets(C)[("t", 1)].stale


def test_failed_partition_never_seen_stays_unknown() -> None:
    store = Store()
    store.put_broker_offsets(BrokerOffsets(C, 1.0, [], [], [], [], failed={("t", 0): "x"}))
    assert store.broker_offsets(C) == {}


def test_topic_gone_from_metadata_is_deleted_everywhere() -> None:
    store = Store()
    store.put_metadata(metadata({"keep": 1, "drop": 2}))
    store.put_broker_offsets(
        BrokerOffsets(C, 1.0, ["keep", "drop", "drop"], [0, 0, 1], [0, 0, 0], [1, 2, 3])
    )
    store.put_commits(commits([("g", "keep", 0, 1, 1, 1), ("g", "drop", 1, 2, 1, 2)]))
    store.put_metadata(metadata({"keep": 1}))
    assert set(store.broker_offsets(C)) == {("keep", 0)}
    assert set(store.group(C, "g").commits) == {("keep", 0)}  # type: ignore[union-attr]


def test_group_fetch_failure_marks_stale_and_keeps_offsets() -> None:
    store = Store()
    store.put_commits(commits([("g", "t", 0, 7, None, 1)], source="admin"))
    store.put_group_fetch_failed(GroupFetchFailed(C, "g", "COORDINATOR_NOT_AVAILABLE", 2.0))
    group = store.group(C, "g")
    assert group is not None and group.stale and group.commits[("t", 0)].offset == 7
    store.put_commits(commits([("g", "t", 0, 8, None, 2)], source="admin"))
    assert not store.group(C, "g").stale  # type: ignore[union-attr]
    store.put_group_fetch_failed(GroupFetchFailed(C, "unknown", "x", 2.0))
    assert store.group(C, "unknown") is None


def test_group_without_members_is_kept_while_it_has_offsets() -> None:
    store = Store()
    store.put_commits(commits([("g", "t", 0, 7, 1, 1), ("g", "t", 1, 9, 1, 2)]))
    store.put_group(membership("g", (("t", 0), ("t", 1))))
    assert store.group(C, "g").membership.owners()[("t", 1)].client_id == "client-1"  # type: ignore[union-attr]
    store.put_group_deleted(GroupDeleted(C, "g", 2.0))  # last member left (0.9 tombstone)
    group = store.group(C, "g")
    assert group is not None and group.membership is None and len(group.commits) == 2
    store.put_offsets_deleted(OffsetsDeleted(C, "g", "t", 0, 3.0))
    assert store.groups(C) == ["g"]
    store.put_offsets_deleted(OffsetsDeleted(C, "g", "t", 1, 3.0))
    assert store.groups(C) == []


def test_group_with_members_but_no_offsets_is_dropped_by_its_tombstone() -> None:
    store = Store()
    store.put_group(membership("fresh"))
    assert store.groups(C) == ["fresh"]
    store.put_group_deleted(GroupDeleted(C, "fresh", 2.0))
    assert store.groups(C) == []


def test_remove_group() -> None:
    store = Store()
    store.put_commits(commits([("g", "t", 0, 7, 1, 1)]))
    store.remove_group(C, "g")
    assert store.group(C, "g") is None and store.clusters() == [C]

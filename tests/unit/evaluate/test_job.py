"""The evaluation job over a real store, on a simulated timeline (no Kafka; the real-broker
scenarios are in test_verdict_matrix.py): how freshness, the Admin API's
re-observations, membership and expiry shape the verdicts."""

from __future__ import annotations

import pytest

from monitor.config import EvaluatorConfig
from monitor.evaluate.job import Evaluator
from monitor.model.observations import (
    BrokerOffsets,
    CommitBatch,
    GroupMember,
    GroupMembership,
    OffsetSource,
)
from monitor.store.store import Store

C = "c1"
T0 = 1_800_000_000.0
TOPIC = "orders"


class Timeline:
    """One group on one partition; the producer writes 10 records per second."""

    def __init__(self, source: OffsetSource, **config: object) -> None:
        self.store = Store(EvaluatorConfig(window=5, min_distance=0.5, **config))  # type: ignore[arg-type]
        self.source = source
        self.reader_fresh: float | None = None
        self.evaluator = Evaluator(
            self.store, self.store.evaluator_config, lambda _c: self.reader_fresh, stale_after=5
        )
        self.order = 0

    def leo(self, t: float) -> int:
        return int((t - T0) * 10)

    def log_end(self, t: float) -> None:
        self.store.put_broker_offsets(BrokerOffsets(C, t, [TOPIC], [0], [0], [self.leo(t)]))

    def commit(self, t: float, offset: int, group: str = "g") -> None:
        self.order += 1
        self.store.put_commits(
            CommitBatch(
                cluster=C, source=self.source, observed_at=t, groups=[group], topics=[TOPIC],
                partitions=[0], offsets=[offset],
                commit_times=[None if self.source == "admin" else int(t * 1000)],
                orders=[self.order],
            )
        )

    def members(self, t: float, n: int, group: str = "g") -> None:
        self.store.put_group(
            GroupMembership(
                cluster=C, group=group, source=self.source, observed_at=t,
                state="Stable" if n else "Empty", protocol_type="consumer", protocol="range",
                generation=None,
                members=tuple(
                    GroupMember(f"m{i}", f"client-{i}", "/10.0.0.1", ((TOPIC, 0),))
                    for i in range(n)
                ),
            )
        )

    def status(self, t: float, group: str = "g") -> str | None:
        result = self.evaluator.evaluate_cluster(C, t)
        g = result.group(group)
        return g.status if g is not None else None


def healthy_until(tl: Timeline, stop: float, source_reads: bool = True) -> None:
    """Committing its position (the log end) every second until ``stop``."""
    t = T0 + 1
    while t <= stop:
        tl.log_end(t)
        tl.commit(t, tl.leo(t))
        if source_reads:
            tl.reader_fresh = t
        t += 1


def test_reader_outage_freezes_the_clock_instead_of_stop() -> None:
    """The offsets-topic reader loses the broker: no commits arrive, but that is our
    blindness, not the consumer's. The verdict holds (stale) until the reader is back."""
    tl = Timeline("offsets_topic")
    healthy_until(tl, T0 + 10)
    assert tl.status(T0 + 10.5) == "OK"
    # Outage from T0+10: log ends still move (another path), the reader sees nothing.
    for t in range(11, 60):
        tl.log_end(T0 + t)
    result = tl.evaluator.evaluate_cluster(C, T0 + 60)
    g = result.group("g")
    assert g is not None and g.status != "STOP" and g.stale
    # The reader is back and caught up: still no commits -> the consumer really stopped.
    tl.reader_fresh = T0 + 60
    assert tl.status(T0 + 60) == "STOP"


def test_admin_reads_stay_current_until_the_next_read_is_due_but_offsets_topic_commits_do_not(
) -> None:
    """``read_interval`` (the service passes the Admin API's group offsets interval for the
    ``admin`` and ``both`` sources): a group read by the Admin API is known current until its
    next read is due, so its clock runs that long past the last read (as Burrow's rule on the
    same reads would) and stands only when a read is overdue. A group fed by the offsets topic
    gets no allowance: with ``both``, an outage of the reader must not age it."""
    admin = Timeline("admin")
    admin.evaluator.read_interval = {C: 10.0}
    for t in range(1, 6):
        admin.log_end(T0 + t)
        admin.commit(T0 + t, admin.leo(T0 + t))
    for t in range(6, 30):
        admin.log_end(T0 + t)  # reads fail from T0+6 on
    # The window spans 4 s: silence past it is seen up to T0+5+10, then the clock stands.
    g = admin.evaluator.evaluate_cluster(C, T0 + 12).group("g")
    assert g is not None and g.status == "STOP"
    assert admin.evaluator.evaluate_cluster(C, T0 + 8.9).group("g").status == "OK"  # type: ignore[union-attr]
    topic = Timeline("offsets_topic")
    topic.evaluator.read_interval = {C: 10.0}
    healthy_until(topic, T0 + 10)
    for t in range(11, 30):
        topic.log_end(T0 + t)  # the reader is out from T0+10 on
    g = topic.evaluator.evaluate_cluster(C, T0 + 19).group("g")
    assert g is not None and g.status == "OK"


def test_same_reader_timeline_with_fresh_reader_is_stop() -> None:
    """Control for the test above: with the reader fresh all along, STOP after the span."""
    tl = Timeline("offsets_topic")
    healthy_until(tl, T0 + 10)
    for t in range(11, 20):
        tl.log_end(T0 + t)
        tl.reader_fresh = T0 + t
    assert tl.status(T0 + 19) == "STOP"


def test_admin_reobservation_is_not_a_commit() -> None:
    """The Admin API reports the same offset every round. Without members, a repeated value is
    the old commit seen again: its window keeps one entry and its age, so STOP comes."""
    tl = Timeline("admin")
    for t in range(1, 6):
        tl.log_end(T0 + t)
        tl.commit(T0 + t, tl.leo(T0 + t))
    frozen = tl.leo(T0 + 5)
    for t in range(6, 20):
        tl.log_end(T0 + t)
        tl.commit(T0 + t, frozen)  # every round reads the same committed offset
    data = tl.store.evaluation_input(C)
    assert data is not None
    last = int(data.windows.counts[0]) - 1
    assert data.windows.timestamps_ms[0, last] == (T0 + 5) * 1000  # first seen, not last read
    snapshot = tl.store.group(C, "g")
    assert snapshot is not None and snapshot.commits[(TOPIC, 0)].commit_time == T0 + 5
    assert tl.status(T0 + 19) == "STOP"


def test_admin_same_offset_with_live_members_is_stall() -> None:
    """The same timeline, but the group has a live member: stuck, not gone."""
    tl = Timeline("admin")
    for t in range(1, 6):
        tl.members(T0 + t, 1)
        tl.log_end(T0 + t)
        tl.commit(T0 + t, tl.leo(T0 + t))
    frozen = tl.leo(T0 + 5)
    for t in range(6, 20):
        tl.members(T0 + t, 1)
        tl.log_end(T0 + t)
        tl.commit(T0 + t, frozen)
    g = tl.evaluator.evaluate_cluster(C, T0 + 19).group("g")
    assert g is not None and g.status == "STALL" and g.members == 1
    assert g.partitions[0].owner == "/10.0.0.1" and g.partitions[0].client_id == "client-0"
    # Off: Burrow's verdict.
    tl2 = Timeline("admin", live_member_stall=False)
    for t in range(1, 6):
        tl2.members(T0 + t, 1)
        tl2.log_end(T0 + t)
        tl2.commit(T0 + t, tl2.leo(T0 + t))
    for t in range(6, 20):
        tl2.log_end(T0 + t)
        tl2.commit(T0 + t, frozen)
    assert tl2.status(T0 + 19) == "STOP"


def test_admin_failing_reads_hold_the_verdict() -> None:
    """Admin reads stop (coordinator down): offsets_at stops advancing, so does the clock."""
    tl = Timeline("admin")
    for t in range(1, 6):
        tl.log_end(T0 + t)
        tl.commit(T0 + t, tl.leo(T0 + t))
    for t in range(6, 40):
        tl.log_end(T0 + t)  # only the log end is read
    result = tl.evaluator.evaluate_cluster(C, T0 + 40)
    g = result.group("g")
    assert g is not None and g.status != "STOP" and g.stale
    assert g.offsets_age_seconds == pytest.approx(35, abs=0.01)


def test_unknown_group_is_none_and_groups_with_only_members_are_ok_and_empty() -> None:
    tl = Timeline("offsets_topic")
    healthy_until(tl, T0 + 3)
    tl.members(T0 + 3, 2, group="joining")
    result = tl.evaluator.evaluate_cluster(C, T0 + 3)
    assert result.group("nope") is None
    joining = result.group("joining")
    assert joining is not None
    assert (joining.status, joining.partition_count, joining.complete) == ("OK", 0, 0.0)
    assert result.group_names() == ["g", "joining"]
    assert result.group("g") is result.group("g")  # built once per evaluation


def test_group_fields_follow_burrow() -> None:
    tl = Timeline("offsets_topic")
    healthy_until(tl, T0 + 8)
    g = tl.evaluator.evaluate_cluster(C, T0 + 8).group("g")
    assert g is not None
    assert g.partition_count == 1 and g.complete == 1.0  # window of 5 filled
    p = g.partitions[0]
    assert p.start is not None and p.end is not None
    assert p.end.offset == tl.leo(T0 + 8) and p.end.timestamp_ms == (T0 + 8) * 1000
    assert p.end.lag == 0 and p.current_lag == 0 and p.lag_seconds == 0
    assert g.maxlag == p and g.totallag == 0


def test_silent_groups_expire_in_the_evaluation_round() -> None:
    """Groups that only assign() get no tombstone; expiry is what removes them."""
    tl = Timeline("offsets_topic", expire_group=60)
    healthy_until(tl, T0 + 3)
    tl.commit(T0 + 3, 10, group="assign-only")
    tl.evaluator.run_once(T0 + 30)
    assert "assign-only" in tl.store.groups(C)
    tl.evaluator.run_once(T0 + 70)
    assert tl.store.groups(C) == []
    assert tl.evaluator.expired_total == 2
    result = tl.evaluator.result(C)
    assert result is not None and result.group("assign-only") is None

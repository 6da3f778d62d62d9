"""What the evaluation says about a group and its partitions, as plain frozen records: built by
:mod:`monitor.evaluate.job` from its arrays, rendered and parsed by :mod:`.status_json`."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.model.observations import GroupMember


@dataclass(frozen=True, slots=True)
class CommitPoint:
    """One stored commit (Burrow's ``start``/``end`` of a partition's window)."""

    offset: int
    timestamp_ms: int
    observed_ms: int
    lag: int | None  # the lag when it was stored; None if no log end was known


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    topic: str
    partition: int
    status: str
    start: CommitPoint | None
    end: CommitPoint | None
    current_lag: int
    lag_seconds: float
    lag_seconds_lower_bound: bool  # the true lag is at least lag_seconds (history too short)
    complete: float
    owner: str
    client_id: str
    retention: RetentionRisk | None = None  # None: the partition's log start is not known
    lag_seconds_source: str | None = None  # timestamp, interpolated, lower_bound (None: unknown)
    velocity: Rates | None = None
    hot: bool = False  # lagging far more than the group's median (a skewed key, a slow member)


@dataclass(frozen=True, slots=True)
class Rates:
    """How fast a partition (or a group: summed) is consumed and produced, and when its lag
    is gone at that pace (:mod:`monitor.rules.velocity`). None: not known yet."""

    consumption_rate: float | None  # records/s the commits advanced over the window
    production_rate: float | None  # records/s the log end advanced
    lag_velocity: float | None  # production - consumption: > 0 the lag grows
    time_to_catch_up_seconds: float | None  # None: see time_to_catch_up_reason
    time_to_catch_up_reason: str | None  # caught up, lag not shrinking, not consuming, ...


@dataclass(frozen=True, slots=True)
class RetentionRisk:
    """How close retention is to deleting records the group has not read
    (:mod:`monitor.rules.retention`)."""

    risk: str  # OK, WARN, LOST
    lead: int  # committed offset - log-start offset (negative: records were lost)
    lost_records: int  # log start - committed offset where the log start passed it, else 0
    time_to_loss_seconds: float | None  # None: not estimable (why: ``time_to_loss_reason``)
    time_to_loss_reason: str | None  # why there is no estimate: caught up, lost, log start idle
    log_start_rate: float  # offsets/s the log start advanced over its observed history


@dataclass(frozen=True, slots=True)
class StateChange:
    """One entry of a group's state history: its state changed, or a rebalance completed."""

    at: float  # unix seconds, when it was observed
    state: str
    generation: int | None
    members: int
    rebalances: int  # rebalances this change completed (a generation that jumped by k: k)
    cause: str | None  # for a rebalance: member joined, member left or timed out, ...


@dataclass(frozen=True, slots=True)
class GroupLifecycleStatus:
    """A group's rebalances and state history (:mod:`monitor.store.lifecycle`) as of an
    evaluation."""

    rebalances: int
    rebalancing_seconds: float
    rebalancing: bool  # in PreparingRebalance, CompletingRebalance, ... now
    last_rebalance_at: float | None
    last_cause: str | None
    members_joined: int
    members_left: int
    storm: bool  # more than rebalance.storm_count rebalances within rebalance.storm_window
    recent_rebalances: int  # rebalances within rebalance.storm_window
    counted_from: str  # "generations" (exact) or "member changes" (Admin API reads: at least)
    history: tuple[StateChange, ...]


@dataclass(frozen=True, slots=True)
class GroupRetention:
    """The group's retention risk: its worst partition's, the records lost in all, and the
    soonest expected loss."""

    risk: str  # OK, WARN, LOST
    lost_records: int
    time_to_loss_seconds: float | None
    partitions_at_risk: int  # partitions WARN or LOST


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """A group's verdict, Burrow's fields plus lag in seconds, state and staleness."""

    cluster: str
    group: str
    status: str
    complete: float
    partitions: tuple[PartitionStatus, ...]
    partition_count: int
    maxlag: PartitionStatus | None
    totallag: int
    lag_seconds: float  # the largest partition lag in seconds
    state: str | None  # Stable, Empty, ... (None: no membership known)
    generation: int | None  # the group's generation where the source reports it
    member_list: tuple[GroupMember, ...]  # who is in the group and what each owns
    stale: bool  # its offsets are not current (read failing): verdict held, clocks stopped
    offsets_age_seconds: float | None
    evaluated_at: float
    retention: GroupRetention | None = None
    lifecycle: GroupLifecycleStatus | None = None
    velocity: Rates | None = None  # rates summed; catch-up: when its slowest partition does
    hot_partitions: int = 0
    lag_seconds_source: str | None = None  # the method of its worst partition's lag seconds

    @property
    def members(self) -> int:
        return len(self.member_list)

    @property
    def non_ok(self) -> tuple[PartitionStatus, ...]:
        return tuple(p for p in self.partitions if p.status != "OK")

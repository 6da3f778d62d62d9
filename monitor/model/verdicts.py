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

    @property
    def members(self) -> int:
        return len(self.member_list)

    @property
    def non_ok(self) -> tuple[PartitionStatus, ...]:
        return tuple(p for p in self.partitions if p.status != "OK")

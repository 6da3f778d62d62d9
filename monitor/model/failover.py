"""A failover plan: where each source group would resume on a mirror's destination.

Made by :mod:`monitor.ingest.failover` (kept current by the service, or once by ``kafka-monitor
failover plan``), served by ``GET /v3/mirror/<name>/failover[/<group>]`` and read back by
``kafka-monitor failover apply`` (from the service or a saved ``plan --json``), so the JSON form
here is a contract: :meth:`GroupPlan.as_dict` and :meth:`GroupPlan.from_dict` are inverse.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

State = Literal["verified", "mirror_behind", "unverifiable", "would_skip"]
STATES: tuple[State, ...] = ("verified", "mirror_behind", "unverifiable", "would_skip")
"""Best first. ``verified``: the destination, from the translated offsets on, holds the group's
first unconsumed record (or, caught up, its last consumed one): nothing can be skipped.
``mirror_behind``: the destination has not received that record yet (the mirror's lag).
``unverifiable``: no proof either way, with the reason. ``would_skip``: the destination moved
past that record's time without it after the translated offsets: a failover would lose it."""

Position = Literal["next", "caught_up", "empty", "uncommitted"]
"""What the group's position on a source partition points at: its first unconsumed record
(``next``), nothing yet because it read everything (``caught_up``: the last consumed record
anchors it), an empty partition, or no committed offset."""

Mapping_ = Literal["same", "any"]
"""``same``: destination partition p holds source partition p's records in order (MirrorMaker
2's default with equal partition counts); ``any``: records may land on any partition."""


@dataclass(slots=True)
class SourcePartition:
    """The group's position on one source partition and what became of it on the destination."""

    partition: int
    committed: int | None
    log_end: int | None
    position: Position
    timestamp_ms: int | None = None  # of the anchoring record (next or last consumed)
    state: State = "unverifiable"
    reason: str | None = None
    found_partition: int | None = None  # where the anchoring record is on the destination
    found_offset: int | None = None


@dataclass(slots=True)
class DestinationPartition:
    """Where the group starts on one destination partition after a failover."""

    partition: int
    offset: int
    timestamp_ms: int | None  # of the record at ``offset``; None: the log end (nothing newer)
    log_end: int | None
    reread_records: int | None = None  # records from ``offset`` the group had already read


@dataclass(slots=True)
class TopicPlan:
    topic: str
    destination_topic: str
    mapping: Mapping_
    state: State
    reason: str | None
    source: list[SourcePartition] = field(default_factory=list)
    destination: list[DestinationPartition] = field(default_factory=list)
    reread_records: int | None = None
    reread_exact: bool = False  # exact when every anchor was found (``same`` mapping)
    reread_seconds: float | None = None


@dataclass(slots=True)
class GroupPlan:
    mirror: str
    group: str
    state: State
    reason: str | None
    margin_seconds: float
    translated_at: float  # when the oldest of its topic plans was computed
    checked_at: float  # when it was last found to match the group's committed offsets
    topics: list[TopicPlan] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.state == "verified"

    @property
    def reread_records(self) -> int | None:
        counts = [t.reread_records for t in self.topics]
        return None if not counts or None in counts else sum(c for c in counts if c is not None)

    @property
    def reread_seconds(self) -> float | None:
        spans = [t.reread_seconds for t in self.topics if t.reread_seconds is not None]
        return max(spans) if spans else None

    def age(self, now: float) -> float:
        return max(0.0, now - self.checked_at)

    def commits(self) -> dict[tuple[str, int], int]:
        """The offsets ``failover apply`` commits on the destination."""
        return {(t.destination_topic, d.partition): d.offset
                for t in self.topics for d in t.destination}

    def as_dict(self, now: float) -> dict[str, Any]:
        body = asdict(self)
        body.update(ready=self.ready, reread_records=self.reread_records,
                    reread_seconds=self.reread_seconds, age_seconds=round(self.age(now), 3))
        return body

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> GroupPlan:
        """A plan read back from the API or ``plan --json``; KeyError/TypeError when it is not
        one."""
        topics = [
            TopicPlan(**{**t, "source": [SourcePartition(**s) for s in t["source"]],
                         "destination": [DestinationPartition(**d) for d in t["destination"]]})
            for t in body["topics"]
        ]
        keys = ("mirror", "group", "state", "reason", "margin_seconds", "translated_at",
                "checked_at")
        return cls(**{k: body[k] for k in keys}, topics=topics)


def worst(states: list[State]) -> State:
    """A plan is as good as its worst part (``verified`` only when every part is)."""
    return max(states, key=STATES.index) if states else "verified"

"""Translating a group's position on a mirrored topic to the destination, and verifying it.

Per source partition, the record that anchors the group's position: the first one it has not
consumed (at the committed offset), or, caught up, the last one it consumed. On the destination
(``failover.destination_prefix`` + topic), the start offsets are looked up by time (ListOffsets
by timestamp, "offsetsForTimes"), ``failover.margin`` earlier than the anchors':

* equal partition counts (``same``): partition p from p's anchor (MirrorMaker 2 keeps the
  partition and its order);
* different counts (``any``): every partition from the earliest anchor of the topic, since a
  record may have landed anywhere.

Then each destination partition is read from its start until past its latest anchor's time
plus the margin, and each anchor is looked for by timestamp and a digest of key and value
(:func:`monitor.rules.failover.find_anchor` judges). The records between a start and the copy
of the first unconsumed record are what a failover reads twice.

Work is bounded (:class:`Budget`) and each anchor is fetched once per committed offset.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from monitor.config import MirrorConfig
from monitor.ingest.failover.reads import ClusterReads
from monitor.ingest.record_fetch import LASTING, Position
from monitor.model.failover import (
    DestinationPartition,
    GroupPlan,
    Mapping_,
    SourcePartition,
    TopicPlan,
    worst,
)
from monitor.rules.failover import NO_TIMESTAMPS, Record, Scan, find_anchor, reread_seconds

_REASONS = {
    "no_timestamp": NO_TIMESTAMPS,
    "deleted": "the anchoring record was deleted by retention on the source",
    "compacted": "the anchoring record was compacted away on the source",
    "denied": "not allowed to read the topic on the source",
    "log_end": "the source log end moved under the read (next round)",
    "timeout": "the source did not answer in time",
    "error": "the source answered with an error",
}


@dataclass(slots=True)
class Budget:
    """Reads left this round (record fetches, lookups and scans alike)."""

    left: int

    def take(self, n: int) -> bool:
        if n > self.left:
            return False
        self.left -= n
        return True


class Planner:
    """One mirror's translations, over clients of both ends (the service's collector and the
    command line share it)."""

    def __init__(self, mirror: MirrorConfig, source: ClusterReads,
                 destination: ClusterReads) -> None:
        self.mirror = mirror
        self.source = source
        self.destination = destination
        self.anchors: dict[Position, Record | str] = {}  # cached per committed offset
        self._dest_partitions: dict[str, int | None] = {}
        self._dest_ends: dict[str, dict[int, int]] = {}

    def begin_round(self) -> None:
        """Forget the destination's metadata and log ends (read again once per round)."""
        self._dest_partitions.clear()
        self._dest_ends.clear()

    def keep_anchors(self, wanted: set[Position]) -> None:
        self.anchors = {p: r for p, r in self.anchors.items() if p in wanted}

    def destination_topic(self, topic: str) -> str:
        return self.mirror.failover.destination_prefix + topic

    def anchor_positions(self, topic: str, committed: Mapping[int, int],
                         log_ends: Mapping[int, int]) -> dict[int, tuple[str, int | None]]:
        """Per source partition: its position kind and the offset of its anchoring record."""
        out: dict[int, tuple[str, int | None]] = {}
        for p in sorted(set(committed) | set(log_ends)):
            c, end = committed.get(p), log_ends.get(p)
            if c is None:
                out[p] = ("uncommitted", None)
            elif end is None or c < end:
                out[p] = ("next", c)
            elif c > 0:
                out[p] = ("caught_up", c - 1)
            else:
                out[p] = ("empty", None)
        return out

    def plan_topic(self, topic: str, committed: Mapping[int, int],
                   log_ends: Mapping[int, int], budget: Budget) -> TopicPlan | None:
        """The topic's plan, or None when the budget ran out before it was complete."""
        f = self.mirror.failover
        margin_ms = int(f.margin * 1000)
        dest_topic = self.destination_topic(topic)
        if dest_topic not in self._dest_partitions:
            if not budget.take(1):
                return None
            self._dest_partitions[dest_topic] = self.destination.partitions(dest_topic)
        n_dest = self._dest_partitions[dest_topic]
        positions = self.anchor_positions(topic, committed, log_ends)
        source = [SourcePartition(p, committed.get(p), log_ends.get(p), kind)  # type: ignore[arg-type]
                  for p, (kind, _) in positions.items()]
        if n_dest is None:
            for s in source:
                s.reason = f"destination topic {dest_topic!r} missing"
            return TopicPlan(topic, dest_topic, "any", "unverifiable",
                             f"destination topic {dest_topic!r} missing", source)
        mapping: Mapping_ = "same" if n_dest == len(positions) else "any"

        wanted = [(topic, p, o) for p, (_, o) in positions.items()
                  if o is not None and (topic, p, o) not in self.anchors]
        if wanted:
            if not budget.take(len(wanted)):
                return None
            read = self.source.records(wanted)
        else:
            read = {}
        # Kept: records and answers that would not change; a timeout is asked again.
        self.anchors.update({p: r for p, r in read.items()
                             if not isinstance(r, str) or r in LASTING})
        anchors: dict[int, Record] = {}
        for s in source:
            kind, offset = positions[s.partition]
            if offset is None:
                s.state, s.reason = "verified", ("no committed offset: auto.offset.reset "
                                                 "applies on both clusters"
                                                 if kind == "uncommitted" else "empty partition")
                continue
            position = (topic, s.partition, offset)
            found = read[position] if position in read else self.anchors[position]
            if isinstance(found, str):
                s.reason = _REASONS.get(found, found)
                continue
            s.timestamp_ms = found.timestamp_ms
            anchors[s.partition] = found

        # Start offsets: per partition (same) or from the earliest anchor everywhere (any).
        if mapping == "same":
            targets = {p: a.timestamp_ms - margin_ms for p, a in anchors.items()}
        elif anchors:
            earliest = min(a.timestamp_ms for a in anchors.values())
            targets = {d: earliest - margin_ms for d in range(n_dest)}
        else:
            targets = {}
        if dest_topic not in self._dest_ends:
            if not budget.take(1):
                return None
            self._dest_ends[dest_topic] = self.destination.log_ends(dest_topic, n_dest)
        dest_ends = self._dest_ends[dest_topic]
        if targets and not budget.take(1 + len(targets)):
            return None
        looked = self.destination.lookup(dest_topic, targets)
        starts: dict[int, int] = {}
        destination: list[DestinationPartition] = []
        for d, (offset, ts) in sorted(looked.items()):
            start = offset if offset >= 0 else dest_ends.get(d, 0)
            starts[d] = start
            destination.append(DestinationPartition(d, start, ts, dest_ends.get(d)))

        # Verify: one scan per destination partition, past its latest anchor's time.
        if mapping == "same":
            stop = {p: anchors[p].timestamp_ms + margin_ms for p in starts}
        else:
            latest = max((a.timestamp_ms for a in anchors.values()), default=0)
            stop = dict.fromkeys(starts, latest + margin_ms)
        scans = self.destination.scan(dest_topic, starts, stop, f.scan_records) if starts else {}
        for s in source:
            anchor = anchors.get(s.partition)
            if anchor is None:
                continue
            candidates = ([scans[s.partition]] if mapping == "same" else list(scans.values()))
            verdict = find_anchor(candidates, anchor, margin_ms, s.position == "caught_up")
            s.state, s.reason = verdict.state, verdict.reason
            s.found_partition, s.found_offset = verdict.partition, verdict.offset

        plan = TopicPlan(topic, dest_topic, mapping, worst([s.state for s in source]), None,
                         source, destination)
        if plan.state != "verified":  # a verified partition's reason is only a remark
            plan.reason = next((s.reason for s in source if s.state == plan.state), None)
        _rereads(plan, anchors, scans)
        return plan


def _rereads(plan: TopicPlan, anchors: Mapping[int, Record], scans: Mapping[int, Scan]) -> None:
    """Records (and seconds) a failover would read again, per destination partition and in all.

    ``same``: from the start to the copy of the first unconsumed record (through the copy of
    the last consumed one when caught up): exact where the copy was found; where it was not
    (the mirror is behind), every record up to the log end is one already read. ``any``: the
    records from the start up to the latest anchor's time, an upper bound (some of them are
    unread records of partitions whose position is earlier)."""
    by_partition = {s.partition: s for s in plan.source}
    exact = True
    for d in plan.destination:
        if plan.mapping == "same":
            s = by_partition.get(d.partition)
            if s is not None and s.found_offset is not None:
                d.reread_records = s.found_offset - d.offset + (s.position == "caught_up")
            else:
                exact = False
                d.reread_records = max(0, (d.log_end or d.offset) - d.offset)
        else:
            exact = False
            scan = scans.get(d.partition)
            latest = max((a.timestamp_ms for a in anchors.values()), default=0)
            records = scan.records if scan is not None else ()
            d.reread_records = sum(1 for r in records if r.timestamp_ms <= latest)
    plan.reread_records = sum(d.reread_records or 0 for d in plan.destination)
    plan.reread_exact = exact and bool(plan.destination)
    plan.reread_seconds = reread_seconds([a.timestamp_ms for a in anchors.values()],
                                         [d.timestamp_ms for d in plan.destination])


def group_plan(mirror: MirrorConfig, group: str, topics: list[TopicPlan],
               translated_at: float, checked_at: float | None = None) -> GroupPlan:
    state = worst([t.state for t in topics])
    reason = next((t.reason for t in topics if t.state == state and t.reason), None)
    return GroupPlan(mirror.name, group, state, reason, mirror.failover.margin, translated_at,
                     checked_at if checked_at is not None else time.time(), topics)

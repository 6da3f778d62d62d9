"""The judgement in a failover plan: did the destination, read from the translated offsets on,
hold the record that anchors the group's position? Pure functions over what was read, so
the rule is tested without brokers (``monitor/ingest/failover/`` does the reading).

Why it proves something: a mirror that keeps each partition's order (MirrorMaker 2 with equal
partition counts) writes every record after the anchor after it on the destination, so a start
at or before the anchor's copy skips nothing, whatever the timestamps say. With a different
partitioning, the order across partitions is lost and only timestamps tie the two clusters: the
lookup starts at the earliest position's time less the margin on every partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.model.failover import State

NO_TIMESTAMPS = "needs record timestamps (Kafka 0.10 or later)"


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp_ms: int
    digest: str  # of key and value (:func:`monitor.ingest.failover.reads.digest`)


@dataclass(frozen=True, slots=True)
class Scan:
    """Records read on one destination partition from a start offset, in offset order;
    ``reached_end``: the scan read up to the log end."""

    partition: int
    records: Sequence[Record]
    reached_end: bool


@dataclass(frozen=True, slots=True)
class Found:
    state: State
    partition: int | None = None
    offset: int | None = None
    reason: str | None = None


def find_anchor(scans: Sequence[Scan], anchor: Record, margin_ms: int, caught_up: bool) -> Found:
    """Where the anchor's copy is among ``scans`` (each from a translated offset on).

    * found (same timestamp and digest): ``verified``;
    * else a scan that reached the log end: the copy may still come, ``mirror_behind``;
    * else every scan read past the anchor's time plus the margin without it: the copy is
      not after the translated offsets. For the first unconsumed record, a failover would
      skip it (``would_skip``); for a caught-up group's last consumed record nothing unread is
      at stake, so that is ``unverifiable`` (the mirror lost or altered that record);
    * else the scans stopped on their budget: ``unverifiable``.
    """
    for scan in scans:
        for r in scan.records:
            if r.timestamp_ms == anchor.timestamp_ms and r.digest == anchor.digest:
                return Found("verified", scan.partition, r.offset)
    if any(s.reached_end for s in scans):
        return Found("mirror_behind", reason="the destination has not received the record "
                     f"at {anchor.timestamp_ms} ms yet")
    passed = all(any(r.timestamp_ms > anchor.timestamp_ms + margin_ms for r in s.records)
                 for s in scans)
    if passed and scans:
        if caught_up:
            return Found("unverifiable", reason="the group's last consumed record is not on "
                         "the destination (lost or altered by the mirror)")
        return Found("would_skip", reason="the destination moved past the group's first "
                     "unconsumed record's time without it after the translated offsets")
    return Found("unverifiable", reason="record not found within the scan budget "
                 "(failover.scan_records)")


def reread_seconds(anchor_ms: Sequence[int], start_ms: Sequence[int | None]) -> float | None:
    """How much time of records a failover reads again: from the earliest start to the latest
    anchor (0 when the starts are all at log ends)."""
    starts = [s for s in start_ms if s is not None]
    if not anchor_ms:
        return None
    if not starts:
        return 0.0
    return max(0.0, (max(anchor_ms) - min(starts)) / 1000.0)

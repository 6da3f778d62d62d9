"""The translation's arithmetic (monitor/ingest/failover/planner.py) on clusters held in memory:
which anchors are read, where each destination partition starts, what is read again, and the
budget. The same planner on real brokers: tests/integration/test_failover.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from monitor.config import MirrorConfig
from monitor.ingest.failover.planner import Budget, Planner
from monitor.rules.failover import Record, Scan

Log = list[Record]  # one partition, offset = index


class MemoryCluster:
    """The reads the planner makes, over in-memory partitions (what ClusterReads does on
    Kafka); counts the reads."""

    def __init__(self, topics: dict[str, list[Log]]) -> None:
        self.topics = topics
        self.reads = 0

    def partitions(self, topic: str) -> int | None:
        return len(self.topics[topic]) if topic in self.topics else None

    def log_ends(self, topic: str, partitions: int) -> dict[int, int]:
        return {p: len(self.topics[topic][p]) for p in range(partitions)}

    def lookup(self, topic: str, targets: Mapping[int, int]) -> dict[int, tuple[int, int | None]]:
        out: dict[int, tuple[int, int | None]] = {}
        for p, ts in targets.items():
            hit = next((r for r in self.topics[topic][p] if r.timestamp_ms >= ts), None)
            out[p] = (hit.offset, hit.timestamp_ms) if hit else (-1, None)
        return out

    def records(self, positions: Sequence[tuple[str, int, int]]) -> dict[tuple[str, int, int],
                                                                         Record | str]:
        self.reads += len(positions)
        out: dict[tuple[str, int, int], Record | str] = {}
        for t, p, o in positions:
            log = self.topics[t][p]
            out[(t, p, o)] = log[o] if o < len(log) else "log_end"
        return out

    def scan(self, topic: str, starts: Mapping[int, int], stop_after_ms: Mapping[int, int],
             max_records: int) -> dict[int, Scan]:
        out = {}
        for p, start in starts.items():
            read: list[Record] = []
            log = self.topics[topic][p]
            for r in log[start:]:
                read.append(r)
                if r.timestamp_ms > stop_after_ms[p] or len(read) >= max_records:
                    break
            out[p] = Scan(p, tuple(read), start + len(read) >= len(log))
        return out


def log(*stamps: int, key: str = "k") -> Log:
    return [Record(i, ts, f"{key}{ts}") for i, ts in enumerate(stamps)]


def mirror(margin: float = 5.0) -> MirrorConfig:
    return MirrorConfig.model_validate({"name": "dr", "source": "a", "destination": "b",
                                        "topics": ["t"], "failover": {"margin": margin}})


def planner(source: MemoryCluster, destination: MemoryCluster, margin: float = 5.0) -> Planner:
    return Planner(mirror(margin), source, destination)  # type: ignore[arg-type]


def test_same_partitions_start_before_each_anchor_and_count_the_rereads_exactly() -> None:
    second = 1000
    src = MemoryCluster({"t": [log(*(i * second for i in range(10)))]})
    # The destination holds 3 older records first (the mirror started earlier), then a copy.
    dst = MemoryCluster({"t": [log(-3000, -2000, -1000, *(i * second for i in range(10)))]})
    plan = planner(src, dst).plan_topic("t", {0: 6}, {0: 10}, Budget(100))
    assert plan is not None and plan.state == "verified" and plan.mapping == "same"
    (s,) = plan.source
    assert (s.position, s.timestamp_ms, s.found_offset) == ("next", 6000, 9)
    (d,) = plan.destination
    assert d.offset == 3 + 1  # the first record at or after 6 s - 5 s
    assert d.reread_records == 9 - 4 and plan.reread_exact
    assert plan.reread_seconds == 5.0


def test_a_caught_up_group_is_anchored_on_its_last_record() -> None:
    src = MemoryCluster({"t": [log(0, 1000, 2000)]})
    dst = MemoryCluster({"t": [log(0, 1000, 2000)]})
    plan = planner(src, dst, margin=0).plan_topic("t", {0: 3}, {0: 3}, Budget(100))
    assert plan is not None and plan.state == "verified"
    assert plan.source[0].position == "caught_up" and plan.source[0].found_offset == 2
    assert plan.destination[0].offset == 2 and plan.destination[0].reread_records == 1


def test_partitions_remapped_start_everywhere_from_the_earliest_anchor() -> None:
    src = MemoryCluster({"t": [log(0, 10_000, 20_000, key="a"), log(0, 30_000, key="b")]})
    # Three destination partitions; the records spread over them.
    dst = MemoryCluster({"t": [
        [Record(0, 0, "a0"), Record(1, 30_000, "b30000")],
        [Record(0, 10_000, "a10000"), Record(1, 20_000, "a20000")],
        [Record(0, 0, "b0")],
    ]})
    plan = planner(src, dst, margin=5).plan_topic("t", {0: 1, 1: 1}, {0: 3, 1: 2}, Budget(100))
    assert plan is not None and plan.mapping == "any" and plan.state == "verified"
    starts = {d.partition: d.offset for d in plan.destination}
    assert starts == {0: 1, 1: 0, 2: 1}  # from 10 s - 5 s on each (2: at its log end)
    found = {s.partition: (s.found_partition, s.found_offset) for s in plan.source}
    assert found == {0: (1, 0), 1: (0, 1)}
    assert not plan.reread_exact


def test_uncommitted_and_empty_partitions_anchor_nothing_and_say_no_reason() -> None:
    src = MemoryCluster({"t": [log(0, 1000), log(), log(0)]})
    dst = MemoryCluster({"t": [log(0, 1000), log(), log(0)]})
    plan = planner(src, dst).plan_topic("t", {0: 1, 1: 0}, {0: 2, 1: 0, 2: 1}, Budget(100))
    assert plan is not None and plan.state == "verified" and plan.reason is None
    kinds = {s.partition: s.position for s in plan.source}
    assert kinds == {0: "next", 1: "empty", 2: "uncommitted"}
    assert [d.partition for d in plan.destination] == [0]  # the others keep auto.offset.reset


def test_a_missing_destination_topic_and_records_without_timestamps_are_unverifiable() -> None:
    src = MemoryCluster({"t": [log(0, 1000)]})
    missing = planner(src, MemoryCluster({})).plan_topic("t", {0: 1}, {0: 2}, Budget(100))
    assert missing is not None and missing.state == "unverifiable"
    assert missing.reason == "destination topic 't' missing" and missing.destination == []

    class NoTimestamps(MemoryCluster):
        def records(self, positions: Sequence[tuple[str, int, int]]) -> dict[
                tuple[str, int, int], Record | str]:
            return dict.fromkeys(positions, "no_timestamp")

    old = planner(NoTimestamps({"t": [log(0, 1)]}), MemoryCluster({"t": [log(0, 1)]}))
    plan = old.plan_topic("t", {0: 1}, {0: 2}, Budget(100))
    assert plan is not None and plan.state == "unverifiable"
    assert plan.reason == "needs record timestamps (Kafka 0.10 or later)"
    assert plan.destination == []  # never a wrong plan


def test_the_budget_stops_a_plan_and_anchors_are_read_once_per_committed_offset() -> None:
    src = MemoryCluster({"t": [log(0, 1000, 2000)]})
    dst = MemoryCluster({"t": [log(0, 1000, 2000)]})
    p = planner(src, dst)
    assert p.plan_topic("t", {0: 1}, {0: 3}, Budget(2)) is None  # metadata, then no room
    assert p.plan_topic("t", {0: 1}, {0: 3}, Budget(100)) is not None
    reads = src.reads
    p.begin_round()
    assert p.plan_topic("t", {0: 1}, {0: 3}, Budget(100)) is not None
    assert src.reads == reads  # the anchor came from the cache


def test_a_source_that_did_not_answer_is_asked_again_next_round() -> None:
    class Slow(MemoryCluster):
        answered = False

        def records(self, positions: Sequence[tuple[str, int, int]]) -> dict[
                tuple[str, int, int], Record | str]:
            if not self.answered:
                self.answered = True
                return dict.fromkeys(positions, "timeout")
            return super().records(positions)

    p = planner(Slow({"t": [log(0, 1000)]}), MemoryCluster({"t": [log(0, 1000)]}))
    first = p.plan_topic("t", {0: 1}, {0: 2}, Budget(100))
    assert first is not None and first.state == "unverifiable"
    assert first.reason == "the source did not answer in time"
    p.begin_round()
    second = p.plan_topic("t", {0: 1}, {0: 2}, Budget(100))
    assert second is not None and second.state == "verified"

"""The exact lag in seconds from record timestamps, off the broker: the evaluator's use of the
timestamps the reader stored, and the reader's bounds and cache (its fetches replaced by a
table). On a real broker with timestamps in tests/integration/ingest/test_record_times_tansu.py;
0.9's records, which have none, in tests/integration/rules/test_velocity.py."""

from __future__ import annotations

from monitor.config import ClusterConfig, EvaluatorConfig, LagTimeConfig
from monitor.evaluate.job import Evaluator
from monitor.ingest.record_times import Position, RecordTimesCollector
from monitor.model.observations import BrokerOffsets, CommitBatch, RecordTimes
from monitor.store.store import Store

C, T0 = "c1", 1_800_000_000.0


def world() -> tuple[Store, Evaluator]:
    """One partition at +10/s for 60 s; ``slow`` committed 100 at 0 s and 400 at 50 s,
    ``stuck`` and ``twin`` 50 throughout, ``done`` keeps up."""
    store = Store(EvaluatorConfig())
    evaluator = Evaluator(store, EvaluatorConfig(), lambda _c: T0 + 60)
    order = 0
    for s in range(0, 61, 5):
        t = T0 + s
        store.put_broker_offsets(BrokerOffsets(C, t, ["t"], [0], [0], [1000 + 10 * s]))
        for group, offset in (("slow", 100 if s < 50 else 400), ("stuck", 50), ("twin", 50),
                              ("done", 1000 + 10 * s)):
            order += 1
            store.put_commits(CommitBatch(C, "admin", t, [group], ["t"], [0], [offset],
                                          [int(t * 1000)], [order]))
    return store, evaluator


def test_a_known_record_timestamp_gives_the_exact_lag_and_says_so() -> None:
    store, evaluator = world()
    ev = evaluator.evaluate_cluster(C, T0 + 60)
    # Both lagging groups are older than the history (equal lower bounds); done has no lag.
    positions = ev.lagging_positions()
    assert sorted(positions) == [("t", 0, 50), ("t", 0, 400)]
    stuck = ev.group("stuck")
    assert stuck is not None and stuck.partitions[0].lag_seconds_source == "lower_bound"
    store.put_record_times(RecordTimes(C, T0 + 60, {("t", 0, 50): int((T0 - 3600) * 1000)}))
    ev = evaluator.evaluate_cluster(C, T0 + 60)
    stuck, slow, done = (ev.group(g) for g in ("stuck", "slow", "done"))
    assert stuck is not None and slow is not None and done is not None
    p = stuck.partitions[0]
    assert (p.lag_seconds, p.lag_seconds_source, p.lag_seconds_lower_bound) == (
        3660.0, "timestamp", False)
    assert stuck.lag_seconds == 3660.0 and stuck.lag_seconds_source == "timestamp"
    twin = ev.group("twin")  # the same record: the same age
    assert twin is not None and twin.partitions[0].lag_seconds == 3660.0
    # No timestamp for slow's offset: the interpolation stays, labelled.
    assert slow.partitions[0].lag_seconds_source in ("interpolated", "lower_bound")
    assert done.partitions[0].lag_seconds == 0.0
    assert ev.lagging_positions()[0] == ("t", 0, 50)  # most behind first


class Table(RecordTimesCollector):
    """The reader with its fetches answered from ``answers`` (and counted)."""

    def __init__(self, lagging: list[Position], answers: dict[Position, int | str],
                 max_fetches: int = 100) -> None:
        self.store = Store()
        super().__init__(ClusterConfig(name=C, bootstrap_servers=["127.0.0.1:9"]), 5.0,
                         LagTimeConfig(max_fetches=max_fetches), self.store,
                         lambda _c: self.lagging)
        self.lagging = lagging
        self.answers = answers
        self.fetched: list[Position] = []

    def _fetch(self, todo: list[Position]) -> dict[Position, int | str]:
        self.fetched.extend(todo)
        return {p: self.answers.get(p, "timeout") for p in todo}


def test_the_reader_fetches_each_position_once_within_its_bound() -> None:
    a, b, c, d = ("t", 0, 10), ("t", 1, 20), ("u", 0, 5), ("v", 0, 9)
    reader = Table([a, b, c, d], {a: 1000, b: "deleted", c: "no_timestamp"}, max_fetches=3)
    reader.collect()
    assert reader.fetched == [a, b, c]  # most behind first, three at most
    assert reader.store.record_times(C) == {a: 1000}
    reader.collect()  # d now; a, b (cached fallback) and c (topic without timestamps) not
    assert reader.fetched == [a, b, c, d]
    assert reader.results["timestamp"] == 1 and reader.results["deleted"] == 1
    assert reader.results["no_timestamp"] == 1 and reader.results["timeout"] == 1
    reader.collect()  # d timed out: tried again
    assert reader.fetched[-1] == d and len(reader.fetched) == 5
    # A position no longer lagging leaves the cache; lagging again, it is fetched again.
    reader.lagging = [b]
    reader.collect()
    assert reader.store.record_times(C) == {} and len(reader.fetched) == 5
    reader.lagging = [a]
    reader.collect()
    assert reader.fetched[-1] == a and reader.store.record_times(C) == {a: 1000}


def test_with_more_lagging_partitions_than_the_bound_every_one_gets_its_turn() -> None:
    """Five partitions whose consumers move on every round (nothing stays cached), two
    fetches a round: the least behind are fetched within three rounds all the same."""
    reader = Table([], {}, max_fetches=2)
    for round_ in range(3):
        reader.lagging = [("t", p, 100 * round_ + p) for p in range(5)]  # most behind first
        reader.answers = {pos: 1000 for pos in reader.lagging}
        reader.collect()
    assert [pos[1] for pos in reader.fetched] == [0, 1, 2, 3, 4, 0]

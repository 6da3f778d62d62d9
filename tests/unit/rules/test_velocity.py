"""Lag velocity, time to catch up and hot partitions (monitor/rules/velocity.py): the rules on
arrays, then through the store and the evaluator on a simulated clock with the default
configuration (log ends read and commits made every 5 s). On the real broker in
tests/integration/rules/test_velocity.py."""

from __future__ import annotations

import json

import numpy as np

from monitor.config import EvaluatorConfig, HotPartitionsConfig
from monitor.evaluate.job import Evaluator
from monitor.model.observations import BrokerOffsets, CommitBatch
from monitor.model.status_json import group_from_json, status_json
from monitor.rules.lag_seconds import LeoHistory
from monitor.rules.velocity import catch_up, consumption_rates, hot_partitions, production_rates
from monitor.store.store import Store

C, TOPIC = "c1", "events"
T0 = 1_800_000_000.0


def test_rates_over_the_commit_window_and_the_log_end_history() -> None:
    offsets = np.array([[100, 400, 700], [50, 50, 0], [10, 10, 10]], dtype=np.int64)
    times = np.array([[0, 10_000, 20_000], [0, 0, 0], [0, 5_000, 10_000]], dtype=np.int64)
    counts = np.array([3, 2, 3], dtype=np.int64)
    idle = np.array([False, False, True])
    rates = consumption_rates(offsets, times, counts, idle)
    # 600 offsets in 20 s; no time between two commits: not known; STOP/STALL: 0.
    assert rates[0] == 30.0 and np.isnan(rates[1]) and rates[2] == 0.0
    history = LeoHistory.from_arrays([[0, 100, 300, 300], [5, 5, 5, 5]],
                                     [[0, 10_000, 20_000, 30_000]] * 2)
    prod = production_rates(history, np.array([10_000, -5], dtype=np.int64))
    # From 100 at 10 s to 300 at 30 s; a quiet topic produces at 0.
    assert prod.tolist() == [10.0, 0.0]
    one = LeoHistory.from_arrays([[7]], [[1000]])
    assert np.isnan(production_rates(one, np.array([0], dtype=np.int64))[0])


def test_time_to_catch_up_is_never_negative_nor_infinite_and_says_why() -> None:
    lag = np.array([600, 0, 600, 600, 600, 600], dtype=np.int64)
    consumed = np.array([30.0, 30.0, 10.0, 10.0, np.nan, 0.0])
    produced = np.array([10.0, 10.0, 10.0, 30.0, 10.0, 10.0])
    idle = np.array([False, False, False, False, False, True])
    vel, ttc, reason = catch_up(lag, consumed, produced, idle)
    assert vel[0] == -20.0 and ttc[0] == 30.0 and reason[0] == 0
    assert np.isnan(ttc[1:]).all()
    assert reason[1:].tolist() == [1, 2, 2, 4, 3]  # caught up, steady, growing, unknown, idle
    assert np.all(np.isnan(ttc) | ((ttc >= 0) & np.isfinite(ttc)))


def test_hot_partitions_stand_out_from_their_groups_median() -> None:
    lag = np.array([10, 20, 15, 5000,  # group 0: one skewed partition
                    0, 0, 0, 1200,  # group 1: median 0, 1200 >= min_lag
                    0, 0, 999,  # group 2: below min_lag
                    0, 90_000,  # group 3: two partitions, no median to stand out from
                    4000, 5000, 6000], dtype=np.int64)  # group 4: evenly behind
    gid = np.array([0] * 4 + [1] * 4 + [2] * 3 + [3] * 2 + [4] * 3, dtype=np.int64)
    shuffled = np.random.default_rng(7).permutation(lag.size)
    hot = hot_partitions(lag[shuffled], gid[shuffled], 5.0, 1000)
    assert sorted(lag[shuffled][hot].tolist()) == [1200, 5000]


class World:
    """One topic of ``PARTS`` partitions produced at ``produce`` records/s each, log ends read
    every 5 s and each group committing every 5 s where ``positions(t)`` says."""

    PARTS = 4

    def __init__(self) -> None:
        self.store = Store(EvaluatorConfig())
        self.evaluator = Evaluator(self.store, EvaluatorConfig(), lambda _c: self.now,
                                   hot=HotPartitionsConfig())
        self.now = T0
        self.order = 0

    def step(self, t: float, log_end: list[int], positions: dict[str, list[int]]) -> None:
        self.now = t
        n = self.PARTS
        self.store.put_broker_offsets(BrokerOffsets(
            C, t, [TOPIC] * n, list(range(n)), [0] * n, log_end))
        for group, offsets in positions.items():
            self.order += 1
            self.store.put_commits(CommitBatch(
                C, "offsets_topic", t, [group] * n, [TOPIC] * n, list(range(n)), offsets,
                [int(t * 1000)] * n, list(range(self.order * n, self.order * n + n))))
            self.order += 1


def test_a_group_draining_a_backlog_gets_its_velocity_and_time_to_catch_up() -> None:
    """Produced at 10/s per partition; ``draining`` reads 30/s from a 3,000 backlog (caught up
    at 150 s), ``steady`` keeps up, ``skewed`` keeps up except on partition 3, read at 1/s:
    hot, and the group never catches up at this pace."""
    w = World()
    for s in range(0, 101, 5):
        end = 5000 + 10 * s
        w.step(T0 + s, [end] * 4, {
            "draining": [2000 + 30 * s] * 4,
            "steady": [end] * 4,
            "skewed": [end, end, end, 4000 + s],
        })
    ev = w.evaluator.evaluate_cluster(C, T0 + 101)
    g = ev.group("draining")
    assert g is not None and g.velocity is not None
    p = g.partitions[0].velocity
    assert p is not None
    assert (p.consumption_rate, p.production_rate, p.lag_velocity) == (30.0, 10.0, -20.0)
    # Lag 6,000 - 5,000 = 1,000 at 100 s, shrinking by 20/s.
    assert p.time_to_catch_up_seconds == 50.0 and p.time_to_catch_up_reason is None
    assert g.velocity.time_to_catch_up_seconds == 50.0
    assert g.velocity.lag_velocity == -80.0 and g.velocity.consumption_rate == 120.0
    assert g.partitions[0].lag_seconds_source == "interpolated"
    assert g.hot_partitions == 0

    steady = ev.group("steady")
    assert steady is not None and steady.velocity is not None
    assert steady.velocity.time_to_catch_up_seconds is None
    assert steady.velocity.time_to_catch_up_reason == "caught up"

    skewed = ev.group("skewed")
    assert skewed is not None and skewed.velocity is not None
    assert [q.hot for q in skewed.partitions] == [False, False, False, True]
    assert skewed.hot_partitions == 1
    assert skewed.velocity.time_to_catch_up_seconds is None
    assert skewed.velocity.time_to_catch_up_reason == "lag not shrinking"
    assert skewed.partitions[3].velocity is not None
    assert skewed.partitions[3].velocity.lag_velocity == 9.0

    # The API object carries it all, and reads back the same.
    doc = json.loads(json.dumps(status_json(g, only_non_ok=False)))
    assert doc["velocity"]["time_to_catch_up_seconds"] == 50.0
    assert doc["partitions"][0]["lag_seconds_source"] == "interpolated"
    assert group_from_json(doc) == g

"""Retention risk (monitor/rules/retention.py) through the store and the evaluator on a
simulated clock: lead, records lost, time to loss from the log start's advance rate against
the group's consumption, and the OK / WARN / LOST words. On the real broker in
tests/integration/rules/test_retention.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from monitor.config import ClusterConfig, EvaluatorConfig, RetentionConfig, StateConfig
from monitor.evaluate.job import Evaluator
from monitor.model.observations import BrokerOffsets, CommitBatch
from monitor.rules.retention import advance_rate, retention_risk
from monitor.store.snapshot import StateFile
from monitor.store.store import Store
from monitor.store.windows import LOG_START_SAMPLES, Windows

C, TOPIC = "c1", "events"
T0 = 1_800_000_000.0
PRODUCE = 100  # records/s
DELETE = 50  # records/s retention deletes (the log start's advance)


class World:
    """One partition produced at PRODUCE/s while retention deletes DELETE/s from t = 0, and
    groups committing where ``positions(t)`` says."""

    def __init__(self, warn: float = 3600.0) -> None:
        self.store = Store(EvaluatorConfig())
        self.evaluator = Evaluator(self.store, EvaluatorConfig(), lambda _c: self.now,
                                   retention=RetentionConfig(warn=warn))
        self.now = T0
        self.order = 0

    def step(self, t: float, positions: dict[str, int]) -> None:
        self.now = t
        s = t - T0
        self.store.put_broker_offsets(BrokerOffsets(
            C, t, [TOPIC], [0], [10_000 + int(s * DELETE)], [20_000 + int(s * PRODUCE)]))
        for group, offset in positions.items():
            self.order += 1
            self.store.put_commits(CommitBatch(C, "offsets_topic", t, [group], [TOPIC], [0],
                                               [offset], [int(t * 1000)], [self.order]))

    def risk(self, group: str) -> tuple[str, int, int, float | None, str | None]:
        ev = self.evaluator.evaluate_cluster(C, self.now + 0.5)
        g = ev.group(group)
        assert g is not None and g.retention is not None
        r = g.partitions[0].retention
        assert r is not None
        assert g.retention.risk == r.risk and g.retention.lost_records == r.lost_records
        return r.risk, r.lead, r.lost_records, r.time_to_loss_seconds, r.time_to_loss_reason


def test_a_stopped_group_is_warned_before_its_records_go_then_lost_with_the_exact_count(
) -> None:
    """The stopped group committed 12,000 then 13,000 (t = 10 s) and never again: the log
    start (10,000, +50/s) reaches 13,000 at t = 60 s. Once the group is STOP, the estimate
    says when, within 10 s, before it happens; after it the partition is LOST by exactly
    log start - committed, and never before."""
    w = World()
    seen: list[tuple[float, str, float | None]] = []
    for s in range(0, 91, 5):
        w.step(T0 + s, {"stopped": 12_000} if s == 0 else {"stopped": 13_000} if s == 10
               else {})
        risk, lead, lost, ttl, reason = w.risk("stopped")
        assert lead == 13_000 - (10_000 + 50 * s) if s >= 10 else True
        if s <= 60:
            assert risk != "LOST" and lost == 0
        else:
            assert (risk, lost, ttl, reason) == ("LOST", 50 * s - 3_000, None,
                                                 "records already lost")
        seen.append((T0 + s, risk, ttl))
    warned = [(t, ttl) for t, risk, ttl in seen if risk == "WARN"]
    assert warned, seen
    for t, ttl in warned:
        assert ttl is not None and t + ttl == pytest.approx(T0 + 60, abs=10), seen


def test_a_consumer_ahead_of_retention_is_ok_however_short_the_retention() -> None:
    """A healthy consumer reads at the production rate, faster than retention deletes: no
    warning even though the log start moves (no crying wolf on short retention)."""
    w = World()
    for s in range(0, 61, 10):
        w.step(T0 + s, {"healthy": 20_000 + s * PRODUCE - 30})
    assert w.risk("healthy") == ("OK", 10_000 - 30 + 60 * (PRODUCE - DELETE), 0, None,
                                 "consumer keeps pace with retention")


def test_a_consumer_slower_than_retention_gets_the_time_until_they_meet() -> None:
    """Reading 30/s while retention deletes 50/s: at t = 60 s the 800 records between them go
    in 800 / 20 = 40 s; beyond a retention.warn of 30 s that is OK, within 1 h WARN."""
    for warn, want in ((30.0, "OK"), (3600.0, "WARN")):
        w = World(warn=warn)
        for s in range(0, 61, 10):
            w.step(T0 + s, {"slow": 12_000 + 30 * s})
        risk, lead, _, ttl, _ = w.risk("slow")
        assert lead == 12_000 + 1_800 - (10_000 + 3_000)
        assert risk == want
        assert ttl == pytest.approx(lead / (DELETE - 30), rel=0.1)


def test_an_idle_log_start_and_a_caught_up_group_have_no_estimate() -> None:
    w = World()
    for s in range(0, 31, 10):
        w.now = T0 + s
        w.store.put_broker_offsets(BrokerOffsets(C, T0 + s, [TOPIC], [0], [0], [500]))
        w.store.put_commits(CommitBatch(C, "offsets_topic", T0 + s, ["behind", "current"],
                                        [TOPIC] * 2, [0, 0], [100, 500], [int(w.now * 1000)] * 2,
                                        [2 * s, 2 * s + 1]))
    assert w.risk("behind") == ("OK", 100, 0, None, "log start not advancing")
    assert w.risk("current") == ("OK", 500, 0, None, "caught up")


def test_the_rules_never_give_a_negative_or_infinite_time() -> None:
    rng = np.random.default_rng(7)
    n = 5000
    log_start = rng.integers(-1, 1000, n)
    committed = rng.integers(0, 2000, n)
    lag = rng.integers(0, 500, n)
    out = retention_risk(committed, lag, log_start, rng.uniform(-1, 50, n),
                         rng.uniform(0, 50, n), 3600.0)
    ttl = out.time_to_loss[np.isfinite(out.time_to_loss)]
    assert (ttl >= 0).all()
    assert not np.isinf(out.time_to_loss).any()
    assert ((out.risk == 2) == (out.lost > 0)).all()
    assert (out.lost[log_start < 0] == 0).all() and (out.risk[log_start < 0] == 0).all()
    assert math.isclose(float(advance_rate(np.array([150]), np.array([100]),
                                           np.array([0]), 10_000.0)[0]), 5.0)


def test_log_start_samples_keep_the_first_and_the_latest_changes() -> None:
    w = Windows()
    row = w.leo_row(TOPIC, 0)
    for k in range(20):
        w.put_log_starts([row], [0 if k < 3 else k], 1000 * k)
    n = int(w.ls_counts[row])
    assert n == LOG_START_SAMPLES
    assert w.ls_offsets[row, :n].tolist() == list(range(12, 20))
    # Backwards (the topic was recreated): the samples start again from it.
    w.put_log_starts([row], [2], 99_000)
    assert int(w.ls_counts[row]) == 1 and int(w.ls_offsets[row, 0]) == 2


def test_the_log_start_history_survives_a_restart(tmp_path: Path) -> None:
    """Saved and loaded with the store: the restarted service knows the log start's advance
    rate at once, so a stopped group's time to loss is the same before and after."""
    w = World()
    for s in range(0, 51, 5):
        w.step(T0 + s, {"stopped": 12_000} if s == 0 else {"stopped": 13_000} if s == 10
               else {})
    before = w.risk("stopped")
    assert before[0] == "WARN" and before[3] is not None
    clusters = [ClusterConfig(name=C, bootstrap_servers=["h:9092"])]
    state = StateFile(StateConfig(path=tmp_path), clusters)
    assert state.save(w.store)
    restarted = World()
    assert state.load(restarted.store) is not None
    restarted.now = w.now
    assert restarted.risk("stopped") == before

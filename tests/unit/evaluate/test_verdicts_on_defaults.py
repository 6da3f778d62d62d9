"""Verdicts on the default configuration, every offsets source, simulated (no Kafka).

The real-broker matrix (test_verdict_matrix.py) proves the verdicts end to end but takes
minutes and one broker's timing. This is the same matrix on a simulated clock, exact and in
seconds: the default evaluator (window 10, min_distance 1 s, every option as shipped), the
default collector intervals (Admin API group offsets every 10 s) and log ends sampled every
``b`` ∈ {10 s (default), 2 s}, consumers committing every ``c`` ∈ {1, 5, 30} s, through the
``admin``, ``offsets_topic`` and ``both`` sources, evaluated every 5 s as the service does.

It pins the causes issue 13 found: commits and log-end samples on different clocks made the
lag stored at ingest fall between samples (a consumer falling behind read OK), and a consumer
that died caught up waited out ten log-end samples (100 s) before STOP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from monitor.config import CollectorsConfig, EvaluatorConfig
from monitor.evaluate.job import Evaluator
from monitor.model.observations import (
    BrokerOffsets,
    CommitBatch,
    GroupMember,
    GroupMembership,
    OffsetSource,
)
from monitor.rules import RuleOptions
from monitor.store.store import Store

C = "local"
TOPIC = "orders"
T0 = 1_800_000_000.0
RATE = 40.0  # records/s produced
TICK = 0.5
EVAL = EvaluatorConfig().interval
WINDOW = EvaluatorConfig().window
ADMIN_READ = CollectorsConfig().group_offsets_interval
SOURCES = ("admin", "offsets_topic", "both")
BROKER_INTERVALS = (CollectorsConfig().broker_offsets_interval, 2.0)
CADENCES = (1.0, 5.0, 30.0)


def leo(t: float) -> int:
    return int((t - T0) * RATE)


@dataclass
class Consumer:
    """What the consumer commits (None: nothing) and whether it is in the group, at ``t``."""

    scenario: str
    cadence: float
    event: float  # when it stops / freezes (s after T0); inf: never
    frozen: int | None = None

    def position(self, t: float) -> int:
        if self.scenario == "behind":
            return int((t - T0) * RATE / 4)
        return leo(t - 0.2)  # read up to what was there a moment ago

    def commit(self, t: float) -> int | None:
        if t - T0 < self.event:
            return self.position(t)
        if self.scenario == "stalled":  # stays, re-commits its last offset
            if self.frozen is None:
                self.frozen = self.position(T0 + self.event)
            return self.frozen
        return None  # gone

    def alive(self, t: float) -> bool:
        return self.scenario != "gone" or t - T0 < self.event


@dataclass
class Run:
    source: OffsetSource
    b: float
    consumer: Consumer
    store: Store = field(init=False)
    evaluator: Evaluator = field(init=False)
    timeline: list[tuple[float, str]] = field(default_factory=list)  # (s after T0, status)
    last_commit: float = 0.0  # s after T0
    _order: int = 0
    _fresh: float | None = None

    def __post_init__(self) -> None:
        self.store = Store(EvaluatorConfig())
        # As the service builds it (monitor/service.py).
        self.evaluator = Evaluator(
            self.store, self.store.evaluator_config, lambda _c: self._fresh,
            stale_after=3 * ADMIN_READ + EVAL,
            read_interval={C: ADMIN_READ} if self.source != "offsets_topic" else None,
        )

    def _commit(self, source: OffsetSource, t: float, offset: int) -> None:
        self._order += 1
        self.store.put_commits(CommitBatch(
            cluster=C, source=source, observed_at=t, groups=["g"], topics=[TOPIC],
            partitions=[0], offsets=[offset],
            commit_times=[None if source == "admin" else int(t * 1000)], orders=[self._order],
        ))

    def _members(self, source: OffsetSource, t: float, live: bool) -> None:
        members = (GroupMember("m0", "client-0", "/10.0.0.1", ((TOPIC, 0),)),) if live else ()
        self.store.put_group(GroupMembership(
            cluster=C, group="g", source=source, observed_at=t,
            state="Stable" if live else "Empty", protocol_type="consumer", protocol="range",
            generation=None, members=members,
        ))

    def run(self, until: float) -> None:
        topic_side = self.source in ("offsets_topic", "both")
        admin_side = self.source in ("admin", "both")
        c = self.consumer
        was_alive = None
        steps = int(until / TICK)
        for i in range(1, steps + 1):
            s = i * TICK
            t = T0 + s
            alive = c.alive(t)
            if math.isclose(s % self.b, 0.0, abs_tol=1e-9):
                self.store.put_broker_offsets(BrokerOffsets(C, t, [TOPIC], [0], [0], [leo(t)]))
            if topic_side:
                if alive != was_alive:  # a group-metadata record at each rebalance
                    self._members("offsets_topic", t, alive)
                if math.isclose(s % c.cadence, 0.0, abs_tol=1e-9):
                    offset = c.commit(t)
                    if offset is not None:
                        self._commit("offsets_topic", t, offset)
                        self.last_commit = s
                self._fresh = t
            if admin_side and math.isclose(s % ADMIN_READ, 0.0, abs_tol=1e-9):
                self._members("admin", t, alive)
                # The committed offset as of now: the consumer's last commit.
                last = math.floor(s / c.cadence) * c.cadence
                offset = c.commit(T0 + last) if last > 0 else None
                if offset is None and last > 0:  # gone: its last commit stays readable
                    last = math.floor(min(s, c.event - 1e-9) / c.cadence) * c.cadence
                    offset = c.commit(T0 + last) if last > 0 else None
                if offset is not None:
                    self._commit("admin", t, offset)
                    if self.source == "admin":
                        self.last_commit = last
            was_alive = alive
            if math.isclose(s % EVAL, 0.0, abs_tol=1e-9):
                self.evaluator.run_once(t)
                result = self.evaluator.result(C)
                g = result.group("g") if result is not None else None
                self.timeline.append((s, g.status if g is not None else "NOTFOUND"))

    def first(self, status: str, after: float = 0.0) -> float | None:
        return next((s for s, st in self.timeline if st == status and s >= after), None)

    def statuses(self, start: float = 0.0, end: float = math.inf) -> set[str]:
        return {st for s, st in self.timeline if start <= s < end and st != "NOTFOUND"}


def r_of(source: str) -> float:
    return ADMIN_READ if source == "admin" else 0.0


def freeze_at(c: float) -> float:
    """Once every source holds a full window, between two commits."""
    return WINDOW * max(c, ADMIN_READ) + c / 2


def silence_deadline(c: float, source: str) -> float:
    """STOP or STALL after the last (or first frozen) commit: Burrow's rule on the commits the
    source sees (the window spans W - 1 gaps of max(c, r); the Admin API sees a commit up to r
    after it is made), then one evaluation."""
    r = r_of(source)
    return (WINDOW - 1) * max(c, r) + r + EVAL


def gone_deadline(source: str) -> float:
    """Consumers left with lag (option (g)): seeing them leave (the group-metadata record at
    once; the Admin API's next read), the grace, an evaluation."""
    return EvaluatorConfig().gone_stop + r_of(source) + EVAL


MATRIX = [
    pytest.param(source, b, c, id=f"{source}-b{b:g}s-c{c:g}s")
    for source in SOURCES for b in BROKER_INTERVALS for c in CADENCES
]


@pytest.mark.parametrize(("source", "b", "c"), MATRIX)
def test_keeping_up_is_ok_throughout(source: OffsetSource, b: float, c: float) -> None:
    run = Run(source, b, Consumer("keeps_up", c, math.inf))
    run.run(3 * WINDOW * max(c, ADMIN_READ))
    assert run.statuses() == {"OK"}, run.timeline


@pytest.mark.parametrize(("source", "b", "c"), MATRIX)
def test_falling_behind_is_warn_within_two_windows_and_stays(
    source: OffsetSource, b: float, c: float
) -> None:
    """A consumer at a quarter of the production rate: WARN within two windows of its
    commits (+ a log-end sample + an evaluation), never STALL or STOP, and it stays WARN."""
    span = max(c, r_of(source))
    deadline = 2 * WINDOW * span + b + EVAL
    run = Run(source, b, Consumer("behind", c, math.inf))
    run.run(deadline + 4 * WINDOW * span)
    warn = run.first("WARN")
    assert warn is not None and warn <= deadline, (warn, deadline, run.timeline)
    assert run.statuses(warn) == {"WARN"}, run.timeline
    assert run.statuses(0, warn) <= {"OK"}, run.timeline


@pytest.mark.parametrize(("source", "b", "c"), MATRIX)
def test_gone_consumer_is_stop_by_burrows_deadline(
    source: OffsetSource, b: float, c: float
) -> None:
    """Its last commit was caught up (Burrow's "recently caught up" exception used to hold it
    OK for ten log-end samples); STOP within a window span of its commits after the last one,
    + reading it + an evaluation, and the gone-consumer grace brings it sooner."""
    event = freeze_at(c)
    run = Run(source, b, Consumer("gone", c, event))
    run.run(event + silence_deadline(c, source) + 60)
    stop = run.first("STOP", event)
    assert stop is not None, run.timeline
    assert stop - run.last_commit <= silence_deadline(c, source), (run.last_commit, stop)
    # The consumers left with data arriving: STOP after the gone grace, not a window's span.
    assert stop - event <= gone_deadline(source), (event, stop, run.timeline)
    assert run.statuses(0, event) == {"OK"}, run.timeline
    assert run.statuses(stop) == {"STOP"}, run.timeline


@pytest.mark.parametrize(("source", "b", "c"), MATRIX)
def test_stalled_consumer_is_stall_by_burrows_deadline(
    source: OffsetSource, b: float, c: float
) -> None:
    """Stays in the group re-committing one offset while data arrives; timed from its first
    frozen commit."""
    freeze = freeze_at(c)
    run = Run(source, b, Consumer("stalled", c, freeze))
    event = math.ceil(freeze / c) * c
    deadline = silence_deadline(c, source)
    run.run(event + deadline + 60)
    stall = run.first("STALL", event)
    assert stall is not None and stall - event <= deadline, (event, stall, run.timeline)
    assert run.statuses(0, event) == {"OK"}, run.timeline
    assert run.statuses(stall) == {"STALL"}, run.timeline


def test_warn_comes_from_the_lag_at_commit_time_not_from_a_looser_rule() -> None:
    """The case that read OK (c = 1 s, b = 10 s): with every option at Burrow's value the
    consumer is WARN too, because the rules now see each commit's lag against the log end
    at its own time, not against the newest sample."""
    run = Run("offsets_topic", 10.0, Consumer("behind", 1.0, math.inf))
    run.evaluator.options = RuleOptions.burrow()
    run.run(120)
    assert run.first("WARN") is not None, run.timeline

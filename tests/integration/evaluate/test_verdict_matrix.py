"""The verdict matrix: every consumer behaviour the evaluator judges, on the real Kafka 0.9
broker, through every offsets source, on the default configuration.

Monitors: offsets source ``admin``, ``offsets_topic`` and ``both`` × ``broker_offsets_interval``
at its default (10 s) and at 2 s: six real services (collectors, store, rules, evaluation job),
every other setting default, all started before the workloads and all watching every group.
Consumers commit every c ∈ {1, 5, 30} s; each scenario runs once per cadence (a group per
scenario and cadence), the idle batch job once. All groups run at once on one broker of the
module's own (tests in parallel with it must not load the broker its deadlines depend on), for
about 11 minutes (the c = 30 s consumers need a full window, 10 commits = 300 s, before they
stop or freeze, then Burrow's rule needs another window); one sampler thread reads every
monitor's cached verdict for every group once a second into a timeline, and the tests, one per
(scenario, cadence, source, interval), only read the timelines once the fleet has run past its
last deadline. The whole module takes about 12 minutes (``-m matrix`` selects it) and prints
a table: scenario × cadence × monitor → final verdict, detection time and deadline. The fleet
runs only the cadences the selected tests judge: ``-k "c1s or c5s"`` takes about 4 minutes.

Deadlines (r: how often a source reads commits, the group offsets interval (10 s) for
``admin``, 0 for ``offsets_topic`` and ``both``, which read every commit as it is written; b:
``broker_offsets_interval``; E: ``evaluator.interval`` (5 s); POLL_SLACK: our sampling):

* STOP and STALL: Burrow's rule on the same commits, i.e. silence (or identical offsets) past a
  full window's span, 9 × max(c, r) after the last commit (the first frozen commit), + r to see
  it + E. Not counted: Burrow's "recently caught up" exception, whose ring of the last 10 log
  ends spans 10 × b = 100 s at the default (the delay issue 13 reports as wrong).
* WARN: within two windows (2 × 10 × max(c, r)) of the lag starting to grow (the lagging
  consumer's first commit, when there is a lag to see), + b + E.
* REWIND: max(c, r) + b + E after the offsets were reset.

The Admin API sees only the current offset, not each commit: through ``admin`` a consumer that
re-commits one offset (stalled) and one that stays in the group without committing look alike,
and both must be STALL (a live member that does not move); Burrow would say STOP for both.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from monitor.config import CollectorsConfig, EvaluatorConfig, MonitorConfig
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    BatchConsumer,
    DeadPartitionConsumer,
    GroupConsumer,
    HealthyConsumer,
    LaggingConsumer,
    ProducerLoad,
    SilentConsumer,
    StalledConsumer,
    StoppedConsumer,
    end_offsets,
    librdkafka_logger,
    produce_batch,
    reset_offsets,
)
from monitor.model.verdicts import GroupStatus
from monitor.rules import GroupIndex, RuleOptions, Status, evaluate
from tests.harness.kafka_fixtures import defaults_config, make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = [pytest.mark.kafka, pytest.mark.own_cluster, pytest.mark.matrix,
              pytest.mark.slow(700), pytest.mark.timeout(1500)]

CLUSTER = "local"
SOURCES = ("admin", "offsets_topic", "both")
BROKER_INTERVALS = (CollectorsConfig().broker_offsets_interval, 2.0)  # default, faster
CADENCES = (1.0, 5.0, 30.0)  # the consumers' commit interval
MONITORS = [(s, b) for s in SOURCES for b in BROKER_INTERVALS]
GROUP_READ = CollectorsConfig().group_offsets_interval  # r of the admin source
EVAL = EvaluatorConfig().interval
WINDOW = EvaluatorConfig().window
RATE = 20.0  # records/s per producing topic
SAMPLE_EVERY = 1.0
POLL_SLACK = 2.0  # one sampling period, and a second for threads and the offsets reader
HOLD = 15.0  # watch this long past the last deadline (a verdict must hold, not flash)
LATE_START = 90.0  # the late group joins this long after the monitors and the workload
BURST_AT = 95.0  # after a few commits of even the slowest cadence
BURST = 3000
BATCH_PERIOD = 30.0
CAP = 760.0  # never run the fleet longer than this after the workload starts
LAGGING_RATE = RATE / 4
REWOUND_RATE = RATE / 2  # the consumer resuming from the reset offsets

Monitor = tuple[str, float]  # (offsets source, broker_offsets_interval)
Key = tuple[str, float | None]  # (scenario, cadence); the batch job has no cadence


def monitor_id(m: Monitor) -> str:
    return f"{m[0]}-b{m[1]:g}s"


def r_of(source: str) -> float:
    """How late a source can see a commit: the Admin API reads every group offsets interval;
    the offsets-topic reader sees each commit as it is written."""
    return GROUP_READ if source == "admin" else 0.0


def freeze_after(c: float) -> float:
    """When a stopping or freezing consumer changes, after its first assignment: once every
    source holds a full window of its commits (10 × max(c, r)), between two of its commits."""
    return WINDOW * max(c, GROUP_READ) + c / 2


def rewind_after(c: float) -> float:
    return 3 * max(c, GROUP_READ) + 5.0


def silence_deadline(c: float, source: str) -> float:
    """STOP/STALL after the last (or first frozen) commit: Burrow's window span + seeing it +
    one evaluation."""
    r = r_of(source)
    return (WINDOW - 1) * max(c, r) + r + EVAL


def warn_deadline(c: float, source: str, b: float) -> float:
    return 2 * WINDOW * max(c, r_of(source)) + b + EVAL


def rewind_deadline(c: float, source: str, b: float) -> float:
    return max(c, r_of(source)) + b + EVAL


def monitor_config(kafka: LocalKafka, prefix: str, source: str, b: float) -> MonitorConfig:
    """Defaults everywhere but the matrix values (and the groups/topics this module owns)."""
    return defaults_config(kafka, prefix, source, collectors={"broker_offsets_interval": b})


@dataclass(frozen=True)
class Sample:
    t: float  # time.monotonic()
    status: str  # NOTFOUND when the monitor did not know the group
    totallag: int
    lag_seconds: float
    group: GroupStatus | None


@dataclass
class Row:
    """One cell of the matrix: what the monitor said, when, against which deadline."""

    final: str
    detected: float | None = None  # s after the scenario's event
    deadline: float | None = None  # s after the event (slack excluded)
    problems: list[str] = field(default_factory=list)
    note: str = ""

    def cell(self) -> str:
        text = self.final
        if self.detected is not None or self.deadline is not None:
            got = "—" if self.detected is None else f"{self.detected:.0f}"
            limit = "" if self.deadline is None else f"/{self.deadline:.0f}"
            text += f" {got}{limit}s"
        if self.note:
            text += f" {self.note}"
        return text + (" FAIL" if self.problems else "")


def _at(t: float, t0: float) -> str:
    return f"t+{t - t0:.0f}s"


# --------------------------------------------------------------------------- the fleet


@dataclass
class Fleet:
    kafka: LocalKafka
    prefix: str
    topics: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, int] = field(default_factory=dict)
    producers: dict[str, ProducerLoad] = field(default_factory=dict)
    consumers: dict[Key, GroupConsumer] = field(default_factory=dict)
    retired: dict[Key, list[GroupConsumer]] = field(default_factory=dict)
    groups: dict[Key, str] = field(default_factory=dict)
    monitors: dict[Monitor, ServiceThread] = field(default_factory=dict)
    timelines: dict[tuple[Monitor, str], list[Sample]] = field(default_factory=dict)
    burrow: dict[Monitor, list[tuple[float, set[str]]]] = field(default_factory=dict)
    events: dict[Key, float] = field(default_factory=dict)  # actions' times (monotonic)
    cadences: tuple[float, ...] = CADENCES  # those the selected tests judge
    ahead: bool = False  # ran at a higher CPU priority than the tests beside it
    notes: dict[Key, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    t0: float = 0.0  # workload start (monotonic)
    started_wall: float = 0.0
    ended: float = 0.0
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _stop_sampling: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    # ---- setup

    def client(self) -> dict[str, Any]:
        return {**self.kafka.client_config(), "logger": librdkafka_logger}

    def start_consumer(self, key: Key, consumer: GroupConsumer) -> GroupConsumer:
        old = self.consumers.get(key)
        if old is not None:
            self.retired.setdefault(key, []).append(old)
        self.consumers[key] = consumer
        consumer.start()
        return consumer

    def in_background(self, name: str, fn: Callable[[], None]) -> None:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the tests
                self.errors.append(f"{name}: {exc!r}")

        thread = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def after(self, delay: float) -> bool:
        """Sleep until ``delay`` s after the workload start; False if the fleet is stopping."""
        return not self._stop_sampling.wait(max(0.0, self.t0 + delay - time.monotonic()))

    # ---- the sampler

    def sample_forever(self) -> None:
        batch = self.groups[("batch", None)]
        names = list(self.groups.values())
        next_at = time.monotonic()
        while not self._stop_sampling.wait(max(0.0, next_at - time.monotonic())):
            next_at += SAMPLE_EVERY
            now = time.monotonic()
            for m, thread in self.monitors.items():
                result = thread.service.evaluator.result(CLUSTER)
                for name in names:
                    g = result.group(name) if result is not None else None
                    sample = (
                        Sample(now, "NOTFOUND", 0, 0.0, None) if g is None
                        else Sample(now, g.status, g.totallag, g.lag_seconds, g)
                    )
                    self.timelines.setdefault((m, name), []).append(sample)
                self.burrow.setdefault(m, []).append((now, self.burrow_statuses(m, batch)))

    def burrow_statuses(self, m: Monitor, group: str) -> set[str]:
        """Burrow's own rules on the windows this monitor holds right now."""
        data = self.monitors[m].service.store.evaluation_input(CLUSTER)
        if data is None or group not in data.group_names:
            return set()
        parts, _ = evaluate(
            data.windows, GroupIndex(data.group_ids, len(data.group_names)),
            time.time() * 1000.0, RuleOptions.burrow(),
        )
        gid = data.group_names.index(group)
        return {Status(int(s)).name for s in parts.status[data.group_ids == gid]}

    # ---- when every scenario has run past its deadline

    def horizon(self) -> float | None:
        """Monotonic time after which every verdict has had its deadline and HOLD, or None
        while some scenario's event has not happened yet."""
        ends = [self.t0 + LATE_START + 60.0, self.t0 + BURST_AT + 60.0]
        for c in self.cadences:
            for scenario in ("behind", "stalled", "stopped", "silent", "rewound", "deadpart"):
                event = event_time(self, scenario, c)
                if event is None:
                    return None
                ends += [event + scenario_deadline(scenario, c, m) for m in MONITORS]
        batch = self.events.get(("batch", None))
        if batch is None:
            return None
        ends.append(batch + 2 * BATCH_PERIOD)
        return max(ends) + POLL_SLACK + HOLD

    def run_to_the_end(self) -> None:
        while True:
            now = time.monotonic()
            end = self.horizon()
            if now - self.t0 > CAP or (end is not None and now >= end):
                break
            time.sleep(1.0)
        self._stop_sampling.set()
        self.ended = time.monotonic()

    def timeline(self, m: Monitor, key: Key) -> list[Sample]:
        return self.timelines.get((m, self.groups[key]), [])


def event_time(fleet: Fleet, scenario: str, c: float | None) -> float | None:
    """The moment a scenario's verdict is timed from (monotonic), None if not yet."""
    key = (scenario, c)
    consumer = fleet.consumers.get(key)
    if scenario == "behind":
        assert consumer is not None
        commits = consumer.commits
        return commits[0].at if commits else None
    if scenario == "stalled":
        assert isinstance(consumer, StalledConsumer)
        return consumer.frozen_at
    if scenario == "stopped":
        assert isinstance(consumer, StoppedConsumer)
        return consumer.commits[-1].at if consumer.closed.is_set() and consumer.commits else None
    if scenario == "silent":
        assert isinstance(consumer, SilentConsumer)
        commits = consumer.commits
        return commits[-1].at if consumer.silenced.is_set() and commits else None
    if scenario == "deadpart":
        assert isinstance(consumer, DeadPartitionConsumer)
        if not consumer.dead.is_set():
            return None
        last = consumer.last_commit_of(consumer.dead_partition)
        return last.at if last is not None else None
    return fleet.events.get(key)


def scenario_deadline(scenario: str, c: float, m: Monitor) -> float:
    source, b = m
    if scenario == "behind":
        return warn_deadline(c, source, b)
    if scenario == "rewound":
        return rewind_deadline(c, source, b)
    return silence_deadline(c, source)


def selected_cadences(session: pytest.Session) -> tuple[float, ...]:
    """The commit cadences the selected tests of this module judge (1 s always: the checks of
    the whole fleet read its groups). The 30 s consumers set the fleet's length (~11 min); a
    selection without them runs in about 4."""
    chosen = {1.0}
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "module", None) is sys.modules[__name__] and callspec is not None:
            chosen.add(callspec.params.get("cadence", 1.0))
    return tuple(c for c in CADENCES if c in chosen)


@pytest.fixture(scope="module")
def matrix_kafka() -> Iterator[LocalKafka]:
    """A broker of the matrix's own: its deadlines are judged on commits and samples that the
    tests running beside it in parallel must not delay. Started, like everything the fleet
    runs, at a higher CPU priority where the run may give one (:func:`ahead_of_the_others`)."""
    with ahead_of_the_others(), LocalKafka(1, offsets_topic_partitions=4) as cluster:
        yield cluster


@contextlib.contextmanager
def ahead_of_the_others(step: int = 5) -> Iterator[bool]:
    """Run what starts inside (threads and processes inherit a thread's nice value on Linux)
    ``step`` nice levels ahead of the tests beside it, when allowed (root, as CI runs).

    The scenarios assume consumers that keep pace until their event: a stalled consumer whose
    last moving commit already carries lag is, for one commit interval, a consumer falling
    behind (WARN) before it is STALL. On the 2 cores a parallel run saturates at times, a
    starved fleet fell behind in 3 of 4 runs; alone, or ahead, it never did. Where the nice
    value cannot be lowered the fleet runs at the same priority as the rest, and the report
    says so."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before - step)
        raised = True
    except PermissionError:
        raised = False
    try:
        yield raised
    finally:
        if raised:
            os.setpriority(os.PRIO_PROCESS, 0, before)


@pytest.fixture(scope="module")
def fleet(matrix_kafka: LocalKafka, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    kafka = matrix_kafka
    prefix = make_unique_name("matrix")
    fleet = Fleet(kafka, prefix, cadences=selected_cadences(request.session))
    layout = {"steady": 3, "deadpart": 4, "idle": 2, "quiet": 2, "burst": 2, "batch": 2}
    fleet.topics = {name: f"{prefix}-{name}" for name in layout}
    fleet.partitions = {fleet.topics[n]: p for n, p in layout.items()}
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda n: kafka.create_topic(fleet.topics[n], layout[n]), layout))
    # Something to commit from the start on topics that stay (almost) silent.
    for name in ("idle", "quiet", "batch"):
        produce_batch(fleet.client(), fleet.topics[name], 10, layout[name])
    scenarios = ("keeps_up", "behind", "stalled", "stopped", "silent", "rewound", "idle",
                 "quiet", "burst", "deadpart", "late")
    for scenario in scenarios:
        for c in fleet.cadences:
            fleet.groups[(scenario, c)] = f"{prefix}-{scenario}-c{c:g}"
    fleet.groups[("batch", None)] = f"{prefix}-batch"

    with fleet.stack:
        fleet.ahead = fleet.stack.enter_context(ahead_of_the_others())
        for m in MONITORS:
            thread = ServiceThread(monitor_config(kafka, prefix, *m)).start()
            fleet.stack.callback(thread.stop)
            fleet.monitors[m] = thread
        for thread in fleet.monitors.values():
            wait_for(lambda t=thread: CLUSTER in t.service.evaluated_clusters, 60,
                     "every monitor's first evaluation")
        fleet.stack.callback(lambda: stop_all([*fleet.producers.values()]))
        fleet.stack.callback(lambda: stop_all(
            [*fleet.consumers.values()]
            + [c for old in fleet.retired.values() for c in old if c.is_alive()]
        ))
        fleet.stack.callback(fleet._stop_sampling.set)
        start_workload(fleet)
        fleet.in_background("sampler", fleet.sample_forever)
        fleet.run_to_the_end()
        yield fleet
        report(fleet, request, tmp_path_factory.getbasetemp() / "verdict_matrix.txt")


def stop_all(workers: list[Any]) -> None:
    """Stop workers in parallel (each close leaves its group: a second or so each)."""

    def stop(worker: Any) -> None:
        with contextlib.suppress(Exception):
            worker.stop()

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(stop, workers))


def start_workload(fleet: Fleet) -> None:
    cfg = fleet.client()
    t = fleet.topics
    steady_producer = ProducerLoad(cfg, t["steady"], rate=RATE, track_acks=True)
    fleet.producers = {
        "steady": steady_producer,
        "deadpart": ProducerLoad(cfg, t["deadpart"], rate=RATE),
        "quiet": ProducerLoad(cfg, t["quiet"], rate=1 / 60),  # one record a minute
        "burst": ProducerLoad(cfg, t["burst"], rate=2.0),  # steady and low, until the burst
    }
    for producer in fleet.producers.values():
        producer.start()
    for producer in fleet.producers.values():
        assert producer.ready.wait(30), f"{producer.name} found no partitions"
    fleet.t0 = time.monotonic()
    fleet.started_wall = time.time()
    g = fleet.groups
    for c in fleet.cadences:
        after = freeze_after(c)
        every: dict[str, Any] = {"commit_interval": c}
        starts: dict[str, GroupConsumer] = {
            "keeps_up": HealthyConsumer(cfg, t["steady"], g[("keeps_up", c)], **every),
            "behind": LaggingConsumer(cfg, t["steady"], g[("behind", c)],
                                      max_rate=LAGGING_RATE, **every),
            "stalled": StalledConsumer(cfg, t["steady"], g[("stalled", c)], stall_after_s=after,
                                       stall_after_records=10**9, commit_on_freeze=False,
                                       **every),
            "stopped": StoppedConsumer(cfg, t["steady"], g[("stopped", c)], stop_after_s=after,
                                       **every),
            "silent": SilentConsumer(cfg, t["steady"], g[("silent", c)], silent_after_s=after,
                                     **every),
            "rewound": HealthyConsumer(cfg, t["steady"], g[("rewound", c)], **every),
            "idle": HealthyConsumer(cfg, t["idle"], g[("idle", c)], **every),
            "quiet": HealthyConsumer(cfg, t["quiet"], g[("quiet", c)], **every),
            "burst": HealthyConsumer(cfg, t["burst"], g[("burst", c)], **every),
            "deadpart": DeadPartitionConsumer(cfg, t["deadpart"], g[("deadpart", c)],
                                              dead_partition=3, dead_after_s=after, **every),
        }
        for scenario, consumer in starts.items():
            fleet.start_consumer((scenario, c), consumer)
        fleet.in_background(f"rewind-c{c:g}", lambda c=c: rewind(fleet, c))
        fleet.in_background(f"late-c{c:g}", lambda c=c: start_late(fleet, c))
    fleet.start_consumer(("batch", None), BatchConsumer(cfg, t["batch"], g[("batch", None)],
                                                        period=BATCH_PERIOD))
    fleet.in_background("burst", lambda: burst(fleet))
    fleet.in_background("batch-data", lambda: batch_data(fleet))


def rewind(fleet: Fleet, c: float) -> None:
    """Reset the group's offsets to the start while its consumer is out of the group (as an
    operator does), then a consumer resumes from there (see the old scenario test)."""
    if not fleet.after(rewind_after(c)):
        return
    key = ("rewound", c)
    name, topic = fleet.groups[key], fleet.topics["steady"]
    fleet.consumers[key].stop()  # commits its position and leaves the group
    at = reset_offsets(fleet.client(), name, topic, fleet.partitions[topic])
    fleet.events[key] = at
    # Small fetches: the backlog since offset 0 arrives in chunks that alternate between the
    # partitions, instead of one partition's whole backlog first while the others wait (which
    # would be a real STALL of those partitions, not the scenario).
    fleet.start_consumer(key, LaggingConsumer(
        fleet.client(), topic, name, max_rate=REWOUND_RATE, commit_interval=c,
        consumer_config={"fetch.message.max.bytes": 1024},
    ))


def start_late(fleet: Fleet, c: float) -> None:
    if fleet.after(LATE_START):
        key = ("late", c)
        fleet.start_consumer(key, HealthyConsumer(fleet.client(), fleet.topics["steady"],
                                                  fleet.groups[key], commit_interval=c))


def burst(fleet: Fleet) -> None:
    if not fleet.after(BURST_AT):
        return
    topic = fleet.topics["burst"]
    fleet.events[("burst", None)] = time.monotonic()
    produce_batch(fleet.client(), topic, BURST, fleet.partitions[topic])
    ends = sum(end_offsets(fleet.client(), topic).values())
    for c in fleet.cadences:
        consumer = fleet.consumers[("burst", c)]
        caught = wait_for(lambda c=consumer: sum(c.positions.values()) >= ends, 60,
                          f"{consumer.name} absorbing the burst", interval=0.2)
        del caught
        fleet.notes[("burst", c)] = (
            f"absorbed {time.monotonic() - fleet.events[('burst', None)]:.0f}s"
        )


def batch_data(fleet: Fleet) -> None:
    """Data arrives just after the batch job's second wake, so it waits almost a period."""
    batch = fleet.consumers[("batch", None)]
    assert isinstance(batch, BatchConsumer)
    wait_for(lambda: len(batch.wakes) >= 2, 3 * BATCH_PERIOD, "the batch job's 2nd wake")
    time.sleep(max(0.0, batch.wakes[-1] + batch.awake_s + 1.0 - time.time()))
    fleet.events[("batch", None)] = time.monotonic()
    topic = fleet.topics["batch"]
    produce_batch(fleet.client(), topic, 10, fleet.partitions[topic])


# --------------------------------------------------------------------------- the checks


def judged(tl: list[Sample]) -> list[Sample]:
    """From the monitor's first verdict on (before it the group is simply not known yet)."""
    for i, s in enumerate(tl):
        if s.status != "NOTFOUND":
            return tl[i:]
    return []


def first(tl: list[Sample], status: str, after: float = float("-inf")) -> Sample | None:
    return next((s for s in tl if s.status == status and s.t >= after), None)


def wrong(tl: list[Sample], allowed: set[str], t0: float, what: str) -> list[str]:
    """Samples whose status is not in ``allowed`` (first occurrence of each)."""
    seen: dict[str, Sample] = {}
    for s in tl:
        if s.status not in allowed:
            seen.setdefault(s.status, s)
    return [
        f"{status} {what} at {_at(s.t, t0)}" for status, s in sorted(seen.items())
    ]


def settles(tl: list[Sample], status: str, after: float, t0: float, what: str) -> list[str]:
    """Once ``status``, always ``status``: the first sample after it that is not."""
    hit = first(tl, status, after)
    if hit is None:
        return []
    later = next((s for s in tl if s.t > hit.t and s.status != status), None)
    return [] if later is None else [
        f"{later.status} at {_at(later.t, t0)} after {status} at {_at(hit.t, t0)} ({what})"
    ]


def check_ok_throughout(fleet: Fleet, key: Key, m: Monitor) -> Row:
    tl = judged(fleet.timeline(m, key))
    if not tl:
        return Row("NOTFOUND", problems=["never judged"])
    row = Row(tl[-1].status, problems=wrong(tl, {"OK"}, fleet.t0, "while it keeps up"))
    row.note = fleet.notes.get(key, "")
    return row


def check_silence(fleet: Fleet, scenario: str, c: float, m: Monitor, want: str) -> Row:
    """stalled, stopped, silent, deadpart: OK before the event, ``want`` by the deadline,
    nothing else on the way, and ``want`` holds.

    A stalled consumer is tolerated as WARN between its freeze and STALL: it still commits,
    its lag grows with every commit, and until its window holds only the frozen offset it
    is, by every sample the rules see, a consumer falling behind (true, and an alarm, not a
    false one). Whether that shows depends on the lags its last moving commits carried (a
    fleet slowed by a busy machine shows it, one keeping pace does not); the row notes it."""
    key = (scenario, c)
    tl = judged(fleet.timeline(m, key))
    event = event_time(fleet, scenario, c)
    deadline = scenario_deadline(scenario, c, m)
    if not tl or event is None:
        return Row(tl[-1].status if tl else "NOTFOUND", deadline=deadline,
                   problems=["never judged" if not tl else f"the {scenario} event never came"])
    hit = first(tl, want, event)
    row = Row(tl[-1].status, detected=None if hit is None else hit.t - event, deadline=deadline)
    t0 = fleet.t0
    row.problems += wrong([s for s in tl if s.t < event], {"OK"}, t0, f"before the {scenario}")
    until = hit.t if hit is not None else float("inf")
    transition = {"OK", want, "WARN"} if scenario == "stalled" else {"OK", want}
    row.problems += wrong([s for s in tl if event <= s.t < until], transition, t0,
                          f"after the {scenario}")
    row.problems += wrong([s for s in tl if s.t >= until], {"OK", want}, t0,
                          f"after the {scenario}")
    warned = first(tl, "WARN", event)
    if warned is not None and warned.t < until:
        row.note = f"WARN {warned.t - event:.0f}s after the freeze, before {want}"
    if hit is None:
        row.problems.append(f"never {want} ({tl[-1].status} at the end)")
    elif hit.t - event > deadline + POLL_SLACK:
        row.problems.append(f"{want} {hit.t - event:.1f}s after the {scenario}, deadline "
                            f"{deadline:.0f}s + {POLL_SLACK:.0f}s")
    row.problems += settles(tl, want, event, t0, "data keeps arriving")
    return row


def check_behind(fleet: Fleet, c: float, m: Monitor) -> Row:
    key = ("behind", c)
    tl = judged(fleet.timeline(m, key))
    event = event_time(fleet, "behind", c)
    deadline = scenario_deadline("behind", c, m)
    if not tl or event is None:
        return Row("NOTFOUND", deadline=deadline, problems=["never judged"])
    hit = first(tl, "WARN")
    row = Row(tl[-1].status, detected=None if hit is None else hit.t - event, deadline=deadline)
    row.problems += wrong(tl, {"OK", "WARN"}, fleet.t0, "while falling behind")
    if hit is None:
        row.problems.append(f"never WARN (lag {tl[-1].totallag}, {tl[-1].lag_seconds:.0f}s "
                            f"at the end)")
    elif hit.t - event > deadline + POLL_SLACK:
        row.problems.append(f"WARN {hit.t - event:.1f}s after the lag started growing, "
                            f"deadline {deadline:.0f}s + {POLL_SLACK:.0f}s")
    row.problems += settles(tl, "WARN", event, fleet.t0, "the lag keeps growing")
    return row


def check_rewound(fleet: Fleet, c: float, m: Monitor) -> Row:
    key = ("rewound", c)
    tl = judged(fleet.timeline(m, key))
    event = event_time(fleet, "rewound", c)
    deadline = scenario_deadline("rewound", c, m)
    if not tl or event is None:
        return Row("NOTFOUND", deadline=deadline, problems=["never judged or never rewound"])
    hit = first(tl, "REWIND", event)
    row = Row(tl[-1].status, detected=None if hit is None else hit.t - event, deadline=deadline)
    t0 = fleet.t0
    row.problems += wrong([s for s in tl if s.t < event], {"OK"}, t0, "before the reset")
    until = hit.t if hit is not None else float("inf")
    row.problems += wrong([s for s in tl if event <= s.t < until], {"OK"}, t0,
                          "between the reset and REWIND")
    # Once the old offsets leave the window, the slow consumer is one falling behind.
    row.problems += wrong([s for s in tl if s.t >= until], {"REWIND", "WARN", "OK"}, t0,
                          "after REWIND")
    if hit is None:
        row.problems.append(f"never REWIND ({tl[-1].status} at the end)")
    else:
        if hit.t - event > deadline + POLL_SLACK:
            row.problems.append(f"REWIND {hit.t - event:.1f}s after the reset, deadline "
                                f"{deadline:.0f}s + {POLL_SLACK:.0f}s")
        assert hit.group is not None
        if not any(p.status == "REWIND" for p in hit.group.partitions):
            row.problems.append("group REWIND without a REWIND partition")
    return row


def check_burst(fleet: Fleet, c: float, m: Monitor) -> Row:
    key = ("burst", c)
    tl = judged(fleet.timeline(m, key))
    if not tl:
        return Row("NOTFOUND", problems=["never judged"])
    row = Row(tl[-1].status, note=fleet.notes.get(key, "not absorbed"))
    row.problems += wrong(tl, {"OK", "WARN"}, fleet.t0, "around a burst it absorbs")
    if ("burst", None) not in fleet.events or key not in fleet.notes:
        row.problems.append("the burst was not produced or not absorbed")
    if tl[-1].status != "OK":
        row.problems.append(f"{tl[-1].status} at the end, long after it caught up")
    if (warn := first(tl, "WARN")) is not None:
        row.note += f", WARN at {_at(warn.t, fleet.t0)}"
    return row


def check_late(fleet: Fleet, c: float, m: Monitor) -> Row:
    key = ("late", c)
    row = check_ok_throughout(fleet, key, m)
    tl = judged(fleet.timeline(m, key))
    if tl:
        row.note = f"judged from {_at(tl[0].t, fleet.t0)}"
        if tl[0].t < fleet.t0 + LATE_START:
            row.problems.append("judged before it started: not a late group")
    return row


# --------------------------------------------------------------------------- the tests

MONITOR_PARAMS = [pytest.param(m, id=monitor_id(m)) for m in MONITORS]
CADENCE_PARAMS = [pytest.param(c, id=f"c{c:g}s") for c in CADENCES]


def assert_row(fleet: Fleet, row: Row) -> None:
    assert not fleet.errors, fleet.errors
    assert not row.problems, "; ".join(row.problems)


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_1_keeps_up_is_ok(fleet: Fleet, cadence: float, monitor: Monitor) -> None:
    key = ("keeps_up", cadence)
    assert_row(fleet, check_ok_throughout(fleet, key, monitor))
    # Lag in seconds near zero: its committed position is at most one commit interval old,
    # seen at most r later (a second for the consumer and our sampling).
    bound = cadence + r_of(monitor[0]) + POLL_SLACK
    worst = max(judged(fleet.timeline(monitor, key)), key=lambda s: s.lag_seconds)
    assert worst.lag_seconds <= bound, (
        f"lag {worst.lag_seconds:.1f}s > {bound:.0f}s at {_at(worst.t, fleet.t0)}"
    )


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_2_falls_behind_is_warn_within_two_windows(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    row = check_behind(fleet, cadence, monitor)
    assert_row(fleet, row)
    consumer = fleet.consumers[("behind", cadence)]
    assert consumer.consumed < fleet.producers["steady"].delivered_total / 2
    final = judged(fleet.timeline(monitor, ("behind", cadence)))[-1].group
    assert final is not None and final.totallag > 0 and final.lag_seconds > 0
    assert {p.status for p in final.partitions} == {"WARN"}, final.partitions


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_3_stalled_is_stall_by_burrows_deadline(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    """Re-commits one offset with lag. Through ``admin`` this looks exactly like test 5 (no
    re-commit of the same offset is visible): both are STALL because a live member is there."""
    assert_row(fleet, check_silence(fleet, "stalled", cadence, monitor, "STALL"))
    consumer = fleet.consumers[("stalled", cadence)]
    assert isinstance(consumer, StalledConsumer)
    final = judged(fleet.timeline(monitor, ("stalled", cadence)))[-1].group
    assert final is not None and final.members >= 1
    frozen = {p: off for (_, p), off in consumer.frozen_offsets.items()}
    for p in final.partitions:
        assert p.end is not None and p.end.offset == frozen[p.partition], (p, frozen)
        assert p.current_lag > 0


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_4_consumer_gone_is_stop_by_burrows_deadline_with_true_lag_seconds(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    key = ("stopped", cadence)
    assert_row(fleet, check_silence(fleet, "stopped", cadence, monitor, "STOP"))
    tl = judged(fleet.timeline(monitor, key))
    event = event_time(fleet, "stopped", cadence)
    assert event is not None
    hit = first(tl, "STOP", event)
    assert hit is not None and hit.group is not None
    # Lag in seconds against the truth: the oldest unconsumed record is the one at the
    # committed offset, and the producer knows when the broker acknowledged it. The log end is
    # sampled every b s: allow one sampling interval (and, long after, the README's "within a
    # few percent" of the thinned history).
    producer = fleet.producers["steady"]
    b = monitor[1]
    for sample in (hit, tl[-1]):
        g = sample.group
        assert g is not None and g.status == "STOP" and g.members == 0, g
        assert g.totallag > 0
        for p in g.partitions:
            assert p.end is not None
            acked = producer.acked_at(p.partition, p.end.offset)
            assert acked is not None, p
            true_age = g.evaluated_at - acked
            tolerance = max(b + 1.0, 0.03 * true_age)
            assert not p.lag_seconds_lower_bound, p
            assert abs(p.lag_seconds - true_age) <= tolerance, (
                f"partition {p.partition} at {_at(sample.t, fleet.t0)}: lag_seconds "
                f"{p.lag_seconds:.1f}, truth {true_age:.1f}"
            )
        assert g.lag_seconds == max(p.lag_seconds for p in g.partitions)


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_5_alive_but_not_committing_is_stall(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    """A live member that neither consumes nor commits: STALL (Burrow: STOP)."""
    assert_row(fleet, check_silence(fleet, "silent", cadence, monitor, "STALL"))
    final = judged(fleet.timeline(monitor, ("silent", cadence)))[-1].group
    assert final is not None and final.members >= 1


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_6_offsets_reset_backwards_is_rewind(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    assert_row(fleet, check_rewound(fleet, cadence, monitor))


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_7_idle_topic_is_ok(fleet: Fleet, cadence: float, monitor: Monitor) -> None:
    assert_row(fleet, check_ok_throughout(fleet, ("idle", cadence), monitor))


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_8_quiet_topic_is_ok(fleet: Fleet, cadence: float, monitor: Monitor) -> None:
    assert_row(fleet, check_ok_throughout(fleet, ("quiet", cadence), monitor))
    # Records did arrive meanwhile: one a minute for as long as the fleet ran.
    ran = fleet.ended - fleet.t0
    assert fleet.producers["quiet"].delivered_total >= max(2, ran // 60 - 2), ran


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_9_burst_it_absorbs_is_never_an_error(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    assert_row(fleet, check_burst(fleet, cadence, monitor))


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_10_one_dead_partition_is_stall_there_only(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    key = ("deadpart", cadence)
    assert_row(fleet, check_silence(fleet, "deadpart", cadence, monitor, "STALL"))
    consumer = fleet.consumers[key]
    assert isinstance(consumer, DeadPartitionConsumer)
    for s in judged(fleet.timeline(monitor, key)):
        if s.status != "STALL":
            continue
        assert s.group is not None and s.group.members >= 1
        statuses = {p.partition: p.status for p in s.group.partitions}
        want = {p: "STALL" if p == consumer.dead_partition else "OK" for p in range(4)}
        assert statuses == want, f"at {_at(s.t, fleet.t0)}: {statuses}"


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
@pytest.mark.parametrize("cadence", CADENCE_PARAMS)
def test_11_group_starting_after_the_monitor_is_ok(
    fleet: Fleet, cadence: float, monitor: Monitor
) -> None:
    assert_row(fleet, check_late(fleet, cadence, monitor))


def check_batch(fleet: Fleet, m: Monitor) -> Row:
    key: Key = ("batch", None)
    row = check_ok_throughout(fleet, key, m)
    data_at = fleet.events.get(key)
    burrow = set().union(*(s for t, s in fleet.burrow.get(m, []) if data_at and t >= data_at))
    row.note = f"Burrow: {'/'.join(sorted(burrow)) or '-'}"
    tl = judged(fleet.timeline(m, key))
    if data_at is None:
        row.problems.append("no data was produced for the batch job")
    elif not any(s.totallag > 0 for s in tl if s.t >= data_at):
        row.problems.append("the monitor never saw the new data waiting")
    if tl and tl[-1].totallag != 0:
        row.problems.append(f"lag {tl[-1].totallag} at the end: the batch job did not catch up")
    return row


@pytest.mark.parametrize("monitor", MONITOR_PARAMS)
def test_12_idle_batch_consumer_is_never_stop(fleet: Fleet, monitor: Monitor) -> None:
    """A batch job on an idle topic: caught up, no commits for a long time, then data arrives
    just after a wake and waits almost a period for the next one. Ours stays OK throughout.
    Burrow's rules call it STOP on the same windows once its ring of the last 10 log ends no
    longer holds one at the committed offset: the data waits ~27 s, longer than the ring at
    b = 2 s (20 s), so the trap shows on the 2 s offsets-topic monitor (at the 10 s default
    the ring spans 100 s and hides it)."""
    assert_row(fleet, check_batch(fleet, monitor))
    batch = fleet.consumers[("batch", None)]
    assert isinstance(batch, BatchConsumer)
    data_at = fleet.events[("batch", None)]
    assert any(w > time.time() - (time.monotonic() - data_at) for w in batch.wakes)
    if monitor == ("offsets_topic", 2.0):
        burrow = set().union(*(s for t, s in fleet.burrow[monitor] if t >= data_at))
        assert "STOP" in burrow, burrow  # the trap Burrow falls into


def test_unknown_group_is_notfound_and_arrays_hold_known_codes(fleet: Fleet) -> None:
    for thread in fleet.monitors.values():
        result = thread.service.evaluator.result(CLUSTER)
        assert result is not None and result.partitions is not None
        assert result.group("no-such-group-" + fleet.prefix) is None
        assert fleet.groups[("keeps_up", 1.0)] in result.group_names()
        status = result.partitions.status
        assert ((status >= Status.OK) & (status <= Status.STOP)).all()
        for name in result.group_names():
            assert result.group(name) is result.group(name)  # built once per round


# --------------------------------------------------------------------------- the table


def all_rows(fleet: Fleet) -> dict[tuple[str, float | None], dict[Monitor, Row]]:
    checks: dict[str, Callable[[float, Monitor], Row]] = {
        "1 keeps up": lambda c, m: check_ok_throughout(fleet, ("keeps_up", c), m),
        "2 falls behind → WARN": lambda c, m: check_behind(fleet, c, m),
        "3 stalled → STALL": lambda c, m: check_silence(fleet, "stalled", c, m, "STALL"),
        "4 gone → STOP": lambda c, m: check_silence(fleet, "stopped", c, m, "STOP"),
        "5 alive, silent → STALL": lambda c, m: check_silence(fleet, "silent", c, m, "STALL"),
        "6 rewound → REWIND": lambda c, m: check_rewound(fleet, c, m),
        "7 idle topic": lambda c, m: check_ok_throughout(fleet, ("idle", c), m),
        "8 quiet topic": lambda c, m: check_ok_throughout(fleet, ("quiet", c), m),
        "9 burst": lambda c, m: check_burst(fleet, c, m),
        "10 dead partition → STALL": lambda c, m: check_silence(
            fleet, "deadpart", c, m, "STALL"),
        "11 starts late": lambda c, m: check_late(fleet, c, m),
    }
    rows: dict[tuple[str, float | None], dict[Monitor, Row]] = {}
    for name, check in checks.items():
        for c in fleet.cadences:
            rows[(name, c)] = {m: check(c, m) for m in MONITORS}
    rows[("12 idle batch job", None)] = {m: check_batch(fleet, m) for m in MONITORS}
    return rows


def render(fleet: Fleet) -> str:
    rows = all_rows(fleet)
    head = ["scenario", "c", *(monitor_id(m) for m in MONITORS)]
    body = [
        [name, "-" if c is None else f"{c:g}s", *(cells[m].cell() for m in MONITORS)]
        for (name, c), cells in rows.items()
    ]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = [" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in [head, *body]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    problems = [
        f"  {name} c={c} {monitor_id(m)}: {'; '.join(row.problems)}"
        for (name, c), cells in rows.items() for m, row in cells.items() if row.problems
    ]
    return "\n".join([
        f"verdict matrix: fleet ran {fleet.ended - fleet.t0:.0f} s "
        f"({'ahead of' if fleet.ahead else 'at the same CPU priority as'} the tests beside "
        "it); cell = final verdict, "
        "detection time/deadline in s after the scenario's event (deadline without the "
        f"{POLL_SLACK:.0f} s polling slack), FAIL = a problem below",
        *lines, "", "problems:" if problems else "no problems", *problems,
        *(f"  background: {e}" for e in fleet.errors),
    ])


def report(fleet: Fleet, request: pytest.FixtureRequest, path: Path) -> None:
    text = render(fleet)
    path.write_text(text + "\n")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n{text}\n(written to {path})", flush=True)

"""A restart of the monitor is an event in the data, not a reset of it (issue 13, item 3), on
the real Kafka 0.9 broker.

A stopped group (its consumer closed while data keeps coming), a stalled group (its
consumer stays in the group and re-commits the same offsets) and a lagging group (its consumer
reads a quarter of what is produced) are watched by three real
services at once, one per offsets source (``admin``, ``offsets_topic``, ``both``), each on the
default collector, evaluator and state intervals with its own ``state.path``. Once every
monitor reports STOP and STALL, the monitors are stopped (the shutdown save) and new ones
started on the same directories. For the next minute, polled every second, neither group
may read OK or NOTFOUND through any of them, nor change its verdict; the lag in seconds of the
two that do not move must keep growing with wall time as it did before the restart, and the
lagging group's must not start again from nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from monitor.config import MonitorConfig
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    GroupConsumer,
    LaggingConsumer,
    ProducerLoad,
    StalledConsumer,
    StoppedConsumer,
    librdkafka_logger,
)
from monitor.ingest.offsets_topic import OffsetsTopicCollector
from monitor.model.verdicts import GroupStatus
from tests.harness.kafka_fixtures import defaults_config, make_unique_name
from tests.harness.service_thread import ServiceThread

pytestmark = [pytest.mark.kafka, pytest.mark.slow(140), pytest.mark.timeout(900)]

CLUSTER = "local"
SOURCES = ("admin", "offsets_topic", "both")
WANT = {"stopped": "STOP", "stalled": "STALL", "lagging": "WARN"}
RATE = 20.0  # records/s produced to each group's topic
VERDICT_TIMEOUT = 300.0  # generous: default intervals, and the rules are still being tuned
WATCH = 60.0  # seconds watched after the restart
TOLERANCE = 0.10


def monitor_config(kafka: LocalKafka, prefix: str, source: str, state: Path) -> MonitorConfig:
    """The defaults, with this monitor's own state directory."""
    return defaults_config(kafka, prefix, source, state={"path": str(state)})


@dataclass
class Sample:
    at: float  # when the verdict was evaluated (unix s)
    status: str | None  # None: NOTFOUND
    lag_seconds: float


@dataclass
class Watch:
    """Verdicts of the two groups through one monitor."""

    source: str
    names: dict[str, str]
    monitor: ServiceThread
    before: dict[str, Sample] = field(default_factory=dict)
    after: dict[str, list[Sample]] = field(default_factory=dict)
    verdict_after: dict[str, float] = field(default_factory=dict)  # s from the workload's start

    def sample(self, scenario: str) -> Sample:
        result = self.monitor.service.evaluator.result(CLUSTER)
        g: GroupStatus | None = result.group(self.names[scenario]) if result else None
        if g is None:
            return Sample(result.evaluated_at if result else time.time(), None, 0.0)
        return Sample(g.evaluated_at, g.status, g.lag_seconds)


def run_all(fns: list[Callable[[], None]]) -> None:
    """Run ``fns`` concurrently (one thread each) and re-raise the first failure."""
    errors: list[BaseException] = []

    def target(fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@pytest.fixture
def workload(kafka: LocalKafka) -> Iterator[tuple[str, dict[str, str], dict[str, GroupConsumer]]]:
    prefix = make_unique_name("restart")
    names = {s: f"{prefix}-{s}" for s in WANT}
    for topic in names.values():
        kafka.create_topic(topic, partitions=2)
    cfg = {**kafka.client_config(), "logger": librdkafka_logger}
    with contextlib.ExitStack() as stack:
        for topic in names.values():
            producer = ProducerLoad(cfg, topic, rate=RATE)
            producer.start()
            stack.callback(producer.stop)
        consumers: dict[str, GroupConsumer] = {
            "stopped": StoppedConsumer(cfg, names["stopped"], names["stopped"],
                                       stop_after_s=20.0),
            "stalled": StalledConsumer(cfg, names["stalled"], names["stalled"],
                                       stall_after_s=20.0),
            "lagging": LaggingConsumer(cfg, names["lagging"], names["lagging"],
                                       max_rate=RATE / 4),
        }
        for consumer in consumers.values():
            consumer.start()
            stack.callback(consumer.stop)
        yield prefix, names, consumers


def test_verdicts_and_lag_seconds_survive_a_restart(
    kafka: LocalKafka, tmp_path: Path,
    workload: tuple[str, dict[str, str], dict[str, GroupConsumer]],
) -> None:
    prefix, names, consumers = workload
    started = time.monotonic()
    configs = {s: monitor_config(kafka, prefix, s, tmp_path / s) for s in SOURCES}
    watches = {s: Watch(s, names, ServiceThread(configs[s]).start()) for s in SOURCES}
    try:
        # 1. Every monitor reaches the verdicts (default intervals: no tuning to get them).
        deadline = time.monotonic() + VERDICT_TIMEOUT
        while time.monotonic() < deadline:
            for w in watches.values():
                for scenario, want in WANT.items():
                    if scenario not in w.verdict_after and w.sample(scenario).status == want:
                        w.verdict_after[scenario] = time.monotonic() - started
            if all(len(w.verdict_after) == len(WANT) for w in watches.values()):
                break
            time.sleep(1.0)
        missing = {s: sorted(set(WANT) - set(w.verdict_after)) for s, w in watches.items()}
        assert not any(missing.values()), (
            f"no verdict within {VERDICT_TIMEOUT:.0f} s: {missing}; now "
            + str({s: {c: w.sample(c) for c in WANT} for s, w in watches.items()})
        )
        for consumer in consumers.values():
            consumer.check()

        # 2. The last verdicts before the restart, then the restart (the shutdown save).
        for w in watches.values():
            w.before = {c: w.sample(c) for c in WANT}
            assert all(w.before[c].status == WANT[c] for c in WANT), (w.source, w.before)
        reads_before = {s: _records_read(w.monitor) for s, w in watches.items()}
        run_all([w.monitor.stop for w in watches.values()])
        for w in watches.values():
            state = w.monitor.service.state
            assert state is not None and state.failures == 0 and state.saves >= 1
            w.monitor = ServiceThread(configs[w.source])
            restored = w.monitor.service.state
            assert restored is not None and restored.restored is not None, w.source
        run_all([w.monitor.start for w in watches.values()])

        # 3. A minute after it: the verdicts hold and the lag keeps its age.
        end = time.monotonic() + WATCH
        while time.monotonic() < end:
            for w in watches.values():
                for c in WANT:
                    w.after.setdefault(c, []).append(w.sample(c))
            time.sleep(1.0)
        drift = {s: {c: _check_after(w, c) for c in WANT} for s, w in watches.items()}
        for s, w in watches.items():
            # The offsets-topic reader read on from where it was, not the topic again.
            reads = _records_read(w.monitor)
            if reads is not None:
                assert reads_before[s] is not None and reads < reads_before[s], (s, reads)
    finally:
        with contextlib.suppress(Exception):
            run_all([w.monitor.stop for w in watches.values()])
    print("\nverdict after workload start (s):",
          {s: {c: round(t) for c, t in w.verdict_after.items()} for s, w in watches.items()},
          "\nlargest lag-seconds deviation after the restart (fraction of expected):", drift)


def _check_after(w: Watch, scenario: str) -> float:
    """Never OK or NOTFOUND, never another verdict; lag in seconds within 10 % of its value
    before the restart plus the time evaluated since (the lagging group, which moves: never
    below 90 % of its value before).

    Why that bound holds: neither consumer's committed offset moves, so its lag in seconds is
    "now minus when the log end passed the committed offset", a fixed moment in the log-end
    history, and grows one second per second. The restored history holds that moment as
    it was, so the only drift left is the estimate's (the history is thinned with age,
    keeping resolution proportional to it: a few percent at most); 10 % of the expected
    value is the issue's bound. Without the history, lag would restart from the seconds
    since the restart, far outside it."""
    before = w.before[scenario]
    samples = w.after[scenario]
    assert samples, (w.source, scenario)
    wrong = [s for s in samples if s.status != WANT[scenario]]
    assert not wrong, (w.source, scenario, "verdict changed after the restart", before, wrong)
    worst = 0.0
    if scenario == "lagging":  # it moves: its lag in seconds grows, slower than wall time
        low = [s for s in samples if s.lag_seconds < (1 - TOLERANCE) * before.lag_seconds]
        assert not low, (w.source, scenario, "lag seconds fell after the restart", before, low)
        return worst
    for s in samples:
        expected = before.lag_seconds + (s.at - before.at)
        assert abs(s.lag_seconds - expected) <= TOLERANCE * expected, (
            w.source, scenario, before, s, expected)
        worst = max(worst, abs(s.lag_seconds - expected) / expected)
    return round(worst, 4)


def _records_read(monitor: ServiceThread) -> int | None:
    readers = [c for c in monitor.service.collectors if isinstance(c, OffsetsTopicCollector)]
    return readers[0].progress.records_read if readers else None

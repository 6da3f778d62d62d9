"""Alert quality, measured: a labelled fault-injection run scored under every rule set.

    make bench-alerts                                   # the whole suite (~30 min), README updated
    .venv/bin/python bench/alert_quality.py --quick     # a short look (~10 min), nothing written

One run on a real Kafka 0.9.0.1 broker (``monitor.dev.localkafka``): ``kafka-monitor run`` on
its defaults (only the cluster, the HTTP port and the recorder set), a real Prometheus scraping
it every 15 s with the shipped rules (``alerts/kafka-monitor.rules.yml``), and one consumer
group per fault scenario and commit cadence (every 1 s, 5 s, 30 s, and librdkafka's
auto-commit every 5 s), all at once. The timeline (seconds after the consumers start):

* 120: the broker restarts; 240: the monitor restarts (SIGTERM, started again, no state
  configured: the defaults keep none). Every group is healthy then: an alarm is false.
* ``FAULT_AT``: each scenario's fault begins; ``FAULT_END``: it ends (the consumer is
  replaced by a healthy one, which catches up); the run goes on until ``END`` to see the
  alarms clear. A group is scored from 60 s after its consumer started.

The run is recorded once (the service's recorder, and Prometheus's ``ALERTS`` series), the
labels are written from what really happened (the moment each fault was injected), and
``kafka-monitor pipeline score``'s functions score every rule set on exactly that data: the
project's defaults, Burrow's rules, threshold and rate alerts, and the pages Prometheus fired.
Output: the run folder (recording, ``labels.yaml``, ``prometheus-alerts.json``,
``scores.json``), and with ``--publish`` the README's table, ``docs/alert-quality.png`` and
the small recording kept in ``bench/data/alert-quality-sample/`` for tests and newcomers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from monitor.dev.localkafka import LocalKafka  # noqa: E402
from monitor.dev.localkafka.workload import (  # noqa: E402
    DeadPartitionConsumer,
    GroupConsumer,
    HealthyConsumer,
    LaggingConsumer,
    ProducerLoad,
    SilentConsumer,
    StalledConsumer,
    librdkafka_logger,
    produce_batch,
    reset_offsets,
)
from monitor.pipeline.labels import GroupLabels, Labels, Window  # noqa: E402

CLUSTER = "local"
RATE = 40.0  # records/s on each producing topic
RULES = ROOT / "alerts" / "kafka-monitor.rules.yml"
SAMPLE = ROOT / "bench" / "data" / "alert-quality-sample"
README = ROOT / "README.md"
PLOT = ROOT / "docs" / "alert-quality.png"
BEGIN, END_MARK = "<!-- alert-quality:begin -->", "<!-- alert-quality:end -->"


@dataclass(frozen=True)
class Timeline:
    broker_restart: float = 120.0
    monitor_restart: float = 240.0
    fault_at: float = 600.0
    fault_end: float = 1320.0  # 12 min: a 30 s committer is STOP after ~5 min, paged 5 min later
    end: float = 1560.0
    score_from: float = 60.0
    cadences: tuple[str, ...] = ("1s", "5s", "30s", "auto")


QUICK = Timeline(broker_restart=60.0, monitor_restart=100.0, fault_at=180.0, fault_end=480.0,
                 end=560.0, score_from=30.0, cadences=("1s", "5s"))


def consumer_settings(cadence: str) -> dict[str, Any]:
    """A workload's commit settings: explicit commits every N s, or librdkafka's auto-commit
    (its default 5 s interval, offsets stored as records are handed over)."""
    if cadence == "auto":
        return {"commit_interval": math.inf,
                "consumer_config": {"enable.auto.commit": True, "auto.commit.interval.ms": 5000}}
    return {"commit_interval": float(cadence.rstrip("s"))}


# --------------------------------------------------------------------------- scenarios


@dataclass
class Group:
    """One consumer group of the run: its scenario, cadence, consumers and what happened."""

    scenario: str
    slug: str
    cadence: str
    name: str
    topic: str
    consumer: GroupConsumer | None = None
    started: float = 0.0  # unix time its first consumer started
    fault_start: float | None = None
    fault_end: float | None = None
    retired: list[GroupConsumer] = field(default_factory=list)


@dataclass(frozen=True)
class Scenario:
    """A fault: what the statuses that name it are (``expect``), which are acceptable on the
    way (``tolerate``), and how it is injected. ``expect`` empty: no fault (a healthy group
    under a condition that must not raise an alarm)."""

    name: str
    slug: str  # in the group's name
    topic: str
    expect: tuple[str, ...] = ()
    tolerate: tuple[str, ...] = ()


SCENARIOS = (
    Scenario("restarts, healthy consumer", "healthy", "steady"),
    Scenario("consumer gone", "gone", "steady", ("STOP",), ("WARN",)),
    Scenario("alive, not committing", "silent", "steady", ("STALL", "STOP"), ("WARN",)),
    Scenario("stalled (same offset re-committed)", "stalled", "steady", ("STALL",),
             ("WARN", "STOP")),
    Scenario("slow: half the produce rate", "slow", "steady", ("WARN",)),
    Scenario("slow: 1 % below the produce rate", "barely", "steady", ("WARN",)),
    Scenario("burst then catch-up", "burst", "burst"),
    Scenario("idle topic", "idle", "idle"),
    Scenario("quiet topic (a record a minute)", "quiet", "quiet"),
    Scenario("rebalance storm", "storm", "storm"),
    Scenario("rolling restart (a consumer away 10 s)", "deploy", "steady"),
    Scenario("new group, starting from the earliest offset", "new", "steady"),
    Scenario("one dead partition of four", "deadpart", "deadpart", ("STALL", "STOP"),
             ("WARN",)),
    Scenario("rewound to the start", "rewound", "steady", ("REWIND",), ("WARN",)),
    Scenario("retention deletes unread records", "retention", "retention", ("STOP",),
             ("WARN",)),
)
TOPICS = {"steady": 3, "burst": 2, "idle": 2, "quiet": 2, "storm": 4, "deadpart": 4,
          "retention": 1}
RETENTION_TOPIC = {"segment.bytes": 16_384, "retention.bytes": 200_000}


class Run:
    """The broker, the monitor, Prometheus and the groups of one benchmark run."""

    def __init__(self, out: Path, timeline: Timeline) -> None:
        self.out = out
        self.tl = timeline
        self.prefix = f"aq{int(time.time()) % 100000}"
        self.stack = contextlib.ExitStack()
        self.kafka: LocalKafka | None = None
        self.monitor: subprocess.Popen[bytes] | None = None
        self.monitor_port = free_port()
        self.prometheus_port = free_port()
        self.groups: list[Group] = []
        self.producers: list[ProducerLoad] = []
        self.t0 = 0.0  # unix time the consumers started
        self.events: dict[str, float] = {}
        self.ended = 0.0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ---- infrastructure

    def client(self) -> dict[str, Any]:
        assert self.kafka is not None
        return {**self.kafka.client_config(), "logger": librdkafka_logger}

    def start_infrastructure(self) -> None:
        kafka = LocalKafka(1, broker_props={"log.retention.check.interval.ms": 1000})
        self.kafka = self.stack.enter_context(kafka)
        for short, parts in TOPICS.items():
            topic_config = RETENTION_TOPIC if short == "retention" else None
            kafka.create_topic(self.topic(short), parts, config=topic_config)
        config: dict[str, Any] = {
            "clusters": [{
                "name": CLUSTER, "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "broker_version_fallback": "0.9.0.1",
                "groups": {"allow": [f"^{self.prefix}-"]},
            }],
            "http": {"host": "127.0.0.1", "port": self.monitor_port},
            "recorder": {"enabled": True, "path": str(self.out / "recording"),
                         "max_file_age": "60s"},
        }
        (self.out / "monitor.yaml").write_text(yaml.safe_dump(config))
        self.start_monitor()
        self.stack.callback(self.stop_monitor)
        prom: dict[str, Any] = {
            "global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": "kafka-monitor", "static_configs": [
                {"targets": [f"127.0.0.1:{self.monitor_port}"]}]}],
        }
        (self.out / "prometheus.yml").write_text(yaml.safe_dump(prom))
        log = self.stack.enter_context((self.out / "prometheus.log").open("wb"))
        proc = subprocess.Popen(
            [shutil.which("prometheus") or "prometheus",
             f"--config.file={self.out / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.out / 'prometheus-data'}",
             f"--web.listen-address=127.0.0.1:{self.prometheus_port}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.stack.callback(stop_process, proc)
        wait_for(lambda: http_ok(f"{self.prom_url}/-/ready"), 60, "Prometheus ready")
        wait_for(lambda: http_ok(f"http://127.0.0.1:{self.monitor_port}/ready"), 90,
                 "the monitor ready")

    @property
    def prom_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    def start_monitor(self) -> None:
        log = (self.out / "monitor.log").open("ab")
        self.monitor = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(self.out / "monitor.yaml")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.out,
        )
        log.close()

    def stop_monitor(self) -> None:
        if self.monitor is not None:
            stop_process(self.monitor, 30)
            self.monitor = None

    def topic(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    # ---- the workload

    def start_workload(self) -> None:
        cfg = self.client()
        rates = {"steady": RATE, "burst": 2.0, "quiet": 1 / 60, "storm": RATE,
                 "deadpart": RATE, "retention": RATE}
        for short, rate in rates.items():
            # The retention topic's 16 KB segments take no larger batch (a backlog held
            # through the broker restart would be one).
            small = {"batch.size": 8000} if short == "retention" else None
            producer = ProducerLoad(cfg, self.topic(short), rate=rate, producer_config=small)
            producer.start()
            self.producers.append(producer)
        for producer in self.producers:
            if not producer.ready.wait(30):
                raise RuntimeError(f"{producer.name} found no partitions")
        produce_batch(self.client(), self.topic("idle"), 20)
        self.t0 = time.time()
        for scenario in SCENARIOS:
            for cadence in self.tl.cadences:
                name = f"{self.prefix}-{scenario.slug}-{cadence}"
                group = Group(scenario.name, scenario.slug, cadence, name,
                              self.topic(scenario.topic))
                self.groups.append(group)
                if scenario.slug != "new":  # a new group appears at the fault
                    self.replace(group, self.first_consumer(scenario, group))
                    group.started = time.time()

    def first_consumer(self, scenario: Scenario, g: Group) -> GroupConsumer:
        cfg, every = self.client(), consumer_settings(g.cadence)
        never = 10.0**9
        if scenario.slug == "stalled":
            return StalledConsumer(cfg, g.topic, g.name, stall_after_s=never,
                                   stall_after_records=10**12, commit_on_freeze=False, **every)
        if scenario.slug == "silent":
            return SilentConsumer(cfg, g.topic, g.name, silent_after_s=never, **every)
        if scenario.slug == "deadpart":
            return DeadPartitionConsumer(cfg, g.topic, g.name, dead_partition=3,
                                         dead_after_s=never, **every)
        return HealthyConsumer(cfg, g.topic, g.name, **every)

    def replace(self, g: Group, consumer: GroupConsumer | None) -> None:
        old = g.consumer
        if old is not None:
            old.stop()
            g.retired.append(old)
        g.consumer = consumer
        if consumer is not None:
            consumer.start()

    def inject(self, g: Group) -> None:
        """The fault of ``g``'s scenario, now; ``fault_start`` is when it began."""
        cfg, every = self.client(), consumer_settings(g.cadence)
        c = g.consumer
        g.fault_start = time.time()
        if g.slug in ("gone", "retention"):
            self.replace(g, None)
        elif g.slug == "stalled":
            assert isinstance(c, StalledConsumer)
            c.stall_after_s = 0.0
        elif g.slug == "silent":
            assert isinstance(c, SilentConsumer)
            c.silent_after_s = 0.0
        elif g.slug == "deadpart":
            assert isinstance(c, DeadPartitionConsumer)
            c.dead_after_s = 0.0
        elif g.slug in ("slow", "barely"):
            rate = RATE / 2 if g.slug == "slow" else RATE * 0.99
            self.replace(g, LaggingConsumer(cfg, g.topic, g.name, max_rate=rate, **every))
        elif g.slug == "new":
            self.replace(g, HealthyConsumer(cfg, g.topic, g.name, **every))
            g.started = time.time()
            g.fault_start = None
        elif g.slug == "rewound":
            self.replace(g, None)
            reset_offsets(cfg, g.name, g.topic, TOPICS["steady"])
            g.fault_start = time.time()
            # Small fetches: the backlog comes in chunks alternating between the partitions
            # (one partition's whole backlog first would be a real STALL of the others).
            self.replace(g, LaggingConsumer(
                cfg, g.topic, g.name, max_rate=RATE / 2,
                **{**every, "consumer_config": {**every.get("consumer_config", {}),
                                                "fetch.message.max.bytes": 1024}}))
        else:
            g.fault_start = None

    def recover(self, g: Group) -> None:
        if g.fault_start is None:
            return
        self.replace(g, HealthyConsumer(self.client(), g.topic, g.name,
                                        **consumer_settings(g.cadence)))
        g.fault_end = time.time()

    def background(self, name: str, fn: Callable[[], None]) -> None:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported at the end
                self.errors.append(f"{name}: {exc!r}")

        thread = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def at(self, offset: float) -> bool:
        return not self._stop.wait(max(0.0, self.t0 + offset - time.time()))

    def burst_loop(self) -> None:
        """A burst of 3,000 records every 4 minutes (absorbed within seconds)."""
        k = 1
        while self.at(k * 240.0):
            produce_batch(self.client(), self.topic("burst"), 3000)
            k += 1

    def storm_loop(self) -> None:
        """From the fault to its end a second member joins every 20 s, stays 10 s, leaves."""
        if not self.at(self.tl.fault_at):
            return
        storm = [g for g in self.groups if g.scenario == "rebalance storm"]
        while time.time() < self.t0 + self.tl.fault_end and not self._stop.is_set():
            extra = [HealthyConsumer(self.client(), g.topic, g.name,
                                     **consumer_settings(g.cadence)) for g in storm]
            for c in extra:
                c.start()
            self._stop.wait(10.0)
            for c in extra:
                c.stop()
            self._stop.wait(10.0)

    def deploy_loop(self) -> None:
        """From the fault to its end, every 3 minutes, each consumer of the rolling-restart
        groups closes (committing its position) and a new one takes over 10 s later."""
        k = 0
        while self.at(self.tl.fault_at + k * 180.0) and (
                time.time() < self.t0 + self.tl.fault_end):
            rolling = [g for g in self.groups if g.slug == "deploy"]
            for g in rolling:
                self.replace(g, None)
            self._stop.wait(10.0)
            for g in rolling:
                self.replace(g, HealthyConsumer(self.client(), g.topic, g.name,
                                                **consumer_settings(g.cadence)))
            k += 1

    def play(self) -> None:
        tl = self.tl
        self.background("bursts", self.burst_loop)
        self.background("storm", self.storm_loop)
        self.background("deploy", self.deploy_loop)
        assert self.kafka is not None
        if self.at(tl.broker_restart):
            self.events["broker restart"] = time.time()
            self.kafka.stop_broker(self.kafka.brokers[0].id)
            self.kafka.start_broker(self.kafka.brokers[0].id)
            print(f"broker restarted at t+{time.time() - self.t0:.0f}s", file=sys.stderr)
        if self.at(tl.monitor_restart):
            self.events["monitor restart"] = time.time()
            self.stop_monitor()
            self.start_monitor()
            print(f"monitor restarted at t+{time.time() - self.t0:.0f}s", file=sys.stderr)
        if self.at(tl.fault_at):
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(self.inject, self.groups))
            print(f"faults injected by t+{time.time() - self.t0:.0f}s", file=sys.stderr)
        if self.at(tl.fault_end):
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(self.recover, self.groups))
            print(f"faults ended by t+{time.time() - self.t0:.0f}s", file=sys.stderr)
        self.at(tl.end)
        self.ended = time.time()
        self._stop.set()

    def stop_workload(self) -> None:
        self._stop.set()
        workers: list[Any] = [*self.producers]
        for g in self.groups:
            workers += [c for c in [g.consumer, *g.retired] if c is not None]
        for w in workers:
            with contextlib.suppress(Exception):
                w.stop()

    # ---- what was recorded

    def labels(self) -> Labels:
        groups = []
        by_name = {s.name: s for s in SCENARIOS}
        for g in self.groups:
            s = by_name[g.scenario]
            windows = []
            if s.expect and g.fault_start is not None:
                windows.append(Window.model_validate({
                    "fault": s.name, "start": g.fault_start, "end": g.fault_end,
                    "expect": list(s.expect), "tolerate": list(s.tolerate)}))
            groups.append(GroupLabels(
                cluster=CLUSTER, group=g.name, scenario=g.scenario,
                variant=f"commits {'auto (5s)' if g.cadence == 'auto' else 'every ' + g.cadence}",
                start=g.started + (0.0 if g.slug == "new" else self.tl.score_from),
                end=self.ended, windows=windows))
        return Labels(groups=groups)

    def prometheus_alerts(self, step: float = 5.0) -> list[dict[str, Any]]:
        """Every consumer-group alert Prometheus fired during the run, as episodes."""
        query = urllib.parse.urlencode({
            "query": 'ALERTS{alertstate="firing", group!=""}', "start": self.t0,
            "end": self.ended, "step": step,
        })
        with urllib.request.urlopen(f"{self.prom_url}/api/v1/query_range?{query}",
                                    timeout=60) as reply:
            data = json.load(reply)["data"]["result"]
        episodes = []
        for series in data:
            labels = series["metric"]
            times = [float(t) for t, _ in series["values"]]
            start = prev = times[0]
            for t in [*times[1:], math.inf]:
                if t - prev > step * 1.5:
                    still = prev + step > self.ended
                    episodes.append({"cluster": labels.get("cluster", CLUSTER),
                                     "group": labels["group"],
                                     "alertname": labels["alertname"], "start": start,
                                     "end": None if still else prev + step})
                    start = t
                prev = t
        return episodes


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def running(run: Run) -> Iterator[Run]:
    with run.stack:
        run.start_infrastructure()
        try:
            run.start_workload()
            yield run
        finally:
            run.stop_workload()


# --------------------------------------------------------------------------- scoring


def score_run(out: Path) -> dict[str, Any]:
    from monitor.pipeline.labels import load_labels
    from monitor.pipeline.score import score, summary_rows
    from monitor.pipeline.scorecard import markdown_table, rule_set_episodes

    labels = load_labels(out / "labels.yaml")
    episodes = rule_set_episodes(out / "recording", labels)
    results = score(episodes, labels)
    order = list(dict.fromkeys(g.scenario for g in labels.groups))
    return {"results": results, "rows": summary_rows(results),
            "table": markdown_table(results, order), "order": order}


def keep_sample(out: Path, labels: Labels, pages: list[dict[str, Any]],
                dest: Path = SAMPLE) -> None:
    """A small part of the run kept in the repository: the groups committing every 5 s of a
    few scenarios, every row they need (their commits and memberships, their topics' log
    ends, metadata and the clock marks), their labels and pages."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from monitor.pipeline.backtest import read_local
    from monitor.record.rows import arrow_schema

    keep_scenarios = {"consumer gone", "stalled (same offset re-committed)",
                      "slow: half the produce rate", "burst then catch-up",
                      "rewound to the start"}
    chosen = [g for g in labels.groups
              if g.scenario in keep_scenarios and g.variant.endswith("every 5s")]
    names = {g.group for g in chosen}
    rows = read_local(out / "recording")
    topics = set(rows.loc[rows["group"].isin(names), "topic"].dropna())
    mask = rows["group"].isin(names) | (
        rows["group"].isna() & (rows["topic"].isna() | rows["topic"].isin(topics))
        & (rows["kind"] != "canary"))
    part = rows[mask].sort_values(["run", "seq", "idx"], kind="stable")
    shutil.rmtree(dest, ignore_errors=True)
    schema = arrow_schema(with_cluster=False)
    for date, day in part.groupby("date"):
        folder = dest / "recording" / "observations" / f"cluster={CLUSTER}" / f"date={date}"
        folder.mkdir(parents=True)
        table = pa.Table.from_pandas(day[[f.name for f in schema]], schema=schema,
                                     preserve_index=False)
        pq.write_table(table, folder / "part-0.parquet", compression="zstd")
    Labels(groups=chosen).dump(dest / "labels.yaml")
    kept = [p for p in pages if p["group"] in names]
    (dest / "recording" / "prometheus-alerts.json").write_text(json.dumps(kept, indent=1))


def publish(out: Path, scored: dict[str, Any]) -> None:
    """The README's section, the plot and the kept sample, from a run's folder."""
    import statistics

    from monitor.pipeline.labels import load_labels
    from monitor.pipeline.scorecard import plot

    labels = load_labels(out / "labels.yaml")
    events = json.loads((out / "events.json").read_text())
    pages = json.loads((out / "recording" / "prometheus-alerts.json").read_text())
    PLOT.parent.mkdir(exist_ok=True)
    plot(scored["results"], PLOT, scored["order"])
    windows = [w for g in labels.groups for w in g.windows]
    fault_at = min(w.start for w in windows) - events["t0"]
    minutes = statistics.median((w.end or events["ended"]) - w.start for w in windows) / 60
    cadences = list(dict.fromkeys(g.variant.removeprefix("commits ") for g in labels.groups))
    scenario = {g.group: g.scenario for g in labels.groups}
    storm = {p["group"] for p in pages if p["alertname"] == "KafkaConsumerGroupRebalanceStorm"}
    stormy = {name for name, s in scenario.items() if s == "rebalance storm"}
    others = sorted({scenario.get(name, "unlabelled") for name in storm - stormy})
    text = README.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END_MARK)
    section = (
        f"{BEGIN}\n_Generated by `make bench-alerts` on "
        f"{time.strftime('%Y-%m-%d', time.gmtime(events['t0']))}: {len(labels.groups)} groups, "
        f"commits {', '.join(cadences)}; faults injected at t+{fault_at:.0f}s for "
        f"{minutes:.0f} min. A cell is faults detected/faults · median time to detect · false "
        "alarms._\n\n"
        f"{scored['table']}\nThe rebalance-storm alert (about membership, so not scored "
        f"against lag) fired for {len(storm & stormy)} of the {len(stormy)} groups in a storm"
        + (f", and for {len(storm - stormy)} groups of: {'; '.join(others)}" if others else "")
        + ".\n\n![Time to detect and false alarms per rule set](docs/alert-quality.png)\n"
        f"{END_MARK}"
    )
    README.write_text(head + section + tail)
    keep_sample(out, labels, pages)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run: 1 s and 5 s "
                        "commits, faults of 5 minutes (nothing published)")
    parser.add_argument("--publish", action="store_true", help="write the README's table, "
                        "the plot and the kept sample recording")
    parser.add_argument("--out", type=Path, help="run folder (default .cache/alert-quality/<t>)")
    parser.add_argument("--score-only", type=Path, metavar="RUN",
                        help="score an earlier run's folder again (with --publish: and "
                        "publish it, e.g. after a rule change)")
    args = parser.parse_args()
    if args.score_only:
        scored = score_run(args.score_only)
        print(scored["table"])
        if args.publish:
            publish(args.score_only, scored)
        return 0
    out = args.out or ROOT / ".cache" / "alert-quality" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    # The clients' complaints (brokers restarting, groups rebalancing) go to a file.
    logging.basicConfig(filename=out / "bench.log", level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run = Run(out, QUICK if args.quick else Timeline())
    with running(run):
        run.play()
        pages = run.prometheus_alerts()
    (out / "recording" / "prometheus-alerts.json").write_text(json.dumps(pages, indent=1))
    run.labels().dump(out / "labels.yaml")
    (out / "events.json").write_text(json.dumps(
        {"t0": run.t0, "ended": run.ended, **run.events, "errors": run.errors}, indent=1))
    scored = score_run(out)
    (out / "scores.json").write_text(json.dumps(scored["rows"], indent=1))
    print(scored["table"])
    print(json.dumps({"out": str(out), "errors": run.errors}))
    if args.publish and not args.quick:
        publish(out, scored)
    return 1 if run.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())

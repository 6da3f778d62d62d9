"""The Prometheus exporter: a real store and evaluator fed on a simulated timeline (no Kafka),
scraped as ``/metrics`` serves it (the registry's ``generate_latest``, then the exporter's
rendered text) and read back whole with prometheus_client's own text parser; the service's
real handler over HTTP too. Against the real broker: tests/integration/serve/test_metrics.py."""

from __future__ import annotations

import asyncio
import gzip
import math
import threading
from collections.abc import Iterator

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from confluent_kafka import Message
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector as RegistryCollector

from monitor.config import ClusterConfig, ConfigError, EvaluatorConfig, ExporterConfig, parse_config
from monitor.evaluate.job import Evaluator, PartitionStatus
from monitor.ingest.base import Collector
from monitor.ingest.offsets_topic import OffsetsTopicCollector
from monitor.model import metric_catalogue as catalogue
from monitor.model.observations import BrokerOffsets, CommitBatch, GroupMember, GroupMembership
from monitor.serve.http.app import build_app
from monitor.serve.metrics import lag as exporter_module
from monitor.serve.metrics.lag import (
    STATUS_WORDS,
    LagExporter,
    render_cluster,
    rendered_family_names,
)
from monitor.service import Service
from monitor.store.store import Store
from tests.harness.offsets_records import commit_key, offset_value
from tests.harness.scrape import Series, scrape_text, value

C = "c1"
T0 = 1_800_000_000.0
TOPICS = {"orders": 2, "payments": 1}
RATE = 10  # records per second per partition
LOG_START = 5
ODD = 'we"ird\\name\nx'  # a legal group name that needs escaping in the text format

class World:
    """Groups on a simulated clock: ``ok`` commits its position every second, ``warn`` falls
    further behind at every commit, ``stop`` commits with some lag until ``stop_at`` and then
    never again (no members); ``members-only`` has members and never committed."""

    def __init__(self, stop_at: float = T0 + 5, log_start_rate: float = 0.0,
                 **config: object) -> None:
        self.store = Store(EvaluatorConfig(window=5, min_distance=0.5, **config))  # type: ignore[arg-type]
        self.fresh: float | None = None  # the offsets-topic reader's freshness
        self.evaluator = Evaluator(
            self.store, self.store.evaluator_config, lambda _c: self.fresh, stale_after=5
        )
        self.stop_at = stop_at
        self.log_start_rate = log_start_rate  # retention deleting records at this rate
        self.order = 0
        self.committed: dict[tuple[str, str, int], int] = {}

    @staticmethod
    def leo(t: float) -> int:
        return LOG_START + int((t - T0) * RATE)

    def commit(self, t: float, group: str, offset: int, topics: dict[str, int] = TOPICS) -> None:
        rows = [(tp, p) for tp, n in topics.items() for p in range(n)]
        self.order += 1
        self.store.put_commits(CommitBatch(
            cluster=C, source="offsets_topic", observed_at=t, groups=[group] * len(rows),
            topics=[tp for tp, _ in rows], partitions=[p for _, p in rows],
            offsets=[offset] * len(rows), commit_times=[int(t * 1000)] * len(rows),
            orders=list(range(self.order * 100, self.order * 100 + len(rows))),
        ))
        for tp, p in rows:
            self.committed[(group, tp, p)] = offset

    def members(self, t: float, group: str, n: int, state: str | None = None,
                generation: int = 1) -> None:
        """``n`` members sharing TOPICS' partitions round-robin (member ``i`` owns every
        ``n``-th); the ODD group's members have ids and client ids that need escaping."""
        tps = [(tp, p) for tp, k in TOPICS.items() for p in range(k)]
        self.store.put_group(GroupMembership(
            cluster=C, group=group, source="offsets_topic", observed_at=t,
            state=state or ("Stable" if n else "Empty"), protocol_type="consumer",
            protocol="range", generation=generation,
            members=tuple(GroupMember(
                f"m{i}" + (ODD if group == ODD else ""),
                f"client-{i}" + (ODD if group == ODD else ""),
                f"/10.0.0.{i + 1}", assignment=tuple(tps[i::n]))
                for i in range(n)),
        ))

    def run(self, start: float, until: float, reader_up: bool = True) -> None:
        """One observation round per second in [start, until]; with the offsets-topic reader
        down, log ends still arrive (another path) but no commits or membership."""
        for step in range(int(until - start) + 1):
            t = start + step
            leo = self.leo(t)
            rows = [(tp, p) for tp, n in TOPICS.items() for p in range(n)]
            self.store.put_broker_offsets(BrokerOffsets(
                C, t, [tp for tp, _ in rows], [p for _, p in rows],
                [LOG_START + int((t - T0) * self.log_start_rate)] * len(rows),
                [leo] * len(rows)))
            if not reader_up:
                continue
            self.commit(t, "ok", leo)
            self.commit(t, ODD, leo, {"orders": 1})
            self.commit(t, "warn", leo - 5 * int(t - T0))
            if t <= self.stop_at:
                self.commit(t, "stop", leo - 3)
            for g in ("ok", "warn", ODD):
                self.members(t, g, 1)
            self.members(t, "members-only", 2)
            self.fresh = t


class Exposition:
    """A registry holding a :class:`LagExporter`, scraped as the ``/metrics`` handler does."""

    def __init__(self, world: World, partition_series: bool = True,
                 collectors: list[Collector] | None = None) -> None:
        self.exporter = LagExporter(world.evaluator, world.store, collectors or [],
                                    ExporterConfig(partition_series=partition_series))
        self.registry = CollectorRegistry()
        self.registry.register(self.exporter)

    def text(self) -> str:
        return (generate_latest(self.registry) + self.exporter.text()).decode()


def scrape(exposition: Exposition) -> dict[str, Series]:
    return scrape_text(exposition.text())


def groups_in(samples: dict[str, Series], name: str) -> set[str]:
    return {dict(k)["group"] for k in samples.get(name, {})}


@pytest.fixture
def world() -> World:
    w = World()
    w.run(T0 + 1, T0 + 10)
    w.evaluator.run_once(T0 + 10.5)
    return w


def test_statuses_lags_and_offsets_per_partition(world: World) -> None:
    m = scrape(Exposition(world))
    result = world.evaluator.result(C)
    assert result is not None
    assert {g: result.group(g).status for g in ("ok", "warn", "stop")} == {  # type: ignore[union-attr]
        "ok": "OK", "warn": "WARN", "stop": "STOP"}
    for group, code in (("ok", 1), ("warn", 2), ("stop", 5), ("members-only", 1)):
        assert value(m, "kafka_monitor_group_status", cluster=C, group=group) == code
    leo = World.leo(T0 + 10)
    for (group, topic, p), committed in world.committed.items():
        labels = dict(cluster=C, group=group, topic=topic, partition=p)
        assert value(m, "kafka_consumergroup_group_offset", **labels) == committed
        assert value(m, "kafka_consumergroup_group_lag", **labels) == leo - committed
        want = {"ok": 1, "warn": 2, "stop": 5, ODD: 1}[group]
        assert value(m, "kafka_monitor_partition_status", **labels) == want
    # Group aggregates agree with the partitions, and with the API's view of the group.
    stop = result.group("stop")
    assert stop is not None
    assert value(m, "kafka_consumergroup_group_sum_lag", cluster=C, group="stop") == stop.totallag
    assert stop.totallag == 3 * (leo - world.committed[("stop", "orders", 0)])
    assert value(m, "kafka_consumergroup_group_max_lag_seconds", cluster=C, group="stop") == \
        pytest.approx(stop.lag_seconds, abs=1e-3)
    assert value(m, "kafka_consumergroup_group_topic_sum_lag", cluster=C, group="warn",
                 topic="orders") == 2 * (leo - world.committed[("warn", "orders", 0)])
    assert value(m, "kafka_monitor_group_topic_status", cluster=C, group="stop",
                 topic="payments") == 5
    # Members and Kafka's group state.
    assert value(m, "kafka_consumergroup_members", cluster=C, group="ok") == 1
    assert value(m, "kafka_consumergroup_members", cluster=C, group="stop") == 0
    assert value(m, "kafka_consumergroup_members", cluster=C, group="members-only") == 2
    assert value(m, "kafka_monitor_group_info", cluster=C, group="ok", state="Stable") == 1
    assert value(m, "kafka_monitor_group_info", cluster=C, group="stop", state="Unknown") == 1
    # Log offsets per topic partition, from the store.
    for topic, n in TOPICS.items():
        for p in range(n):
            labels = dict(cluster=C, topic=topic, partition=p)
            assert value(m, "kafka_topic_partition_current_offset", **labels) == leo
            assert value(m, "kafka_topic_partition_oldest_offset", **labels) == LOG_START
    assert value(m, "kafka_monitor_evaluation_timestamp_seconds", cluster=C) == T0 + 10.5


def test_status_codes_stay_monitor_codes_under_burrow_status() -> None:
    """With ``evaluator.burrow_status`` the API says ERR; the gauge keeps the precise code."""
    w = World(burrow_status=True)
    w.run(T0 + 1, T0 + 10)
    w.evaluator.run_once(T0 + 10.5)
    stop = w.evaluator.result(C).group("stop")  # type: ignore[union-attr]
    assert stop is not None and stop.status == "ERR"
    m = scrape(Exposition(w))
    assert value(m, "kafka_monitor_group_status", cluster=C, group="stop") == 5
    assert value(m, "kafka_monitor_group_status_state", cluster=C, group="stop",
                 status="STOP") == 1


def test_state_set_has_exactly_one_one_per_group(world: World) -> None:
    m = scrape(Exposition(world))
    state = m["kafka_monitor_group_status_state"]
    groups = groups_in(m, "kafka_monitor_group_status")
    assert groups == {"ok", "warn", "stop", "members-only", ODD}
    for group in groups:
        rows = {dict(k)["status"]: v for k, v in state.items() if dict(k)["group"] == group}
        assert set(rows) == set(STATUS_WORDS)
        assert sorted(rows.values()) == [0, 0, 0, 0, 0, 1]
        code = value(m, "kafka_monitor_group_status", cluster=C, group=group)
        assert rows[STATUS_WORDS[int(code)]] == 1


def test_label_values_are_escaped(world: World) -> None:
    m = scrape(Exposition(world))
    assert ODD in groups_in(m, "kafka_consumergroup_group_lag")
    assert value(m, "kafka_monitor_group_status", cluster=C, group=ODD) == 1


def test_lag_seconds_finite_and_true_for_the_stopped_group(world: World) -> None:
    # A group on a topic whose log end was never observed: no history, lag seconds unknown.
    world.commit(T0 + 10, "blind", 7, {"quiet": 1})
    world.evaluator.run_once(T0 + 10.5)
    m = scrape(Exposition(world))
    for name in ("kafka_consumergroup_group_lag_seconds",
                 "kafka_consumergroup_group_max_lag_seconds",
                 "kafka_consumergroup_group_topic_max_lag_seconds"):
        values = list(m[name].values())
        assert values and all(math.isfinite(v) and v >= 0 for v in values), name
    assert value(m, "kafka_consumergroup_group_lag_seconds", cluster=C, group="blind",
                 topic="quiet", partition=0) == 0
    # The stop group sits at leo(T0+5) - 3: the log end passed that offset between T0+4
    # and T0+5, so about 6 s before the evaluation at T0+10.5.
    secs = value(m, "kafka_consumergroup_group_lag_seconds", cluster=C, group="stop",
                 topic="orders", partition=0)
    assert 5.5 <= secs <= 6.5
    assert value(m, "kafka_consumergroup_group_lag_seconds", cluster=C, group="ok",
                 topic="orders", partition=0) == 0


def test_per_topic_aggregation_replaces_partition_series(world: World) -> None:
    full = scrape(Exposition(world))
    topic = scrape(Exposition(world, partition_series=False))
    for name in ("kafka_consumergroup_group_offset", "kafka_consumergroup_group_lag",
                 "kafka_consumergroup_group_lag_seconds", "kafka_monitor_partition_status",
                 "kafka_topic_partition_current_offset", "kafka_topic_partition_oldest_offset"):
        assert name in full and name not in topic, name
    assert all("partition" not in dict(k) for series in topic.values() for k in series)
    # The per-topic figures are the partitions' sum / max / worst.
    for key, total in topic["kafka_consumergroup_group_topic_sum_lag"].items():
        lab = dict(key)
        parts = [v for k, v in full["kafka_consumergroup_group_lag"].items()
                 if {x: y for x, y in k if x != "partition"} == lab]
        assert parts and total == sum(parts)
        secs = [v for k, v in full["kafka_consumergroup_group_lag_seconds"].items()
                if {x: y for x, y in k if x != "partition"} == lab]
        assert topic["kafka_consumergroup_group_topic_max_lag_seconds"][key] == max(secs)
    leo = World.leo(T0 + 10)
    assert value(topic, "kafka_topic_current_offset_sum", cluster=C, topic="orders") == 2 * leo
    assert value(topic, "kafka_topic_oldest_offset_sum", cluster=C, topic="orders") == 2 * LOG_START
    assert value(topic, "kafka_topic_partitions", cluster=C, topic="payments") == 1
    # Group-level series are the same in both forms.
    assert topic["kafka_monitor_group_status"] == full["kafka_monitor_group_status"]


OWNER = "kafka_monitor_partition_owner_info"


def owners_in(samples: dict[str, Series], group: str) -> dict[tuple[str, int], dict[str, str]]:
    """The group's owner info series: (topic, partition) -> the owner's labels."""
    out: dict[tuple[str, int], dict[str, str]] = {}
    for key, v in samples.get(OWNER, {}).items():
        lab = dict(key)
        if lab["group"] == group:
            assert v == 1 and lab["cluster"] == C
            assert (lab["topic"], int(lab["partition"])) not in out, "two owners"
            out[(lab["topic"], int(lab["partition"]))] = {
                k: lab[k] for k in ("member_host", "consumer_id", "client_id")}
            assert set(lab) == {"cluster", "group", "topic", "partition", "member_host",
                                "consumer_id", "client_id"}
    return out


def test_partition_owners_of_groups_with_members(world: World) -> None:
    m = scrape(Exposition(world))
    assert owners_in(m, "ok") == {
        (t, p): {"member_host": "/10.0.0.1", "consumer_id": "m0", "client_id": "client-0"}
        for t, p in (("orders", 0), ("orders", 1), ("payments", 0))}
    # Two members share the partitions; a group with members and no commits has owners too.
    m1 = {"member_host": "/10.0.0.1", "consumer_id": "m0", "client_id": "client-0"}
    m2 = {"member_host": "/10.0.0.2", "consumer_id": "m1", "client_id": "client-1"}
    assert owners_in(m, "members-only") == {
        ("orders", 0): m1, ("orders", 1): m2, ("payments", 0): m1}
    # Escaping: group, member id and client id with a quote, a backslash and a newline.
    assert owners_in(m, ODD)[("orders", 0)] == {
        "member_host": "/10.0.0.1", "consumer_id": "m0" + ODD, "client_id": "client-0" + ODD}
    # The API names the same owners.
    ok = world.evaluator.result(C).group("ok")  # type: ignore[union-attr]
    assert ok is not None
    assert {(p.topic, p.partition): (p.owner, p.client_id) for p in ok.partitions} == {
        tp: (o["member_host"], o["client_id"]) for tp, o in owners_in(m, "ok").items()}


def test_partition_owners_absent_without_live_members(world: World) -> None:
    # "stop" never had members; "emptied" lists a member but Kafka says Empty.
    world.commit(T0 + 10, "emptied", 7)
    world.members(T0 + 10, "emptied", 1, state="Empty")
    world.evaluator.run_once(T0 + 10.6)
    m = scrape(Exposition(world))
    assert groups_in(m, OWNER) == {"ok", "warn", "members-only", ODD}
    assert value(m, "kafka_consumergroup_members", cluster=C, group="emptied") == 1
    assert owners_in(m, "stop") == {} and owners_in(m, "emptied") == {}
    # Members leave: the group's owner series go with the next round.
    world.members(T0 + 11, "ok", 0)
    world.evaluator.run_once(T0 + 11.5)
    assert "ok" not in groups_in(scrape(Exposition(world)), OWNER)


def test_partition_owners_only_with_partition_series(world: World) -> None:
    assert OWNER in scrape(Exposition(world))
    assert OWNER not in scrape(Exposition(world, partition_series=False))
    assert OWNER not in {n for n, _ in rendered_family_names(False)}
    assert OWNER not in render_cluster(world.evaluator.result(C), {},  # type: ignore[arg-type]
                                       partition_series=False)


def test_stopped_group_keeps_reporting_until_it_expires() -> None:
    w = World(expire_group=40)
    w.run(T0 + 1, T0 + 10)
    exposition = Exposition(w)
    per_group = ("kafka_monitor_group_status", "kafka_consumergroup_group_lag",
                 "kafka_consumergroup_group_lag_seconds", "kafka_consumergroup_members",
                 "kafka_monitor_group_status_state", "kafka_consumergroup_group_topic_sum_lag")
    for until in (T0 + 20, T0 + 30, T0 + 44):  # silent since T0+5: expires after T0+45
        w.run(until - 9, until)
        w.evaluator.run_once(until + 0.5)
        m = scrape(exposition)
        assert value(m, "kafka_monitor_group_status", cluster=C, group="stop") == 5, until
        for name in per_group:
            assert "stop" in groups_in(m, name), (name, until)
    w.run(T0 + 45, T0 + 47)
    w.evaluator.run_once(T0 + 47.5)
    m = scrape(exposition)
    for name in per_group:
        assert "stop" not in groups_in(m, name), name
        assert "ok" in groups_in(m, name), name
    assert value(m, "kafka_monitor_groups_expired_total") == 1


def test_stale_group_still_reports_and_says_so() -> None:
    w = World(stop_at=T0 + 30)
    w.run(T0 + 1, T0 + 10)
    w.run(T0 + 11, T0 + 30, reader_up=False)  # the reader is blind from T0+10 on
    w.evaluator.run_once(T0 + 30.5)
    m = scrape(Exposition(w))
    for group in ("ok", "warn", "stop"):
        assert value(m, "kafka_monitor_group_stale", cluster=C, group=group) == 1
        assert value(m, "kafka_monitor_group_status", cluster=C, group=group) >= 1
        assert value(m, "kafka_consumergroup_group_lag", cluster=C, group=group, topic="orders",
                     partition=0) >= 0
    w.run(T0 + 31, T0 + 32)
    w.evaluator.run_once(T0 + 32.5)
    m = scrape(Exposition(w))
    assert value(m, "kafka_monitor_group_stale", cluster=C, group="ok") == 0


def test_render_is_cached_per_evaluation_round(world: World) -> None:
    exporter = LagExporter(world.evaluator, world.store, [])
    ev = world.evaluator.result(C)
    assert ev is not None
    chunks = exporter.chunks()  # no pre-render yet: the scrape renders
    first = exporter.rendered(ev)
    assert exporter.rendered(ev) is first
    assert exporter.chunks() is chunks  # later scrapes of the round reuse the bytes
    world.run(T0 + 11, T0 + 11)
    world.evaluator.run_once(T0 + 11.5)
    exporter.prerender()  # what the service does after the round
    ev2 = world.evaluator.result(C)
    assert ev2 is not None and ev2 is not ev
    second = exporter.rendered(ev2)
    assert second is not first
    lag = "kafka_consumergroup_group_lag"
    assert second.families[lag] != first.families[lag]  # the stop group's lag grew
    assert exporter.chunks() != chunks and exporter.chunks() is exporter.chunks()


class Families(RegistryCollector):
    """A fixed list of families, for a registry to write the ordinary way."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def library_families(world: World, partition_series: bool) -> list[Metric]:
    """The rendered families built the ordinary way, one ``add_sample`` per series, from the
    per-group views (:meth:`ClusterEvaluation.group`, the API's path, not the arrays the
    renderer reads) and the store's log offsets."""
    ev = world.evaluator.result(C)
    assert ev is not None
    kinds = {name: catalogue.entry(name).kind
             for name, _ in rendered_family_names(partition_series)}
    families = {name: Metric(name, doc, kinds[name])
                for name, doc in rendered_family_names(partition_series)}

    def add(name: str, value: float, **labels: object) -> None:
        if name in families:  # the other form's families are not exported
            sample = f"{name}_total" if kinds[name] == "counter" else name
            families[name].add_sample(
                sample, {"cluster": C, **{k: str(v) for k, v in labels.items()}}, value)

    for group in ev.group_names():
        g = ev.group(group)
        assert g is not None
        code = STATUS_WORDS.index(g.status)
        add("kafka_monitor_group_status", code, group=group)
        for k, word in enumerate(STATUS_WORDS):
            add("kafka_monitor_group_status_state", int(k == code), group=group, status=word)
        add("kafka_consumergroup_group_sum_lag", g.totallag, group=group)
        add("kafka_consumergroup_group_max_lag", g.maxlag.current_lag if g.maxlag else 0,
            group=group)
        add("kafka_consumergroup_group_max_lag_seconds", g.lag_seconds, group=group)
        add("kafka_consumergroup_members", g.members, group=group)
        add("kafka_monitor_group_stale", int(g.stale), group=group)
        add("kafka_monitor_group_info", 1, group=group, state=g.state or "Unknown")
        lc = g.lifecycle
        add("kafka_consumergroup_rebalances", lc.rebalances if lc else 0, group=group)
        add("kafka_consumergroup_rebalancing_seconds", lc.rebalancing_seconds if lc else 0,
            group=group)
        add("kafka_consumergroup_member_changes", lc.members_joined if lc else 0, group=group,
            change="joined")
        add("kafka_consumergroup_member_changes", lc.members_left if lc else 0, group=group,
            change="left")
        for state in catalogue.GROUP_STATES:
            add("kafka_consumergroup_state", int(state == (g.state or "Unknown")), group=group,
                state=state)
        add("kafka_monitor_group_rebalance_storm", int(lc.storm) if lc else 0, group=group)
        r = g.retention
        add("kafka_monitor_group_retention_risk", ["OK", "WARN", "LOST"].index(r.risk) if r
            else 0, group=group)
        add("kafka_consumergroup_group_sum_lost_records", r.lost_records if r else 0,
            group=group)
        if r is not None and r.time_to_loss_seconds is not None:
            add("kafka_consumergroup_group_min_time_to_loss_seconds", r.time_to_loss_seconds,
                group=group)
        v = g.velocity
        if v is not None and v.lag_velocity is not None:
            add("kafka_consumergroup_group_lag_velocity", v.lag_velocity, group=group)
        if v is not None and v.consumption_rate is not None:
            add("kafka_consumergroup_group_consumption_rate", v.consumption_rate, group=group)
        if v is not None and v.time_to_catch_up_seconds is not None:
            add("kafka_consumergroup_group_time_to_catch_up_seconds",
                v.time_to_catch_up_seconds, group=group)
        add("kafka_consumergroup_group_hot_partitions", g.hot_partitions, group=group)
        if g.lag_seconds_source is not None:
            add("kafka_monitor_group_lag_seconds_source", 1, group=group,
                source=g.lag_seconds_source)
        if g.state not in (None, "Empty", "Dead"):
            for member in g.member_list:
                for topic, partition in member.assignment:
                    add("kafka_monitor_partition_owner_info", 1, group=group, topic=topic,
                        partition=partition, member_host=member.host,
                        consumer_id=member.member_id, client_id=member.client_id)
        by_topic: dict[str, list[PartitionStatus]] = {}
        for part in g.partitions:
            by_topic.setdefault(part.topic, []).append(part)
            labels = dict(group=group, topic=part.topic, partition=part.partition)
            assert part.end is not None
            add("kafka_consumergroup_group_offset", part.end.offset, **labels)
            add("kafka_consumergroup_group_lag", part.current_lag, **labels)
            add("kafka_consumergroup_group_lag_seconds", part.lag_seconds, **labels)
            add("kafka_monitor_partition_status", STATUS_WORDS.index(part.status), **labels)
            pr = part.retention
            if pr is not None:
                add("kafka_consumergroup_group_lead", pr.lead, **labels)
                add("kafka_consumergroup_group_lost_records", pr.lost_records, **labels)
                if pr.time_to_loss_seconds is not None:
                    add("kafka_consumergroup_group_time_to_loss_seconds",
                        pr.time_to_loss_seconds, **labels)
        for topic, parts in by_topic.items():
            labels = dict(group=group, topic=topic)
            add("kafka_consumergroup_group_topic_sum_lag", sum(x.current_lag for x in parts),
                **labels)
            add("kafka_consumergroup_group_topic_max_lag_seconds",
                max(x.lag_seconds for x in parts), **labels)
            add("kafka_monitor_group_topic_status",
                max(STATUS_WORDS.index(x.status) for x in parts), **labels)
    offsets = world.store.broker_offsets(C)
    for (topic, partition), o in offsets.items():
        add("kafka_topic_partition_current_offset", o.log_end, topic=topic, partition=partition)
        add("kafka_topic_partition_oldest_offset", o.log_start, topic=topic, partition=partition)
    for topic in {t for t, _ in offsets}:
        ends = [o for (t, _), o in offsets.items() if t == topic]
        add("kafka_topic_current_offset_sum", sum(o.log_end for o in ends), topic=topic)
        add("kafka_topic_oldest_offset_sum", sum(o.log_start for o in ends), topic=topic)
        add("kafka_topic_partitions", len(ends), topic=topic)
    return [f for f in families.values() if f.samples]  # as ours: no empty family


def comment_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def sample_lines(text: str) -> dict[str, float]:
    """Series (name and label text, as written) -> value."""
    lines = [line.rpartition(" ") for line in text.splitlines() if not line.startswith("#")]
    series = {name: float(v) for name, _, v in lines}
    assert len(series) == len(lines), "a series written twice"
    return series


@pytest.mark.parametrize("retention", ["kept", "deleting"])
@pytest.mark.parametrize("partition_series", [True, False])
def test_rendered_text_is_what_prometheus_client_writes(world: World, partition_series: bool,
                                                        retention: str) -> None:
    """The hand-written text against prometheus_client's own writer for the same values: the
    same HELP and TYPE lines in the same order, every series written byte for byte the same
    (names, label order, label escaping: the ODD group), the same values (the library writes
    ``42.0`` and ``1.2e+07`` where we write integers; seconds are rounded to 1 ms).
    ``deleting``: retention deletes faster than ``stop`` and ``warn`` read, so they have lost
    records, and a group rebalanced: the retention and lifecycle families have values."""
    if retention == "deleting":
        world = World(log_start_rate=5.5)
        world.run(T0 + 1, T0 + 10)
        world.members(T0 + 10, "ok", 2, generation=2)  # a member joined: a rebalance
        world.evaluator.run_once(T0 + 10.5)
    ours = Exposition(world, partition_series).exporter.text().decode()
    registry = CollectorRegistry()
    registry.register(Families(library_families(world, partition_series)))
    theirs = generate_latest(registry).decode()
    assert comment_lines(ours) == comment_lines(theirs)
    assert any('group="we\\"ird\\\\name\\nx"' in line for line in sample_lines(ours))
    owner_lines = [line for line in sample_lines(ours) if line.startswith(f"{OWNER}{{")]
    assert len(owner_lines) == (12 if partition_series else 0)  # 3 each: ok, warn, ODD, m-only
    assert sample_lines(ours) == pytest.approx(sample_lines(theirs), abs=1e-3)
    if retention == "deleting":
        series = sample_lines(ours)
        assert series[f'kafka_consumergroup_rebalances_total{{cluster="{C}",group="ok"}}'] == 1
        assert series[f'kafka_monitor_group_retention_risk{{cluster="{C}",group="stop"}}'] == 2
        # stop committed leo - 3 = 52 at T0 + 5; the log start is 5 + 10 * 5.5 = 60 at T0 + 10:
        # 8 records lost on each of its 3 partitions
        assert series[
            f'kafka_consumergroup_group_sum_lost_records{{cluster="{C}",group="stop"}}'
        ] == 3 * 8
    # And the whole /metrics text: one HELP and one TYPE per family, each family contiguous.
    types = [line.split()[2] for line in comment_lines(Exposition(world).text())
             if line.startswith("# TYPE")]
    assert len(types) == len(set(types))


def test_metrics_handler_serves_registry_then_rendered_text(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's real ``/metrics`` over HTTP: the registry's families, then the rendered
    ones, no family in both; the text is rendered in the evaluator's thread right after the
    round, so the scrape renders nothing (``render_cluster`` wrapped to record its thread)."""
    config = parse_config({"clusters": [{"name": C, "bootstrap_servers": "127.0.0.1:9"}]})
    service = Service(config, store=world.store, collectors=[])
    render_threads: list[str] = []
    render = exporter_module.render_cluster

    def recorded(*args: object, **kwargs: object) -> dict[str, str]:
        render_threads.append(threading.current_thread().name)
        return render(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(exporter_module, "render_cluster", recorded)

    async def main() -> tuple[str, str, bytes]:
        await service._run_evaluation()
        server = TestServer(build_app(service), host="127.0.0.1")
        await server.start_server()
        try:
            async with aiohttp.ClientSession(auto_decompress=False) as session:
                async with session.get(server.make_url("/metrics"),
                                       headers={"Accept-Encoding": "gzip"}) as response:
                    assert response.status == 200
                    assert response.headers["Content-Encoding"] == "gzip"
                    gz = await response.read()
                    assert response.content_length == len(gz)
                async with session.get(server.make_url("/metrics"), skip_auto_headers=[
                        "Accept-Encoding"]) as response:  # a client without gzip
                    assert "Content-Encoding" not in response.headers
                    plain = await response.read()
                    assert response.content_length == len(plain)
                    return response.headers["Content-Type"], plain.decode(), gz
        finally:
            await server.close()

    content_type, text, gz = asyncio.run(main())
    assert gzip.decompress(gz).decode() == text  # one member, CRC and length checked
    assert len(gz) < len(text) / 2
    assert render_threads == ["evaluator"]
    assert content_type == CONTENT_TYPE_LATEST
    registry_part = [f.name for f in text_string_to_metric_families(
        generate_latest(service.registry).decode())]
    rendered_part = [f.name for f in text_string_to_metric_families(
        service.exporter.text().decode())]
    assert "kafka_monitor_cluster_status" in registry_part  # broker health
    assert "kafka_monitor_evaluation_timestamp_seconds" in registry_part
    assert "kafka_consumergroup_group_lag" in rendered_part
    assert not set(registry_part) & set(rendered_part)
    assert [f.name for f in text_string_to_metric_families(text)] == \
        registry_part + rendered_part
    m = scrape_text(text)
    assert value(m, "kafka_consumergroup_group_offset", cluster=C, group="ok", topic="orders",
                 partition=1) == world.committed[("ok", "orders", 1)]
    assert render_threads == ["evaluator"]


def test_render_cluster_without_windows_reports_membership_only() -> None:
    w = World()
    w.members(T0, "fresh-group", 3)  # members, never a commit: no windows at all
    ev = w.evaluator.evaluate_cluster(C, T0 + 1)
    text = "".join(f"# TYPE {n} gauge\n{b}" for n, b in render_cluster(ev, {}).items())
    m = scrape_text(text)
    assert value(m, "kafka_monitor_group_status", cluster=C, group="fresh-group") == 1
    assert value(m, "kafka_consumergroup_members", cluster=C, group="fresh-group") == 3
    assert "kafka_consumergroup_group_lag" not in m


class ScriptedCollector(Collector):
    """Test double for a collector's Kafka work (``collect``): fails on the rounds listed,
    succeeds otherwise. The health bookkeeping under test is the real base class's."""

    kind = "group_offsets"

    def __init__(self, fail_rounds: set[int]) -> None:
        super().__init__(C, 1.0)
        self.fail_rounds = fail_rounds
        self.round = 0

    def collect(self) -> None:
        self.round += 1
        if self.round in self.fail_rounds:
            raise TimeoutError("broker did not answer")


def offsets_topic_message(offset: int, key: bytes | None, value: bytes | None) -> Message:
    return Message(topic="__consumer_offsets", partition=0, offset=offset, key=key, value=value)


def test_collector_health_and_decoder_counters(world: World) -> None:
    flaky = ScriptedCollector({2, 3})
    for _ in range(3):
        flaky.run_once()
    reader = OffsetsTopicCollector(ClusterConfig(name=C, bootstrap_servers=["127.0.0.1:9"]),
                                   Store())  # never started: fed real records directly
    records = [
        offsets_topic_message(0, commit_key("g1", "orders", 0), offset_value(1, 42, commit_ts=1)),
        offsets_topic_message(1, commit_key("g1", "orders", 1), offset_value(1, 43, commit_ts=1)),
        offsets_topic_message(2, None, b"\x00\x01"),  # no key
        offsets_topic_message(3, commit_key("g1", "orders", 0), b"\x00\x09" + b"\x00" * 26),
    ]
    assert reader.handle_messages(records) == 4
    m = scrape(Exposition(world, collectors=[flaky, reader]))
    fl = dict(cluster=C, collector="group_offsets")
    assert value(m, "kafka_monitor_collector_runs_total", **fl) == 3
    assert value(m, "kafka_monitor_collector_errors_total", **fl) == 2
    assert value(m, "kafka_monitor_collector_consecutive_errors", **fl) == 2
    assert flaky.health.last_success is not None
    assert value(m, "kafka_monitor_collector_last_success_timestamp_seconds", **fl) == \
        pytest.approx(flaky.health.last_success)
    assert value(m, "kafka_monitor_collector_last_duration_seconds", **fl) >= 0
    assert value(m, "kafka_monitor_collector_ready", **fl) == 1
    rd = dict(cluster=C, collector="offsets_topic")
    assert value(m, "kafka_monitor_collector_runs_total", **rd) == 0
    assert value(m, "kafka_monitor_collector_ready", **rd) == 0
    assert frozenset(rd.items()) not in m.get(
        "kafka_monitor_collector_last_success_timestamp_seconds", {})
    assert value(m, "kafka_monitor_offsets_topic_records_total", cluster=C) == 4
    assert value(m, "kafka_monitor_offsets_topic_commits_stored_total", cluster=C) == 2
    assert value(m, "kafka_monitor_offsets_topic_records_skipped_total", cluster=C,
                 reason="missing_key") == 1
    assert value(m, "kafka_monitor_offsets_topic_records_skipped_total", cluster=C,
                 reason="unknown_value_version") == 1
    assert value(m, "kafka_monitor_evaluation_rounds_total") == 1


def test_exporter_names_do_not_clash_with_broker_health() -> None:
    """The service's registry holds both collectors; registering refuses duplicate names, and
    the rendered families appear in neither."""
    from monitor.serve.metrics.health import HealthMetrics

    config = parse_config({"clusters": [{"name": C, "bootstrap_servers": "127.0.0.1:9"}]})
    store = Store()
    registry = CollectorRegistry()
    registry.register(HealthMetrics(store, config))
    registry.register(LagExporter(Evaluator(store, config.evaluator), store, []))
    # The rendered families are outside the registry: none of its names either.
    registered = {f.name for f in text_string_to_metric_families(
        generate_latest(registry).decode())}
    assert "kafka_monitor_evaluation_rounds" in registered
    for partition_series in (True, False):
        assert not registered & {n for n, _ in rendered_family_names(partition_series)}


# --------------------------------------------------------------------------- configuration


def test_config_exporter_section() -> None:
    base = {"clusters": [{"name": C, "bootstrap_servers": "127.0.0.1:9092"}]}
    assert parse_config(base).exporter.partition_series is True
    cfg = parse_config({**base, "exporter": {"partition_series": False}})
    assert cfg.exporter.partition_series is False
    with pytest.raises(ConfigError) as err:
        parse_config({**base, "exporter": {"partition_serie": False}})
    assert "exporter.partition_serie: unknown key (did you mean 'partition_series'?)" in str(
        err.value)
    with pytest.raises(ConfigError) as err:
        parse_config({**base, "exporter": {"partition_series": "sometimes"}})
    assert "exporter.partition_series" in str(err.value)

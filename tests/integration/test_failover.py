"""Failover between two mirrored clusters, exercised as an operator would, on two noida-db
brokers (record timestamps and lookups by time: ``tests/harness/noida.py``) with a mirror that
copies keys, values and timestamps as MirrorMaker 2 does (``monitor/dev/record_mirror.py``).

The exercise: a group consumes part of a topic on the source; the service keeps its plan
current and verified (API, metrics); the source dies; ``kafka-monitor failover apply`` sets
the group on the destination from the service's plan; a consumer there resumes. Every record
after the group's source position is read there, and what is read twice is within the plan's
figure (exactly it with equal partition counts).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from monitor.config import parse_config
from monitor.ingest.failover.collector import FailoverCollector
from tests.harness import processes
from tests.harness.html import parse
from tests.harness.net import free_port, http
from tests.harness.noida import Noida
from tests.harness.polling import wait_for, wait_for_kafka
from tests.harness.scrape import scrape_text, value
from tests.harness.service_thread import ServiceThread
from tests.harness.tools import ROOT

pytestmark = pytest.mark.noida

TOPIC, GROUP, MIRROR_GROUP = "orders", "billing", "mirror-dr"
RECORDS = 600
CONSUMED = 250
KAFKA_MONITOR = str(Path(sys.executable).parent / "kafka-monitor")


@dataclass
class Rig:
    source: Noida
    destination: Noida
    config: Path
    keys: list[str] = field(default_factory=list)
    consumed: set[str] = field(default_factory=set)
    mirror: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KAFKA_MONITOR, "failover", *args, "--config", str(self.config),
                               "--mirror", "dr"], capture_output=True, text=True, timeout=120)


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce(bootstrap: str, keys: list[str]) -> None:
    """Records in small batches a few milliseconds apart (distinct timestamps, as traffic)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, key in enumerate(keys):
        producer.produce(TOPIC, key=key.encode(), value=f"value of {key}".encode())
        if i % 20 == 19:
            producer.flush(10)
            time.sleep(0.005)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, group: str, count: int | None) -> list[str]:
    """Keys read by ``group`` (``count`` of them and committed, or all there are, not
    committed); the consumer leaves the group after."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.subscribe([TOPIC])
    keys: list[str] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition() or 0)
                    assigned = {tp.partition for tp in consumer.assignment()}
                    if count is None and assigned and eof >= assigned:
                        return keys
                continue
            eof.discard(m.partition() or 0)
            keys.append((m.key() or b"").decode())
            if count is not None and len(keys) == count:
                consumer.commit(asynchronous=False)
                return keys
        raise AssertionError(f"{group}: read {len(keys)} records in 60 s")
    finally:
        consumer.close()


def _mirrored(rig: Rig, at_least: int) -> None:
    consumer = Consumer({"bootstrap.servers": rig.destination.bootstrap_servers,
                         "group.id": "test-watermarks"})
    try:
        def total() -> int:
            meta = consumer.list_topics(TOPIC, timeout=5).topics[TOPIC]
            return sum(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 5)[1]
                       for p in meta.partitions)

        wait_for_kafka(total, 60, f"{at_least} records mirrored", ok=lambda n: n >= at_least)
    finally:
        consumer.close()


def _start_mirror(rig: Rig) -> None:
    rig.mirror = processes.start(
        [sys.executable, "-m", "monitor.dev.record_mirror",
         "--source", rig.source.bootstrap_servers,
         "--destination", rig.destination.bootstrap_servers,
         "--topics", TOPIC, "--group", MIRROR_GROUP], cwd=ROOT)


@pytest.fixture
def rig(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """Source and destination clusters, the topic on both (3 partitions at the source; the
    destination's count from the test's ``destination_partitions`` parameter, default 3), the
    mirror running, a configuration for the service (the defaults, the mirror ``dr``)."""
    partitions = getattr(request, "param", 3)
    config = tmp_path / "config.yaml"
    with Noida(tmp_path / "source") as source, Noida(tmp_path / "destination") as destination:
        config.write_text(yaml.safe_dump({
            "clusters": [{"name": "primary", "bootstrap_servers": [source.bootstrap_servers]},
                         {"name": "dr", "bootstrap_servers": [destination.bootstrap_servers]}],
            "mirrors": [{"name": "dr", "source": "primary", "destination": "dr",
                         "topics": [TOPIC], "group": MIRROR_GROUP, "canary": False}],
            "http": {"host": "127.0.0.1", "port": free_port()},
        }))
        _create(source.bootstrap_servers, TOPIC, 3)
        _create(destination.bootstrap_servers, TOPIC, partitions)
        rig = Rig(source, destination, config)
        try:
            yield rig
        finally:
            if rig.mirror is not None:
                if rig.mirror.poll() is None:
                    os.kill(rig.mirror.pid, signal.SIGCONT)
                processes.stop(rig.mirror)


def _plan(base: str, ok: Any) -> dict[str, Any]:
    """The service's plan for the group, once ``ok(plan)``."""
    def plan() -> dict[str, Any]:
        code, body = http("GET", f"{base}/v3/mirror/dr/failover/{GROUP}")
        return dict(body["plan"]) if code == 200 else {}

    return wait_for(plan, 90, "the group's failover plan", ok=lambda p: bool(p) and ok(p),
                    retry_on=(OSError,))


@pytest.mark.slow(45)
@pytest.mark.parametrize("rig", [3, 5], indirect=True, ids=["same-partitions", "3-to-5"])
def test_failover_exercise(rig: Rig) -> None:
    rig.keys = [f"record-{i}" for i in range(RECORDS)]
    _produce(rig.source.bootstrap_servers, rig.keys)
    _start_mirror(rig)
    _mirrored(rig, RECORDS)
    rig.consumed = set(_consume(rig.source.bootstrap_servers, GROUP, CONSUMED))
    unconsumed = set(rig.keys) - rig.consumed
    assert len(rig.consumed) == CONSUMED and len(unconsumed) == RECORDS - CONSUMED

    config = parse_config(yaml.safe_load(rig.config.read_text()))
    with ServiceThread(config) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"
        plan = _plan(base, lambda p: p["state"] == "verified")
        assert plan["ready"] and plan["reread_records"] is not None
        code, listing = http("GET", f"{base}/v3/mirror/dr/failover")
        assert code == 200 and [g["group"] for g in listing["failover"]["groups"]] == [GROUP]
        samples = scrape_text(http_text(f"{base}/metrics"))
        assert value(samples, "kafka_mirror_failover_ready", mirror="dr", group=GROUP) == 1
        assert value(samples, "kafka_mirror_failover_state", mirror="dr", group=GROUP,
                     state="verified") == 1
        assert value(samples, "kafka_mirror_failover_reread_records", mirror="dr",
                     group=GROUP) == plan["reread_records"]

        page = parse(http_text(f"{base}/ui/mirror/dr"), "failover")
        assert page.body == [[GROUP, "verified", f"{plan['reread_records']:,}",
                              page.body[0][3], page.body[0][4], ""]], page.body

        # The command line's own plan, made from the clusters, starts where the service's does.
        made = rig.cli("plan", "--group", GROUP, "--json")
        assert made.returncode == 0, made.stderr
        assert _starts(json.loads(made.stdout)) == _starts(plan)

        # Disaster: the source and its mirror are gone.
        assert rig.mirror is not None
        processes.stop(rig.mirror)
        rig.source.stop()
        dry = rig.cli("apply", "--group", GROUP)
        assert dry.returncode == 0, dry.stderr
        assert "dry run: nothing committed" in dry.stdout
        assert _committed(rig) == {}
        applied = rig.cli("apply", "--group", GROUP, "--yes")
        assert applied.returncode == 0, applied.stderr
        assert "failover commit" in applied.stderr  # each commit logged
    assert _committed(rig) == {(t, p): o for (t, p), o in _starts(plan).items()}

    resumed = _consume(rig.destination.bootstrap_servers, GROUP, None)
    missing = unconsumed - set(resumed)
    assert not missing, f"{len(missing)} records lost in the failover, e.g. {sorted(missing)[:5]}"
    again = [k for k in resumed if k in rig.consumed]
    if plan["topics"][0]["mapping"] == "same":
        assert plan["topics"][0]["reread_exact"]
        assert len(again) == plan["reread_records"]
    else:
        assert len(again) <= plan["reread_records"]
    assert len(resumed) == len(unconsumed) + len(again)  # no record twice on the destination


def _starts(plan: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(t["destination_topic"], d["partition"]): d["offset"]
            for t in plan["topics"] for d in t["destination"]}


def _committed(rig: Rig) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": rig.destination.bootstrap_servers})
    result = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []
            if tp.offset >= 0}


def http_text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_a_mirror_that_falls_behind_is_shown_behind_never_verified(rig: Rig) -> None:
    """The group reads records the mirror has not copied yet (it is paused): the plan is
    ``mirror_behind`` on every round, and verified once the mirror catches up."""
    first, second = [f"a-{i}" for i in range(200)], [f"b-{i}" for i in range(200)]
    _produce(rig.source.bootstrap_servers, first)
    _start_mirror(rig)
    _mirrored(rig, len(first))
    assert rig.mirror is not None
    os.kill(rig.mirror.pid, signal.SIGSTOP)
    _produce(rig.source.bootstrap_servers, second)
    _consume(rig.source.bootstrap_servers, GROUP, 300)  # past what the mirror copied

    config = parse_config({**yaml.safe_load(rig.config.read_text()),
                           "mirrors": [{"name": "dr", "source": "primary", "destination": "dr",
                                        "topics": [TOPIC], "group": MIRROR_GROUP,
                                        "canary": False, "failover": {"interval": "1s"}}]})
    with ServiceThread(config) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"
        plan = _plan(base, lambda p: True)
        seen = set()
        for _ in range(10):
            code, body = http("GET", f"{base}/v3/mirror/dr/failover/{GROUP}")
            seen.add(body["plan"]["state"])
            time.sleep(0.5)
        assert seen == {"mirror_behind"}, (seen, plan)
        assert not plan["ready"]
        os.kill(rig.mirror.pid, signal.SIGCONT)
        verified = _plan(base, lambda p: p["state"] == "verified")

        # A verified plan of a group that does not move is kept, not made again: checked
        # every round (its age stays small), read from the clusters never again.
        (collector,) = [c for c in s.service.collectors if isinstance(c, FailoverCollector)]
        made = dict(collector.results)
        time.sleep(3.5)  # three rounds
        again = _plan(base, lambda p: True)
        assert collector.results == made
        assert again["translated_at"] == verified["translated_at"]
        assert again["checked_at"] > verified["checked_at"] and again["age_seconds"] < 2.5


def test_bad_cases_are_refused_with_the_reason_and_change_nothing(
        rig: Rig, tmp_path: Path) -> None:
    rig.keys = [f"record-{i}" for i in range(100)]
    _produce(rig.source.bootstrap_servers, rig.keys)
    _start_mirror(rig)
    _mirrored(rig, len(rig.keys))
    _consume(rig.source.bootstrap_servers, GROUP, 40)

    unknown = rig.cli("plan", "--group", "nobody")
    assert unknown.returncode == 1 and "'nobody' is unknown on 'primary'" in unknown.stderr
    saved = tmp_path / "plan.json"
    made = rig.cli("plan", "--group", GROUP, "--json")
    assert made.returncode == 0, made.stderr
    saved.write_text(made.stdout)
    assert json.loads(made.stdout)["state"] == "verified"

    stale = rig.cli("apply", "--group", GROUP, "--plan", str(saved), "--max-age", "0.001",
                    "--yes")
    assert stale.returncode == 1 and "last checked" in stale.stderr
    other = rig.cli("apply", "--group", "shipping", "--plan", str(saved), "--yes")
    assert other.returncode == 1 and "for mirror 'dr', group 'billing'" in other.stderr
    no_service = rig.cli("apply", "--group", GROUP, "--yes")
    assert no_service.returncode == 1 and "the service does not answer" in no_service.stderr

    member = Consumer({"bootstrap.servers": rig.destination.bootstrap_servers,
                       "group.id": GROUP, "client.id": "still-running"})
    member.subscribe([TOPIC])
    try:
        wait_for(lambda: member.poll(0.2) is None and member.assignment(), 30,
                 "a live member on the destination")
        live = rig.cli("apply", "--group", GROUP, "--plan", str(saved), "--yes")
        assert live.returncode == 1 and "live members" in live.stderr
        assert "still-running@" in live.stderr
    finally:
        member.close()
    assert _committed(rig) == {}

    missing = tmp_path / "missing.json"
    plan = json.loads(saved.read_text())
    plan["topics"][0]["destination_topic"] = "not-there"
    missing.write_text(json.dumps(plan))
    absent = rig.cli("apply", "--group", GROUP, "--plan", str(missing), "--yes")
    assert absent.returncode == 1 and "'not-there' missing" in absent.stderr

    rig.destination.stop()
    down = rig.cli("apply", "--group", GROUP, "--plan", str(saved), "--yes")
    assert down.returncode == 1 and "destination cluster 'dr'" in down.stderr
    assert "nothing committed" in down.stderr


def test_a_destination_topic_missing_makes_the_plan_unverifiable(rig: Rig) -> None:
    config = yaml.safe_load(rig.config.read_text())
    config["mirrors"][0]["failover"] = {"destination_prefix": "primary."}
    rig.config.write_text(yaml.safe_dump(config))
    _produce(rig.source.bootstrap_servers, [f"k{i}" for i in range(30)])
    _consume(rig.source.bootstrap_servers, GROUP, 10)
    made = rig.cli("plan", "--group", GROUP)
    assert made.returncode == 0, made.stderr
    assert "unverifiable (destination topic 'primary.orders' missing)" in made.stdout

"""The exact lag in seconds from record timestamps, on Tansu (a broker of today's protocol,
``tests/harness/tansu.py``), with the service on its defaults (Admin-API offsets source).

Ten records are produced with known timestamps, 600 s to 510 s old, one record per request
(Tansu's log end is right only then: its defect, worked around here and nowhere in the
product). A group commits offset 3 and stops. The lag in seconds the service reports is the
age of record 3, exactly, from its timestamp, labelled ``timestamp``, in the API and in
/metrics; also right after a restart with no saved state, where the log-end history starts
empty and the interpolation could only say "at least a few seconds". A stopped group costs one
fetch, not one per round.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from monitor.config import parse_config
from monitor.model.verdicts import GroupStatus
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread
from tests.harness.tansu import Tansu

pytestmark = [pytest.mark.tansu, pytest.mark.slow(65)]

TOPIC, GROUP = "payments", "ledger"
RECORDS, COMMITTED = 10, 3
AGE = 600.0  # s: the first record's age when produced; each next one is 10 s younger


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tansu]:
    with Tansu(tmp_path_factory.mktemp("tansu") / "tansu.log") as broker:
        yield broker


@pytest.fixture(scope="module")
def stamps(tansu: Tansu) -> list[int]:
    """The records' timestamps (unix ms), once produced and the group's offset committed."""
    conf = {"bootstrap.servers": tansu.bootstrap_servers}
    admin = AdminClient(conf)  # kept: a collected client cancels its requests
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])[TOPIC] \
        .result(30)
    producer = Producer({**conf, "linger.ms": 0})
    base = int((time.time() - AGE) * 1000)
    stamps = [base + 10_000 * i for i in range(RECORDS)]
    for i, ts in enumerate(stamps):
        producer.produce(TOPIC, value=f"payment-{i}".encode(), partition=0, timestamp=ts)
        producer.flush(10)  # one record per request: Tansu's log end is right then
    consumer = Consumer({**conf, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen, deadline = 0, time.monotonic() + 60
    while seen < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            assert message.timestamp()[1] == stamps[message.offset() or 0]
            seen += 1
    assert seen == RECORDS, f"consumed {seen} of {RECORDS} records from Tansu"
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED)], asynchronous=False)
    consumer.close()
    return stamps


def config(tansu: Tansu, state: Path) -> Any:
    return parse_config({
        "clusters": [{"name": "tansu", "bootstrap_servers": [tansu.bootstrap_servers]}],
        "http": {"host": "127.0.0.1", "port": 0},
        "state": {"path": str(state)},
    })


def exact(service: ServiceThread) -> GroupStatus | None:
    result = service.service.evaluator.result("tansu")
    g = result.group(GROUP) if result is not None else None
    if g is None or not g.partitions or g.partitions[0].lag_seconds_source != "timestamp":
        return None
    return g


def scrape(port: int | None) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        lines = r.read().decode().splitlines()
    return {name: float(value) for name, _, value in
            (line.rpartition(" ") for line in lines if not line.startswith("#"))}


@pytest.mark.parametrize("restart", ["first start", "restart without state"])
def test_the_lag_in_seconds_is_the_first_unread_records_age(
    tansu: Tansu, stamps: list[int], tmp_path: Path, restart: str,
) -> None:
    if restart == "restart without state":
        # A service that ran, then a new one with its state gone: nothing to resume from.
        with ServiceThread(config(tansu, tmp_path / "old")) as first:
            wait_for(lambda: exact(first), 60, "an exact lag before the restart")
    started = time.time()
    with ServiceThread(config(tansu, tmp_path / "new")) as service:
        assert service.service.state is not None and service.service.state.restored is None
        g = wait_for(lambda: exact(service), 60, "the lag from the record's timestamp")
        # The first exact verdict came within three rounds of the start.
        assert g.evaluated_at - started < 3 * 5.0 + 2
        p = g.partitions[0]
        want = g.evaluated_at - stamps[COMMITTED] / 1000
        assert p.lag_seconds == pytest.approx(want, abs=0.002), (p.lag_seconds, want)
        assert want > AGE - 10 * COMMITTED  # 570 s, where an empty history says "a few"
        assert not p.lag_seconds_lower_bound
        assert g.lag_seconds == p.lag_seconds and g.lag_seconds_source == "timestamp"
        # Later rounds: the same record, read once.
        rounds = service.service.evaluator.rounds
        wait_for(lambda: service.service.evaluator.rounds >= rounds + 2, 30, "two more rounds")
        later = exact(service)
        assert later is not None and later.evaluated_at > g.evaluated_at
        metrics = scrape(service.service.http_port)
        fetched = 'kafka_monitor_lag_time_fetches_total{cluster="tansu",result="timestamp"}'
        assert metrics[fetched] == 1
        source = ('kafka_monitor_group_lag_seconds_source{cluster="tansu",group="ledger",'
                  'source="timestamp"}')
        assert metrics[source] == 1
        lag = f'kafka_consumergroup_group_max_lag_seconds{{cluster="tansu",group="{GROUP}"}}'
        assert metrics[lag] == pytest.approx(time.time() - stamps[COMMITTED] / 1000, abs=10)

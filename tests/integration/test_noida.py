"""The verdicts on a broker of today's protocol that keeps record timestamps: noida-db
(``tests/harness/noida.py``), the service on its defaults (Admin-API offsets source, exact lag
in seconds from record timestamps).

Five groups at once on one broker, each with its own topic, producer (20 records/s) and
consumer committing every second: healthy → OK; lagging (10 records/s read) → WARN; stopped
(the consumer leaves, its lag grows) → STOP; stalled (stays in the group, reads nothing and
re-commits the same offsets) → STALL; rewound (offsets reset to 0 with the group empty, then a
consumer resumes from there at half the produce rate) → REWIND, OK before, and afterwards only
REWIND, WARN or OK. Deadlines as the 0.9 verdict matrix's
(``tests/integration/evaluate/test_verdict_matrix.py``) for the ``admin`` source at the default
intervals: STOP and STALL within a window past the last moving commit (10 x 10 s + reads),
WARN within two windows, REWIND within 25 s of the reset. The healthy group
is never anything but OK once judged, the lag in seconds of the stopped group comes from
record timestamps, and the owners and group state are the broker's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from monitor.config import parse_config
from monitor.dev.localkafka.workload import (
    HealthyConsumer,
    LaggingConsumer,
    ProducerLoad,
    StalledConsumer,
)
from tests.harness.net import http
from tests.harness.noida import Noida
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = pytest.mark.noida

RATE = 20.0
SCENARIOS = {"healthy": "OK", "lagging": "WARN", "stopped": "STOP", "stalled": "STALL",
             "rewound": "REWIND"}
DEADLINE = 330.0  # s from the start: two 100 s windows, reads and evaluation, with slack
REWIND_DEADLINE = 10 + 10 + 5 + 10  # s: max(commit, group read) + log-end read + evaluation,
# and 10 s for this test's sampling


@pytest.fixture(scope="module")
def noida(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Noida]:
    with Noida(tmp_path_factory.mktemp("noida")) as broker:
        yield broker


def defaults(noida: Noida) -> Any:
    """The configuration a user gets for this cluster (an HTTP port of its own)."""
    return parse_config({
        "clusters": [{"name": "noida", "bootstrap_servers": [noida.bootstrap_servers]}],
        "http": {"host": "127.0.0.1", "port": 0},
    })


def _status(base: str, group: str) -> dict[str, Any] | None:
    code, body = http("GET", f"{base}/v3/kafka/noida/consumer/{group}/lag")  # every partition
    return body["status"] if code == 200 else None


@pytest.mark.slow(90)
@pytest.mark.timeout(480)
def test_each_behaviour_gets_its_verdict_on_the_defaults(noida: Noida) -> None:
    conf: dict[str, Any] = {"bootstrap.servers": noida.bootstrap_servers}
    admin = AdminClient(conf)
    for name in SCENARIOS:
        admin.create_topics([NewTopic(f"t-{name}", 2, 1)])[f"t-{name}"].result(30)
    producers = [ProducerLoad(conf, f"t-{name}", RATE) for name in SCENARIOS]
    consumers: dict[str, Any] = {
        "healthy": HealthyConsumer(conf, "t-healthy", "healthy"),
        "lagging": LaggingConsumer(conf, "t-lagging", "lagging", max_rate=RATE / 2),
        "stopped": HealthyConsumer(conf, "t-stopped", "stopped"),
        "stalled": StalledConsumer(conf, "t-stalled", "stalled", stall_after_s=20.0),
        "rewound": HealthyConsumer(conf, "t-rewound", "rewound"),
    }
    config = defaults(noida)
    for worker in (*producers, *consumers.values()):
        worker.start()
    started = time.monotonic()
    seen: dict[str, list[tuple[float, str]]] = {name: [] for name in SCENARIOS}
    reset_at: float | None = None
    try:
        with ServiceThread(config) as s:
            base = f"http://127.0.0.1:{s.service.http_port}"
            wait_for(lambda: http("GET", f"{base}/ready")[0] == 200, 60, "ready",
                     retry_on=(OSError,))
            while time.monotonic() - started < DEADLINE:
                if reset_at is None and time.monotonic() - started > 30:
                    consumers["stopped"].stop()
                    reset_at = _rewind(admin, consumers, conf)
                for name in SCENARIOS:
                    status = _status(base, name)
                    if status is not None:
                        seen[name].append((time.monotonic(), status["status"]))
                if reset_at is not None and len(seen["healthy"]) > 60 and all(
                        v and v[-1][1] == SCENARIOS[n] for n, v in seen.items()
                        if n != "rewound") and _rewind_seen(seen["rewound"], reset_at):
                    break
                time.sleep(1.0)
            finals = {name: v[-1][1] if v else None for name, v in seen.items()}
            finals["rewound"] = "REWIND" if reset_at is not None and _rewind_seen(
                seen["rewound"], reset_at) else finals["rewound"]
            assert finals == SCENARIOS, {n: [st for _, st in v[-12:]] for n, v in seen.items()}
            healthy = [st for _, st in seen["healthy"]]
            judged = healthy[healthy.index("OK"):]
            assert set(judged) == {"OK"}, judged  # never cries wolf once judged
            assert reset_at is not None
            rewound = [(t - reset_at, st) for t, st in seen["rewound"] if t >= reset_at]
            first = next(t for t, st in rewound if st == "REWIND")
            assert first <= REWIND_DEADLINE, rewound[:40]
            before = {st for t, st in rewound if t < first}
            after = {st for t, st in rewound if t >= first}
            assert before <= {"OK"} and after <= {"REWIND", "WARN", "OK"}, rewound

            # The stopped group's lag in seconds is its first unread record's age, exactly.
            # (A group whose committed offset moves between rounds gets the interpolation:
            # the record read last round is no longer at its offset.)
            stopped = _status(base, "stopped")
            assert stopped is not None
            sources = {p["lag_seconds_source"] for p in stopped["partitions"]}
            assert sources == {"timestamp"}, stopped["partitions"]
            assert all(p["lag_seconds"] > 0 for p in stopped["partitions"])
            code, detail = http("GET", f"{base}/v3/kafka/noida/consumer/healthy")
            assert code == 200
            healthy_status = _status(base, "healthy")
            assert healthy_status is not None and healthy_status["state"] == "Stable"
            owners = {p["owner"] for p in healthy_status["partitions"]}
            assert owners and all(o for o in owners), healthy_status["partitions"]
            assert stopped["members"] == 0
    finally:
        for worker in (*consumers.values(), *producers):
            worker.stop()


def _rewind(admin: AdminClient, consumers: dict[str, Any], conf: dict[str, Any]) -> float:
    """Reset the rewound group to offset 0 with its consumer out of the group, as an operator
    does, then resume it at half the produce rate; returns when the reset landed."""
    consumers["rewound"].stop()  # commits its position and leaves the group
    reset = [ConsumerGroupTopicPartitions(
        "rewound", [TopicPartition("t-rewound", p, 0) for p in (0, 1)])]
    deadline = time.monotonic() + 30
    while True:
        at = time.monotonic()
        try:
            admin.alter_consumer_group_offsets(reset)["rewound"].result(15)
            break
        except KafkaException:  # the coordinator may still count the leaving member
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    consumers["rewound"] = LaggingConsumer(conf, "t-rewound", "rewound", max_rate=RATE / 2,
                                           consumer_config={"fetch.message.max.bytes": 1024})
    consumers["rewound"].start()
    return at


def _rewind_seen(timeline: list[tuple[float, str]], reset_at: float) -> bool:
    return any(t >= reset_at and st == "REWIND" for t, st in timeline)


def test_a_group_owned_by_a_member_is_shown_with_it(noida: Noida, tmp_path: Path) -> None:
    """Group state and members on the modern request versions: the consumer detail names the
    member that owns each partition."""
    conf: dict[str, Any] = {"bootstrap.servers": noida.bootstrap_servers}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("t-owned", 2, 1)])["t-owned"].result(30)
    with ProducerLoad(conf, "t-owned", RATE), HealthyConsumer(conf, "t-owned", "owned") as c:
        config = defaults(noida)
        with ServiceThread(config) as s:
            base = f"http://127.0.0.1:{s.service.http_port}"
            status = wait_for(lambda: _status(base, "owned"), 90, "the group's status",
                              ok=lambda st: st is not None and st["partitions"]
                              and all(p["owner"] for p in st["partitions"]),
                              retry_on=(OSError,))
            assert c.joined.is_set() and status is not None
            assert {p["client_id"] for p in status["partitions"]} == {"healthy-consumer"}
            assert status["state"] == "Stable" and status["members"] == 1


def test_records_deleted_before_the_group_read_them_are_counted_lost(noida: Noida) -> None:
    """Retention risk on a broker that moves its log start on request (DeleteRecords): a
    stopped group at offset 10 of 100 loses exactly the 20 records deleted below offset 30."""
    conf: dict[str, Any] = {"bootstrap.servers": noida.bootstrap_servers}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("t-retained", 1, 1)])["t-retained"].result(30)
    producer = Producer(conf)
    for i in range(100):
        producer.produce("t-retained", value=f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    committed = [ConsumerGroupTopicPartitions("retained", [TopicPartition("t-retained", 0, 10)])]
    admin.alter_consumer_group_offsets(committed)["retained"].result(30)
    deleted = admin.delete_records([TopicPartition("t-retained", 0, 30)])
    assert next(iter(deleted.values())).result(30).low_watermark == 30  # the new log start
    config = defaults(noida)
    with ServiceThread(config) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"
        status = wait_for(lambda: _status(base, "retained"), 90, "the group's retention risk",
                          ok=lambda st: st is not None and st["partitions"]
                          and st["partitions"][0]["retention"]["risk"] == "LOST",
                          retry_on=(OSError,))
        assert status is not None
        retention = status["partitions"][0]["retention"]
        assert retention["lost_records"] == 20 and retention["lead"] == -20, retention
        assert status["retention"]["lost_records"] == 20

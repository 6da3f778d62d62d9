"""The mock-cluster harness works, and every fault it injects really takes effect.

The collectors' fault-injection tests rely on these guarantees, so each test here checks, with
real confluent-kafka clients in this process talking TCP to the mock server process, something
that would not hold if the injection had done nothing. Waits are deadline polls, never fixed
sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.harness.mockcluster import MockCluster, MockClusterError
from tests.harness.polling import port_refuses, process_gone, wait_for
from tests.harness.tools import ROOT

pytestmark = pytest.mark.mock

T = TypeVar("T")

#: What a client reports for a partition whose leader the mock has taken down: the request
#: times out, or librdkafka has already dropped the broker (the mock leaves a downed broker out
#: of Metadata) and reports the partition as unknown.
BROKER_DOWN_ERRORS = {"_TIMED_OUT", "_UNKNOWN_PARTITION", "_DESTROY_BROKER", "_TRANSPORT"}


# -- helpers -------------------------------------------------------------------------------


def make_topic(mc: MockCluster, topic: str, leaders: list[int]) -> None:
    """Create ``topic`` with one partition per entry of ``leaders``, led by that broker."""
    mc.create_topic(topic, partitions=len(leaders), replication_factor=1)
    for partition, broker in enumerate(leaders):
        mc.partition_set_leader(topic, partition, broker)


def produce(mc: MockCluster, topic: str, counts: dict[int, int]) -> None:
    """Produce ``counts[p]`` records to each partition ``p`` and check every delivery."""
    errors: list[Any] = []
    producer = Producer(mc.client_config())
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(
                topic,
                value=f"{partition}-{i}".encode(),
                partition=partition,
                on_delivery=lambda err, msg: errors.append(err) if err else None,
            )
    assert producer.flush(10) == 0, "records still undelivered after 10 s"
    assert errors == []


def watermarks(
    consumer: Consumer, topic: str, partition: int, timeout: float = 2.0
) -> tuple[int, int] | str:
    """(low, high) watermarks, or the name of the error the query failed with.

    The error is returned by name so results compare safely: in confluent-kafka 2.16.1,
    ``KafkaError == (0, 1)`` raises TypeError instead of returning False.
    """
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
    except KafkaException as exc:
        return str(exc.args[0].name())


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    """Leader broker id of a partition, from fresh metadata."""
    return admin.list_topics(topic, timeout=5).topics[topic].partitions[partition].leader


def group_offsets(conf: dict[str, Any], group: str, topic: str, partitions: list[int]) -> Any:
    """Committed offsets via AdminClient.list_consumer_group_offsets, as {partition: offset}.

    Partitions are always named: without them the mock answers with an empty list.
    """
    admin = AdminClient(conf)
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])]
    result = admin.list_consumer_group_offsets(request, request_timeout=5)[group].result()
    return {tp.partition: tp.offset for tp in result.topic_partitions}


#: Runs list_consumer_group_offsets in a child process. Why not in this process: when a
#: coordinator-targeted admin request cannot be sent to its (down) coordinator, librdkafka
#: 2.16 can abort the whole process with "rd_kafka_enq_once_del_source_return: Assertion
#: `eonce->refcnt > 0' failed" (librdkafka issue #4605, fix proposed in PR #5397). Seen here
#: when a request is retried on an AdminClient whose cached coordinator went down; an abort
#: here would take the whole pytest run with it.
_OFFSETS_PROBE = textwrap.dedent(
    """
    import json, os, sys, time
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    conf, group, topic, partitions, timeout = json.loads(sys.argv[1])
    admin = AdminClient(conf)
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])]
    start = time.monotonic()
    try:
        result = admin.list_consumer_group_offsets(request, request_timeout=timeout)[group].result()
        out = {"ok": True, "offsets": {tp.partition: tp.offset for tp in result.topic_partitions}}
    except KafkaException as exc:
        out = {"ok": False, "error": exc.args[0].name(), "message": exc.args[0].str()}
    out["elapsed"] = time.monotonic() - start
    print(json.dumps(out), flush=True)
    os._exit(0)  # skip destroying a client that may still wait on the dead coordinator
    """
)


def group_offsets_in_child(
    conf: dict[str, Any], group: str, topic: str, partitions: list[int], timeout: float
) -> dict[str, Any]:
    """list_consumer_group_offsets from a fresh AdminClient in a child process."""
    args = json.dumps([conf, group, topic, partitions, timeout])
    proc = subprocess.run(
        [sys.executable, "-c", _OFFSETS_PROBE, args],
        capture_output=True,
        text=True,
        timeout=timeout + 20,
    )
    assert proc.returncode == 0 and proc.stdout.strip(), (
        f"offsets probe exited {proc.returncode} (-6 = librdkafka abort, issue #4605)\n"
        f"stdout: {proc.stdout}\nstderr: {proc.stderr[-2000:]}"
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- a healthy mock --------------------------------------------------------------------------


def test_produce_consume_commit_round_trip(mock_cluster: MockCluster) -> None:
    """The baseline the fault tests build on: data and group offsets flow end to end."""
    mc = mock_cluster
    mc.create_topic("round-trip", partitions=3)
    producer = Producer(mc.client_config())
    sent = {f"value-{i}".encode() for i in range(30)}
    for payload in sent:
        producer.produce("round-trip", key=payload, value=payload)
    assert producer.flush(10) == 0

    consumer = Consumer(
        mc.client_config(
            {"group.id": "rt-group", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
    )
    consumer.subscribe(["round-trip"])
    received: dict[bytes, tuple[int, int]] = {}
    deadline = time.monotonic() + 15
    while len(received) < len(sent) and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        value, partition, offset = msg.value(), msg.partition(), msg.offset()
        assert value is not None and partition is not None and offset is not None
        received[value] = (partition, offset)
    assert set(received) == sent

    # Expected committed positions: one past the last offset read from each partition.
    ends: dict[int, int] = {}
    for partition, offset in received.values():
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    assert sum(ends.values()) == len(sent)
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition("round-trip", p) for p in ends], timeout=5)
    assert {tp.partition: tp.offset for tp in committed} == ends
    consumer.close()

    conf = mc.client_config()
    assert group_offsets(conf, "rt-group", "round-trip", sorted(ends)) == ends


def test_watermarks_and_list_offsets_after_producing(mock_cluster: MockCluster) -> None:
    """Lag is computed from these offsets, so the mock must report them exactly."""
    mc = mock_cluster
    counts = {0: 5, 1: 7, 2: 11}
    make_topic(mc, "offsets", [1, 2, 3])
    produce(mc, "offsets", counts)

    consumer = Consumer(mc.client_config({"group.id": "wm-probe"}))
    assert {p: watermarks(consumer, "offsets", p) for p in counts} == {
        p: (0, n) for p, n in counts.items()
    }
    consumer.close()

    admin = AdminClient(mc.client_config())
    for spec, expected in (
        (OffsetSpec.earliest(), dict.fromkeys(counts, 0)),
        (OffsetSpec.latest(), counts),
    ):
        futures = admin.list_offsets(
            {TopicPartition("offsets", p): spec for p in counts}, request_timeout=5
        )
        got = {tp.partition: f.result().offset for tp, f in futures.items()}
        assert got == expected


# -- faults ----------------------------------------------------------------------------------


def test_broker_down_fails_its_partitions_only_until_it_is_up(mock_cluster: MockCluster) -> None:
    """A downed broker must hurt only the partitions it leads, and only while down."""
    mc = mock_cluster
    counts = {0: 3, 1: 4, 2: 5}
    make_topic(mc, "down", [1, 2, 3])  # partition 1 is led by broker 2
    produce(mc, "down", counts)
    consumer = Consumer(mc.client_config({"group.id": "down-probe"}))
    healthy = {p: (0, n) for p, n in counts.items()}
    assert {p: watermarks(consumer, "down", p) for p in counts} == healthy

    mc.broker_down(2)
    err = wait_for(
        lambda: watermarks(consumer, "down", 1, timeout=1.0),
        ok=lambda r: isinstance(r, str),
        timeout=10,
        what="watermarks of a partition led by the downed broker fail",
    )
    assert err in BROKER_DOWN_ERRORS
    # Still failing a moment later (not a one-off), while the other leaders answer.
    assert watermarks(consumer, "down", 1, timeout=1.0) in BROKER_DOWN_ERRORS
    assert watermarks(consumer, "down", 0) == healthy[0]
    assert watermarks(consumer, "down", 2) == healthy[2]
    # A client created during the outage sees the same split.
    fresh = Consumer(mc.client_config({"group.id": "down-probe-2"}))
    assert watermarks(fresh, "down", 1, timeout=1.0) in BROKER_DOWN_ERRORS
    assert watermarks(fresh, "down", 0) == healthy[0]
    # The mock leaves the broker out of Metadata but does not move its leaderships.
    metadata = fresh.list_topics("down", timeout=5)
    assert sorted(metadata.brokers) == [1, 3]
    assert metadata.topics["down"].partitions[1].leader == 2
    fresh.close()

    mc.broker_up(2)
    started = time.monotonic()
    wait_for(
        lambda: watermarks(consumer, "down", 1, timeout=1.0),
        ok=lambda r: r == healthy[1],
        timeout=10,
        what="the long-lived client reads the partition again after broker_up",
    )
    recovered_after = time.monotonic() - started
    assert recovered_after < 5, f"recovery took {recovered_after:.1f}s with client_config()"
    consumer.close()


def test_partition_set_leader_moves_the_leader(mock_cluster: MockCluster) -> None:
    """Leader moves must be visible in metadata and followed by clients."""
    mc = mock_cluster
    make_topic(mc, "moves", [1, 2, 3])
    produce(mc, "moves", {0: 6})
    admin = AdminClient(mc.client_config())
    consumer = Consumer(mc.client_config({"group.id": "moves-probe"}))
    assert leader_of(admin, "moves", 0) == 1
    assert watermarks(consumer, "moves", 0) == (0, 6)

    mc.partition_set_leader("moves", 0, 3)
    wait_for(
        lambda: leader_of(admin, "moves", 0),
        ok=lambda leader: leader == 3,
        timeout=5,
        what="metadata shows broker 3 as leader",
    )
    assert leader_of(admin, "moves", 1) == 2  # the other partitions stay put
    # Clients follow the move (the first query may get NOT_LEADER_FOR_PARTITION) and the
    # partition's data moved with it.
    wait_for(
        lambda: watermarks(consumer, "moves", 0),
        ok=lambda r: r == (0, 6),
        timeout=5,
        what="watermarks from the new leader",
    )
    produce(mc, "moves", {0: 2})
    assert watermarks(consumer, "moves", 0) == (0, 8)
    consumer.close()


def test_group_coordinator_down_then_moved(mock_cluster: MockCluster) -> None:
    """Committed offsets vanish with the coordinator and come back when it moves."""
    mc = mock_cluster
    group, topic, parts = "coord-group", "coord", [0, 1]
    make_topic(mc, topic, [2, 3])  # data leaders stay up; only the coordinator goes down
    produce(mc, topic, {0: 10, 1: 10})
    mc.coordinator_set(group, 1)
    committer = Consumer(mc.client_config({"group.id": group, "enable.auto.commit": False}))
    expected = {0: 7, 1: 3}
    committer.commit(
        offsets=[TopicPartition(topic, p, o) for p, o in expected.items()], asynchronous=False
    )
    committer.close()
    conf = mc.client_config()
    assert group_offsets(conf, group, topic, parts) == expected

    mc.broker_down(1)
    probe = group_offsets_in_child(conf, group, topic, parts, timeout=2.0)
    assert not probe["ok"], probe
    assert probe["error"] == "_TIMED_OUT", probe

    mc.coordinator_set(group, 2)
    # A fresh client: an AdminClient that cached the dead coordinator kept timing out here
    # (librdkafka does not re-query a coordinator it cached; issue #5511).
    assert group_offsets(conf, group, topic, parts) == expected


def test_set_rtt_delays_that_brokers_responses(mock_cluster: MockCluster) -> None:
    """Latency injection must slow exactly that broker by at least the injected time."""
    mc = mock_cluster
    rtt_ms = 250
    make_topic(mc, "slow", [1, 2])
    produce(mc, "slow", {0: 1, 1: 1})
    consumer = Consumer(mc.client_config({"group.id": "rtt-probe"}))

    def timed(partition: int) -> float:
        start = time.perf_counter()
        assert watermarks(consumer, "slow", partition, timeout=5) == (0, 1)
        return time.perf_counter() - start

    timed(0), timed(1)  # connections and metadata in place before measuring
    base = min(timed(1) for _ in range(5))

    mc.set_rtt(2, rtt_ms)
    slow = [timed(1) for _ in range(3)]
    assert min(slow) - base >= rtt_ms / 1000, (base, slow)
    assert statistics.median(timed(0) for _ in range(3)) < rtt_ms / 2000  # broker 1 unaffected

    mc.set_rtt(2, 0)
    wait_for(lambda: timed(1), ok=lambda t: t < rtt_ms / 2000, timeout=5, what="rtt removed")
    consumer.close()


# -- the server process ------------------------------------------------------------------------


def test_close_stops_the_server_and_its_listeners(mock_cluster_factory: Any) -> None:
    """close() must leave no process and no listening port behind."""
    mc = mock_cluster_factory(2)
    pid, hostports = mc.pid, mc.bootstrap_servers.split(",")
    assert pid is not None and not process_gone(pid)
    assert not any(port_refuses(hp) for hp in hostports)

    assert mc.close() == 0
    assert process_gone(pid)
    assert all(port_refuses(hp) for hp in hostports)
    assert mc.close() == 0  # idempotent
    with pytest.raises(MockClusterError) as info:
        mc.ping()
    assert info.value.error == "SERVER_GONE"


def test_sigterm_ends_the_server(mock_cluster_factory: Any) -> None:
    """close() escalates to SIGTERM; the server must still clean up and exit on it."""
    mc = mock_cluster_factory(1)
    hostport = mc.bootstrap_servers
    os.kill(mc.pid, signal.SIGTERM)
    # Its cleanup (the mock cluster destroyed) took over 5 s once on a loaded CI machine.
    wait_for(lambda: mc.returncode, ok=lambda rc: rc is not None, timeout=20,
             what="server exits")
    assert mc.returncode == 128 + signal.SIGTERM  # SystemExit from its handler, after cleanup
    assert port_refuses(hostport)


def test_stop_command_ends_the_server(mock_cluster_factory: Any) -> None:
    """The explicit stop command destroys the cluster and ends the process."""
    mc = mock_cluster_factory(1)
    hostport = mc.bootstrap_servers
    mc.stop()
    assert mc.returncode == 0
    assert port_refuses(hostport)


def test_server_exits_when_its_client_process_dies() -> None:
    """A test process that crashes (here: SIGKILL) must not leave a mock cluster behind."""
    code = (
        "import json, time\n"
        "from tests.harness.mockcluster import MockCluster\n"
        "mc = MockCluster(1).start()\n"
        "print(json.dumps([mc.pid, mc.bootstrap_servers]), flush=True)\n"
        "time.sleep(60)\n"
    )
    client = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    server_pid = None
    try:
        assert client.stdout is not None
        server_pid, hostport = json.loads(client.stdout.readline())
        assert not port_refuses(hostport)
        client.send_signal(signal.SIGKILL)
        client.wait(10)
        wait_for(lambda: process_gone(server_pid), ok=bool, timeout=10, what="server exits")
        assert port_refuses(hostport)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(10)
        if server_pid is not None and not process_gone(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_bad_commands_get_clear_errors(mock_cluster: MockCluster) -> None:
    """Typos in fault scripts must fail loudly with librdkafka's error name, not pass."""
    mc = mock_cluster
    mc.create_topic("known", partitions=2)
    cases: list[tuple[Callable[[], Any], str, int | None]] = [
        (lambda: mc.broker_down(42), "BROKER_NOT_AVAILABLE", 8),
        (lambda: mc.broker_up(42), "BROKER_NOT_AVAILABLE", 8),
        (lambda: mc.set_rtt(42, 10), "BROKER_NOT_AVAILABLE", 8),
        (lambda: mc.partition_set_leader("known", 0, 42), "BROKER_NOT_AVAILABLE", 8),
        (lambda: mc.partition_set_leader("known", 5, 1), "UNKNOWN_TOPIC_OR_PART", 3),
        (lambda: mc.create_topic("known", partitions=2), "TOPIC_ALREADY_EXISTS", 36),
        (lambda: mc.coordinator_set("g", 1, key_type="nonsense"), "BAD_REQUEST", None),
        (lambda: mc.command("no_such_command"), "BAD_REQUEST", None),
        (lambda: mc.command("broker_down", id="two"), "BAD_REQUEST", None),
        (lambda: mc.command("create_topic", topic="", partitions=1, rf=1), "BAD_REQUEST", None),
    ]
    for call, error, code in cases:
        with pytest.raises(MockClusterError) as info:
            call()
        assert (info.value.error, info.value.code) == (error, code), str(info.value)
        assert error in str(info.value) or info.value.error == "BAD_REQUEST"
    mc.ping()  # errors leave the server serving


def test_start_failures_are_reported_with_the_servers_stderr() -> None:
    """A server that cannot start must say why (its reply or stderr), not just time out."""
    with pytest.raises(MockClusterError) as info:
        MockCluster(0).start()
    assert info.value.error == "START_FAILED"
    assert "--brokers must be >= 1" in str(info.value)

    # An interpreter that cannot run the server: its stderr ends up in the error.
    with pytest.raises(MockClusterError) as info:
        MockCluster(1, python="/bin/sh").start()
    assert info.value.error == "START_FAILED"
    assert "mock server stderr" in str(info.value)

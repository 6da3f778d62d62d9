"""``kafka-monitor demo``: a local Kafka, a demo workload, and the service watching it.

The embedded default a newcomer runs first (``make demo``): it needs nothing but the cached
jars and Java, shows every consumer-group behaviour the evaluator judges, and stops everything
it started on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from typing import Any

from monitor.config import MonitorConfig, parse_config
from monitor.dev.localkafka import (
    GroupConsumer,
    HealthyConsumer,
    LaggingConsumer,
    LocalKafka,
    ProducerLoad,
    StalledConsumer,
    StoppedConsumer,
    ensure_kafka_dist,
)
from monitor.logs import setup_logging
from monitor.runtime import enable_crash_traces, tune_gc, tune_malloc
from monitor.service import Service, install_signal_handlers

_log = logging.getLogger("monitor.demo")

TOPIC = "demo-orders"
PARTITIONS = 6
PRODUCE_RATE = 50.0  # records/s


def demo_config(kafka: LocalKafka, port: int) -> MonitorConfig:
    """The monitor's configuration for the local cluster, as an operator would write it."""
    return parse_config(
        {
            "clusters": [
                {
                    "name": "local",
                    "bootstrap_servers": kafka.bootstrap_servers,
                    "broker_version_fallback": "0.9.0.1",
                    "offsets_source": "both",
                    "jmx": [
                        {"broker_id": b.id, "host": "127.0.0.1", "port": b.jmx_port}
                        for b in kafka.brokers
                    ],
                }
            ],
            "collectors": {"metadata_interval": "10s"},
            "http": {"host": "127.0.0.1", "port": port},
            "logging": {"format": "text"},
        },
        source="<demo>",
    )


def _port_or_free(port: int) -> int:
    """The requested port if it is free, else 0 (any free port), so the demo always starts."""
    if port == 0:
        return 0
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            _log.warning("port %d is busy; using a free port instead", port)
            return 0
    return port


def _status_lines(producer: ProducerLoad, groups: list[GroupConsumer]) -> list[str]:
    """What the workload itself sees (not the monitor's verdict): records produced, and per
    group how far its last committed offsets are behind them."""
    delivered = producer.delivered
    lines = [f"  producer      {TOPIC}: {producer.delivered_total} records acknowledged"]
    for group in groups:
        committed: dict[int, int] = {}
        for commit in group.commits:
            committed.update({p: off for (_, p), off in commit.offsets.items()})
        behind = sum(max(0, end - committed.get(p, 0)) for p, end in delivered.items())
        frozen = isinstance(group, StalledConsumer) and group.frozen.is_set()
        state = "closed" if group.closed.is_set() else "frozen" if frozen else "running"
        lines.append(
            f"  {group.group_id:<13} {group.kind:<8} {state:<8} consumed {group.consumed:>7}, "
            f"committed lag {behind:>6}, commits {len(group.commits)}"
        )
    return lines


def _clock(monotonic_at: float) -> str:
    """Local wall-clock time (to a tenth of a second) of a ``time.monotonic()`` moment."""
    at = time.time() - (time.monotonic() - monotonic_at)
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 10) % 10}"


class _Events:
    """The moments the workload changes a group's behaviour, printed once each as they happen
    (the stalled consumer freezing, the stopped one closing), so a reader can time the
    monitor's verdicts against them."""

    def __init__(self, groups: list[GroupConsumer]) -> None:
        self._groups = groups
        self._printed: set[str] = set()

    def lines(self) -> list[str]:
        out = []
        for group in self._groups:
            if group.group_id in self._printed:
                continue
            if isinstance(group, StalledConsumer) and group.frozen_at is not None:
                out.append(
                    f"{_clock(group.frozen_at)} workload: {group.group_id} froze (stays in the "
                    "group and re-commits the same offsets from now on)"
                )
            elif isinstance(group, StoppedConsumer) and group.closed.is_set():
                commits = group.commits
                at = commits[-1].at if commits else time.monotonic()
                out.append(
                    f"{_clock(at)} workload: {group.group_id} closed after its last commit "
                    "(the group has no member from now on)"
                )
            else:
                continue
            self._printed.add(group.group_id)
        return out


def _verdict_lines(service: Service) -> list[str]:
    """The monitor's verdict per demo group, from the evaluation job's latest round."""
    result = service.evaluator.result("local")
    if result is None:
        return ["  (no evaluation yet)"]
    lines = []
    for name in result.group_names():
        g = result.group(name)
        if g is None or not name.startswith("demo-"):
            continue
        lines.append(
            f"  {name:<13} {g.status:<8} lag {g.totallag:>6} offsets, {g.lag_seconds:>7.1f} s"
            f"  ({g.partition_count} partitions, window {g.complete:.0%} complete)"
        )
    return lines or ["  (no groups evaluated yet)"]


async def _serve(
    config: MonitorConfig,
    producer: ProducerLoad,
    groups: list[GroupConsumer],
    status_every: float,
) -> None:
    stop = asyncio.Event()
    install_signal_handlers(stop)
    service = Service(config)
    await service.start()
    base = f"http://127.0.0.1:{service.http_port}"
    print(
        "\nkafka-monitor demo is running; Ctrl-C stops everything.\n"
        f"  page       {base}/   (open it in a browser)\n"
        f"  health     {base}/healthz\n"
        f"  readiness  {base}/ready\n"
        f"  status     {base}/v3/kafka/local/consumer/demo-stopped/status\n"
        f"  lag        {base}/v3/kafka/local/consumer/demo-lagging/lag\n"
        f"  groups     {base}/v3/kafka/local/consumer\n"
        f"  kafka      {config.clusters[0].bootstrap_servers[0]} (Kafka 0.9.0.1)\n",
        flush=True,
    )
    events = _Events(groups)
    next_status = time.monotonic() + status_every
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), min(0.5, status_every))
            for line in events.lines():
                print(line, flush=True)
            if not stop.is_set() and time.monotonic() >= next_status:
                next_status += status_every
                print(time.strftime("%H:%M:%S workload:"), flush=True)
                print("\n".join(_status_lines(producer, groups)), flush=True)
                print("monitor's verdict:", flush=True)
                print("\n".join(_verdict_lines(service)), flush=True)
    finally:
        await service.stop()


def run_demo(port: int = 8000, brokers: int = 1, status_every: float = 10.0) -> int:
    setup_logging("INFO", "text")
    tune_gc()
    tune_malloc()
    enable_crash_traces()
    ensure_kafka_dist()
    print(f"starting ZooKeeper and {brokers} Kafka 0.9.0.1 broker(s)...", flush=True)
    with LocalKafka(brokers) as kafka:
        kafka.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=min(3, brokers))
        client: dict[str, Any] = kafka.client_config()
        producer = ProducerLoad(client, TOPIC, rate=PRODUCE_RATE)
        groups: list[GroupConsumer] = [
            HealthyConsumer(client, TOPIC, "demo-healthy"),
            LaggingConsumer(client, TOPIC, "demo-lagging", max_rate=PRODUCE_RATE / 3),
            StalledConsumer(client, TOPIC, "demo-stalled", stall_after_s=30.0,
                            stall_after_records=10**9),
            StoppedConsumer(client, TOPIC, "demo-stopped", stop_after_s=30.0),
        ]
        workers = [producer, *groups]
        for worker in workers:
            worker.start()
        print(
            f"{_clock(time.monotonic())} workload started: {TOPIC} at {PRODUCE_RATE:g} "
            f"records/s, groups {', '.join(g.group_id for g in groups)}",
            flush=True,
        )
        try:
            config = demo_config(kafka, _port_or_free(port))
            asyncio.run(_serve(config, producer, groups, status_every))
        finally:
            print("stopping the workload, the broker(s) and ZooKeeper...", flush=True)
            for worker in reversed(workers):
                worker.stop()
    print("demo stopped", flush=True)
    return 0

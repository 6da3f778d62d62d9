"""An in-process service for the HTTP tests: its store fed with observations on a simulated
clock (no Kafka), one round evaluated, served by aiohttp on a loopback socket.

Cluster ``prod``, topic ``orders`` with 2 partitions, log ends rising 100 a second for 10 s;
group ``ok`` always caught up with one member, group ``gone`` committed for 5 s then stopped.
Writes need ``AUTH``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from monitor.config import parse_config
from monitor.evaluate.job import Evaluator
from monitor.model.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    GroupMember,
    GroupMembership,
    PartitionMetadata,
)
from monitor.serve.http.app import build_app
from monitor.service import Service

__all__ = ["AUTH", "C", "Call", "T0", "TOKEN", "TOPIC", "batch", "make_service", "run"]

C = "prod"
TOKEN = "token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}  # what state-changing requests need
T0 = 1_800_000_000.0
TOPIC = "orders"

Call = Callable[..., Awaitable[tuple[int, Any]]]


def make_service() -> Service:
    config = parse_config(
        {
            "clusters": [{"name": C, "bootstrap_servers": ["127.0.0.1:1"]}],
            "evaluator": {"window": 5, "min_distance": "0.1s"},
            "http": {"host": "127.0.0.1", "port": 0, "auth": {"tokens": [TOKEN]}},
        }
    )
    service = Service(config, collectors=[])
    store = service.store
    # No reader runs here: say the offsets topic was read up to "now" of the round.
    prepare = service.evaluator.before_publish  # the service's own hook (see below)
    service.evaluator = Evaluator(store, config.evaluator, freshness=lambda _c: T0 + 10.5)
    service.evaluator.before_publish = prepare
    store.put_metadata(
        ClusterMetadata(
            cluster=C, observed_at=T0, brokers={0: "h:9092"}, controller_id=0,
            topics={TOPIC: tuple(PartitionMetadata(p, 0, (0,), (0,)) for p in range(2))},
        )
    )
    order = 0
    for s in range(1, 11):
        t = T0 + s
        leo = s * 100
        store.put_broker_offsets(BrokerOffsets(C, t, [TOPIC, TOPIC], [0, 1], [0, 0], [leo, leo]))
        if s <= 5:  # "gone": committed up to 5 s, then nothing
            order += 1
            store.put_commits(batch("gone", t, [leo, leo], order))
        order += 1
        store.put_commits(batch("ok", t, [leo, leo], order))  # always caught up
    store.put_group(
        GroupMembership(
            cluster=C, group="ok", source="offsets_topic", observed_at=T0 + 10, state="Stable",
            protocol_type="consumer", protocol="range", generation=3,
            members=(GroupMember("m1", "app-1", "/10.1.1.1", ((TOPIC, 0), (TOPIC, 1))),),
        )
    )
    service.evaluator.run_once(T0 + 10.5)
    service.evaluated_clusters.add(C)  # what the scheduled round does once collectors are ready
    return service


def batch(group: str, t: float, offsets: list[int], order: int) -> CommitBatch:
    return CommitBatch(
        cluster=C, source="offsets_topic", observed_at=t, groups=[group, group],
        topics=[TOPIC, TOPIC], partitions=[0, 1], offsets=offsets,
        commit_times=[int(t * 1000)] * 2, orders=[order, order],
    )


def run(test: Callable[[Service, Call], Awaitable[None]]) -> None:
    service = make_service()

    async def main() -> None:
        server = TestServer(build_app(service), host="127.0.0.1")
        await server.start_server()
        try:
            async with aiohttp.ClientSession() as session:

                async def call(method: str, path: str, **kw: Any) -> tuple[int, Any]:
                    async with session.request(method, server.make_url(path), **kw) as r:
                        text = await r.text()
                        try:
                            return r.status, json.loads(text)
                        except json.JSONDecodeError:
                            return r.status, text

                await test(service, call)
        finally:
            await server.close()

    asyncio.run(main())

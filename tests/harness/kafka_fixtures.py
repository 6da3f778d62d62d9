"""pytest fixtures for the real Kafka 0.9.0.1 clusters (see ``monitor.dev.localkafka``).

Loaded as a plugin from ``tests/conftest.py``::

    pytest_plugins = ["tests.harness.kafka_fixtures", ...]

* ``kafka``: 1 broker, ``kafka3``: 3 brokers. Session-scoped and lazy: a cluster starts the
  first time a test asks for it and stops at the end of the run; a run that selects no Kafka
  test starts no JVM. Mark tests with ``@pytest.mark.kafka`` / ``@pytest.mark.kafka3``.
* Tests share the clusters, so they must use their own topics and groups: ``unique_name`` (or
  ``make_unique_name`` from module/session fixtures).
* A test that stops or kills a ``kafka3`` broker must restart it before returning (later
  modules reuse the cluster), ideally followed by ``kafka3.wait_fully_replicated()``. As a
  safety net, any broker of ``kafka3`` found down after a test is restarted here (and the
  cluster waited on until fully replicated) with a warning.
"""

from __future__ import annotations

import itertools
import re
import uuid
import warnings
from collections.abc import Callable, Iterator

import pytest

from monitor.config import MonitorConfig, parse_config
from monitor.dev.localkafka import LocalKafka

__all__ = ["kafka", "kafka3", "make_unique_name", "unique_name"]

_counter = itertools.count(1)


def make_unique_name(prefix: str, hint: str = "") -> str:
    """A topic/group name unique in the run and across runs: ``<prefix>-<hint>-<n>-<hex>``.

    Only ``[a-z0-9-]`` (Kafka forbids some characters and confuses ``.`` with ``_`` in metric
    names), at most 100 characters, and never very short: librdkafka 2.x cannot parse some
    very small Metadata v0 responses (e.g. a one-character topic name).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", f"{prefix}-{hint}".lower()).strip("-")[:60]
    return f"{slug}-{next(_counter)}-{uuid.uuid4().hex[:8]}"


def defaults_config(
    kafka: LocalKafka, prefix: str, source: str, **sections: dict[str, object]
) -> MonitorConfig:
    """The configuration a user gets, but for what a test must set: where Kafka is, the
    offsets source, which groups and topics are the test's (``^prefix``), a free HTTP port;
    ``sections`` are merged in (e.g. ``collectors={...}``, ``state={...}``)."""
    data: dict[str, object] = {
        "clusters": [{
            "name": "local",
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "offsets_source": source,
            "groups": {"allow": [f"^{prefix}"]},
            "topics": {"allow": [f"^{prefix}"]},
        }],
        "http": {"host": "127.0.0.1", "port": 0},
    }
    data.update(sections)
    return parse_config(data)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_name("topic")`` → a fresh name that includes the test's name."""
    return lambda prefix: make_unique_name(prefix, request.node.name)


def _cluster(num_brokers: int) -> Iterator[LocalKafka]:
    cluster = LocalKafka(num_brokers, offsets_topic_partitions=4)
    cluster.start()
    try:
        yield cluster
    finally:
        # Throw-away data: no need for a controlled shutdown.
        cluster.stop(graceful=False)


@pytest.fixture(scope="session")
def kafka() -> Iterator[LocalKafka]:
    """A 1-broker Kafka 0.9.0.1 cluster (with ZooKeeper), shared by the whole run."""
    yield from _cluster(1)


@pytest.fixture(scope="session")
def kafka3() -> Iterator[LocalKafka]:
    """A 3-broker Kafka 0.9.0.1 cluster (ids 0, 1, 2), shared by the whole run.
    ``__consumer_offsets`` has replication factor 3."""
    yield from _cluster(3)


@pytest.fixture(autouse=True)
def _restore_kafka3_brokers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Safety net: restart any ``kafka3`` broker a test left stopped."""
    if "kafka3" not in request.fixturenames:
        yield
        return
    cluster: LocalKafka = request.getfixturevalue("kafka3")
    yield
    down = [b.id for b in cluster.brokers if not b.running]
    for broker_id in down:
        cluster.start_broker(broker_id)
    if down:
        cluster.wait_fully_replicated()
        warnings.warn(
            f"{request.node.nodeid} left kafka3 broker(s) {down} down; restarted them",
            stacklevel=1,
        )

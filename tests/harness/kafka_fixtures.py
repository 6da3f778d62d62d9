"""pytest fixtures for the real Kafka 0.9.0.1 clusters (see ``monitor.dev.localkafka``).

* ``kafka`` (1 broker) and ``kafka3`` (3 brokers, ids 0-2, ``__consumer_offsets`` with
  replication factor 3): shared by every test of the run, in every xdist worker
  (``tests/harness/shared_clusters.py``), started the first time a test asks for one. Tests
  run at the same time on them, so each uses its own topics and groups (``unique_name``, or
  ``make_unique_name`` in module fixtures) and never stops, kills or restarts a broker (the
  shared view refuses to).
* ``own_kafka3``: a 3-broker cluster of the test's own, for tests that stop, kill or restart
  brokers; such tests are marked ``own_cluster`` (added here), as are tests that start a
  ``LocalKafka`` of their own with other broker settings.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from monitor.config import MonitorConfig, parse_config
from monitor.dev.localkafka import LocalKafka
from tests.harness.shared_clusters import ClusterPool, PoolClient

__all__ = ["defaults_config", "kafka", "kafka3", "make_unique_name", "own_kafka3",
           "unique_name"]

_counter = itertools.count(1)
_POOL = pytest.StashKey[ClusterPool]()
_CLIENT = pytest.StashKey[PoolClient]()
_WORKERINPUT_KEY = "kafka_cluster_pool"


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


# --------------------------------------------------------------------------- the shared pool


def _pool(config: pytest.Config) -> ClusterPool:
    """This process's pool (the owner's), made on first use."""
    if _POOL not in config.stash:
        config.stash[_POOL] = ClusterPool()
    return config.stash[_POOL]


def _describe(config: pytest.Config, name: str) -> dict[str, object]:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and _WORKERINPUT_KEY in workerinput:
        if _CLIENT not in config.stash:
            config.stash[_CLIENT] = PoolClient(**workerinput[_WORKERINPUT_KEY])
        return config.stash[_CLIENT].describe(name)
    return _pool(config).describe(name)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """xdist's controller, before each worker starts: where the pool answers."""
    config: pytest.Config = node.config  # type: ignore[attr-defined]
    pool = _pool(config)
    node.workerinput[_WORKERINPUT_KEY] = pool.serve()  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _POOL in session.config.stash:
        session.config.stash[_POOL].close()


@pytest.fixture(scope="session")
def kafka(request: pytest.FixtureRequest) -> Iterator[LocalKafka]:
    """The run's shared 1-broker Kafka 0.9.0.1 cluster (with ZooKeeper)."""
    view = LocalKafka.attach(_describe(request.config, "kafka"))
    yield view
    view.stop()  # forgets it; the owner stops it at the end of the run


@pytest.fixture(scope="session")
def kafka3(request: pytest.FixtureRequest) -> Iterator[LocalKafka]:
    """The run's shared 3-broker Kafka 0.9.0.1 cluster (ids 0, 1, 2)."""
    view = LocalKafka.attach(_describe(request.config, "kafka3"))
    yield view
    view.stop()


@pytest.fixture
def own_kafka3() -> Iterator[LocalKafka]:
    """A 3-broker cluster of this test's own (ids 0, 1, 2), stopped by PID afterwards even when
    the test fails: brokers may be stopped, killed and restarted at will."""
    cluster = LocalKafka(3, offsets_topic_partitions=4)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(graceful=False)

"""pytest fixtures for librdkafka's mock Kafka cluster (see ``tests.harness.mockcluster``).

Loaded as a plugin from ``tests/conftest.py``::

    pytest_plugins = [..., "tests.harness.mock_fixtures"]

* ``mock_cluster``: a fresh 3-broker mock cluster per test (start-up takes ~0.1 s, so tests
  never share one and may inject any fault without cleaning up).
* ``mock_cluster_factory``: ``make(brokers=..., **MockCluster kwargs)`` for other shapes; every
  cluster it made is closed at the end of the test.

Mark tests that use them with ``@pytest.mark.mock``. Both fixtures use
``group_initial_rebalance_delay_ms=0`` unless told otherwise, so a consumer joins a new group
in ~0.1 s instead of the mock's (and Kafka's) 3 s.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any

import pytest

from tests.harness.mock_server import find_librdkafka
from tests.harness.mockcluster import MockCluster

__all__ = ["PINNED_CONFLUENT_KAFKA", "mock_cluster", "mock_cluster_factory"]

#: The mock API is experimental (no ABI guarantee); the ctypes signatures in mock_server
#: were checked against this wheel only.
PINNED_CONFLUENT_KAFKA = "2.16.1"
_DEFAULTS: dict[str, Any] = {"group_initial_rebalance_delay_ms": 0}
_checked = False


def _check_library() -> None:
    """Skip when there is no bundled librdkafka; warn when the wheel is not the pinned one."""
    global _checked
    if _checked:
        return
    try:
        find_librdkafka()
    except FileNotFoundError as exc:
        pytest.skip(f"librdkafka mock cluster unavailable: {exc}")
    installed = metadata.version("confluent-kafka")
    if installed != PINNED_CONFLUENT_KAFKA:
        warnings.warn(
            f"confluent-kafka {installed} is installed but the mock-cluster harness was written "
            f"against {PINNED_CONFLUENT_KAFKA}; librdkafka's mock API has no ABI guarantee",
            stacklevel=2,
        )
    _checked = True


@pytest.fixture
def mock_cluster_factory() -> Iterator[Callable[..., MockCluster]]:
    """``make(brokers=3, **kwargs)`` → a started MockCluster, closed after the test."""
    _check_library()
    clusters: list[MockCluster] = []

    def make(brokers: int = 3, **kwargs: Any) -> MockCluster:
        cluster = MockCluster(brokers, **{**_DEFAULTS, **kwargs})
        clusters.append(cluster)
        return cluster.start()

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.close()


@pytest.fixture
def mock_cluster(mock_cluster_factory: Callable[..., MockCluster]) -> MockCluster:
    """A started 3-broker mock cluster (broker ids 1, 2, 3; controller 1), per test."""
    return mock_cluster_factory(3)

"""Unit tests: the package's code on its own, with no broker, no Prometheus, no browser and
no image (those are in tests/integration/). ``make test-unit`` runs them alone, for feedback
within two minutes. The folders mirror ``monitor/`` (and ``dashboards/``)."""

from __future__ import annotations

import pytest

#: Fixtures that start or reach a broker.
BROKER_FIXTURES = frozenset({"kafka", "kafka3", "own_kafka3", "mock_cluster",
                             "mock_cluster_factory"})


def pytest_runtest_setup(item: pytest.Item) -> None:
    used = BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used:
        pytest.fail(f"{item.nodeid} uses {sorted(used)}: a test that needs a broker belongs "
                    "in tests/integration/", pytrace=False)

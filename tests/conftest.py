"""The test run: shared Kafka clusters, the mock cluster, leftover-process checks, and how tests
are marked, grouped and ordered for ``make test`` (pytest-xdist workers, random order).

* Markers say what a test needs (``kafka``, ``kafka3``, ``mock``, ``own_cluster``, ...): added
  here from the fixtures a test uses, so ``-m`` selections are right without anyone
  remembering to mark.
* Tests that share a module- or class-scoped fixture (a stack of brokers, monitor and
  Prometheus set up once for a module) run on one worker, so it is set up once; so do tests
  given the same ``xdist_group`` (the ones that keep both cores busy, so that they take turns).
* Logging is put back as it was after every test (the API's ``/v3/admin/loglevel`` sets the
  root logger's level): no test depends on a level another left.
* Tests marked ``slow(seconds)`` are handed out first, longest first (the verdict matrix runs
  ~11 minutes): the run ends when its longest test does, not a long test started late.
  Otherwise the order is pytest-randomly's, from the seed printed in the header.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Property tests judge results, never speed: a deadline fails them when the machine is busy
# (tests run side by side on 2 cores), and speed is measured in bench/.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

pytest_plugins = [
    "tests.harness.kafka_fixtures",
    "tests.harness.mock_fixtures",
    "tests.harness.leftovers",
    "tests.harness.groups_check",
]

#: Fixture -> the markers a test using it gets.
FIXTURE_MARKERS = {
    "kafka": ("kafka",),
    "kafka3": ("kafka", "kafka3"),
    "own_kafka3": ("kafka", "own_cluster"),
    "mock_cluster": ("mock",),
    "mock_cluster_factory": ("mock",),
}
_SHARED_SCOPES = ("class", "module", "package")


def _shares_a_fixture(item: pytest.Item) -> bool:
    """True when the test uses a fixture set up once for its module or class."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in _SHARED_SCOPES
               for defs in info.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for fixture, markers in FIXTURE_MARKERS.items():
            if fixture in fixtures:
                for marker in markers:
                    item.add_marker(marker)
        if item.get_closest_marker("own_cluster"):
            item.add_marker("kafka")
        if _shares_a_fixture(item) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    # Stable: the random order stays within tests of equal weight.
    items.sort(key=lambda item: -_expected_seconds(item))


def _expected_seconds(item: pytest.Item) -> float:
    """What ``slow(seconds)`` says a test (or its whole module, for a module's shared setup)
    takes on these machines; 0 for the others."""
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 0.0
    return float(marker.args[0]) if marker.args else 60.0


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """The level of the root logger and of every logger that existed before the test,
    restored after it."""
    root = logging.getLogger()
    levels = {name: logger.level for name, logger in logging.Logger.manager.loggerDict.items()
              if isinstance(logger, logging.Logger)}
    root_level = root.level
    yield
    root.setLevel(root_level)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)

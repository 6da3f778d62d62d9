"""Fails a parallel run whose grouping silently stopped working: with ``--dist loadgroup``,
pytest-xdist marks each grouped test's node id with its group, and the controller hands a group
to one worker. Where that marking no longer takes (pytest 9.2 with xdist 3.8), every worker
would set up a module's shared fixture again (the verdict matrix's 11 minutes, six times over)."""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    lost = [item.nodeid for item in items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist did not group {len(lost)} tests marked xdist_group (e.g. "
            f"{lost[0]}): this pytest and pytest-xdist do not work together; see the pin in "
            "pyproject.toml")

"""Grafana dashboards for kafka-monitor, written with grafanalib.

The sources are the modules here; the JSON Grafana imports is generated into ``json/`` by
``python -m dashboards`` (``make dashboards``) and committed, so operators need no Python to
use it, and the Helm chart ships it (``helm/kafka-monitor/files/dashboards`` links here).
``python -m dashboards --check`` and ``tests/unit/dashboards/test_dashboards.py`` fail when the
committed JSON differs from what the sources generate.

Every query uses a metric the service exports: tests/integration/serve/test_prometheus.py
checks the names against a real ``/metrics`` output and runs each query on a real Prometheus.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grafanalib._gen import DashboardEncoder
from grafanalib.core import Dashboard

from dashboards import (
    canary,
    cluster_health,
    consumer_group,
    consumer_groups,
    mirrors,
    monitor_health,
)

JSON_DIR = Path(__file__).parent / "json"

# File name (in json/) -> builder. The file name is the dashboard's uid.
BUILDERS: dict[str, Callable[[], Dashboard]] = {
    f"{module.UID}.json": module.build
    for module in (consumer_groups, consumer_group, cluster_health, canary, mirrors,
                   monitor_health)
}


def render(dashboard: Dashboard) -> str:
    """The dashboard as Grafana JSON: sorted keys and a final newline, so regenerating gives
    byte-identical files and diffs stay readable."""
    return json.dumps(dashboard.to_json_data(), cls=DashboardEncoder, sort_keys=True,
                      indent=2) + "\n"


def generate() -> dict[str, str]:
    """Every dashboard's JSON text by file name, generated in memory."""
    return {name: render(build()) for name, build in BUILDERS.items()}


def write(directory: Path = JSON_DIR) -> list[Path]:
    """Write every dashboard to ``directory`` and remove JSON files no builder makes any
    more (a renamed dashboard must not linger in the chart)."""
    directory.mkdir(parents=True, exist_ok=True)
    generated = generate()
    for stale in directory.glob("*.json"):
        if stale.name not in generated:
            stale.unlink()
    paths = []
    for name, text in generated.items():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths


def differences(directory: Path = JSON_DIR) -> list[str]:
    """File names whose committed JSON is missing, outdated or no longer generated."""
    generated = generate()
    present = {p.name: p.read_text() for p in directory.glob("*.json")}
    return sorted(
        name for name in generated.keys() | present.keys()
        if generated.get(name) != present.get(name)
    )


def queries(dashboard_json: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel, rows' nested panels included,
    and the ``label_values`` queries of the variables."""
    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for t in panel.get("targets") or []:
                if t.get("expr"):
                    yield panel.get("title", ""), t["expr"]
            yield from walk(panel.get("panels") or [])

    yield from walk(dashboard_json.get("panels") or [])
    for variable in dashboard_json.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            yield f"variable {variable['name']}", variable["query"]

"""The Grafana dashboards: the committed JSON is exactly what the grafanalib sources generate,
the generator keeps dashboards/json/ in step (writes, removes stale files, --check), and the
dashboards are well formed (unique ids, panels on the grid, every query on our Prometheus
datasource variable). Their metric names are checked against a real /metrics output and
their queries run on a real Prometheus in tests/integration/serve/test_prometheus.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import dashboards
from tests.harness.tools import ROOT


def generated() -> dict[str, dict[str, Any]]:
    return {name: json.loads(text) for name, text in dashboards.generate().items()}


def test_committed_json_is_what_the_sources_generate() -> None:
    stale = dashboards.differences()
    assert not stale, f"dashboards/json/{stale} differ from their sources: run `make dashboards`"


def test_generator_rewrites_outdated_and_removes_stale_files(tmp_path: Path) -> None:
    dashboards.write(tmp_path)
    assert dashboards.differences(tmp_path) == []
    victim = tmp_path / "kafka-monitor-groups.json"
    victim.write_text(victim.read_text().replace("Top 10", "Top 11"))
    (tmp_path / "old-dashboard.json").write_text("{}")
    assert dashboards.differences(tmp_path) == ["kafka-monitor-groups.json", "old-dashboard.json"]
    dashboards.write(tmp_path)
    assert dashboards.differences(tmp_path) == []
    assert not (tmp_path / "old-dashboard.json").exists()


def test_check_command_passes_on_the_committed_json() -> None:
    result = subprocess.run([sys.executable, "-m", "dashboards", "--check"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_the_issue_s_dashboards_exist() -> None:
    titles = {d["uid"]: d["title"] for d in generated().values()}
    assert titles == {
        "kafka-monitor-groups": "Kafka consumer groups",
        "kafka-monitor-group": "Kafka consumer group",
        "kafka-monitor-cluster": "Kafka cluster health",
        "kafka-monitor-canary": "Kafka canary",
        "kafka-monitor-mirrors": "Kafka mirrors",
        "kafka-monitor-self": "kafka-monitor itself",
    }
    for name, board in generated().items():
        assert name == f"{board['uid']}.json"


@pytest.mark.parametrize("name", sorted(dashboards.BUILDERS))
def test_dashboard_is_well_formed(name: str) -> None:
    board = generated()[name]
    panels = board["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        area = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
        if panel["type"] == "text":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]
        for t in panel["targets"]:
            assert t["expr"].strip() and t["datasource"] == panel["datasource"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert "cluster" in variables or "mirror" in variables
    used = " ".join(expr for _, expr in dashboards.queries(board))
    for var in variables:
        if var != "datasource":
            assert f"${var}" in used, f"variable {var} is never used"


def test_group_dashboard_lists_partition_owners() -> None:
    """Issue 8: the one-group dashboard shows who owns each partition, from the owner info
    series of the selected group, as a table of topic, partition, host, client id, member id."""
    board = generated()["kafka-monitor-group.json"]
    (owners,) = [p for p in board["panels"] if p["title"] == "Owners"]
    assert owners["type"] == "table"
    (t,) = owners["targets"]
    assert t["expr"] == 'kafka_monitor_partition_owner_info{cluster="$cluster",group="$group"}'
    assert t["format"] == "table" and t["instant"]
    (organize,) = [x["options"] for x in owners["transformations"] if x["id"] == "organize"]
    columns = sorted(organize["indexByName"], key=organize["indexByName"].get)
    assert [organize["renameByName"][c] for c in columns] == [
        "Topic", "Partition", "Member host", "Client id", "Member id"]
    assert {"Value", "cluster", "group", "__name__", "Time"} <= {
        k for k, v in organize["excludeByName"].items() if v}

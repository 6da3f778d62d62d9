"""``kafka-monitor pipeline score`` on the labelled recording kept in the repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.pipeline.labels import load_labels
from monitor.pipeline.scorecard import BURROW, DEFAULTS, PAGES

SAMPLE = Path(__file__).resolve().parents[3] / "bench" / "data" / "alert-quality-sample"
RECORDING, LABELS = SAMPLE / "recording", SAMPLE / "labels.yaml"


def score_json(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict]:
    assert main(["pipeline", "score", "--recording", str(RECORDING), "--labels", str(LABELS),
                 "--format", "json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_sample_is_scored_under_every_rule_set(capsys: pytest.CaptureFixture[str]) -> None:
    rows = score_json(capsys)
    labels = load_labels(LABELS)
    scenarios = {g.scenario for g in labels.groups} | {"all"}
    incidents = sum(len(g.windows) for g in labels.groups)
    by_set: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_set.setdefault(row["rule_set"], {})[row["scenario"]] = row
    assert {DEFAULTS, BURROW, PAGES} <= set(by_set) and len(by_set) == 6
    for cells in by_set.values():
        assert set(cells) == scenarios
        assert cells["all"]["incidents"] == incidents
    # The kept faults are ones the defaults catch, without a false alarm: a rule change that
    # loses one of them, or cries wolf on the sample's burst, shows here.
    ours = by_set[DEFAULTS]["all"]
    assert ours["recall"] == 1.0 and ours["false_alarms"] == 0
    assert ours["diagnosed"] == incidents


def test_a_configuration_is_scored_by_its_file_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "burrowish.yaml"
    config.write_text("clusters: [{name: local, bootstrap_servers: ['127.0.0.1:9092']}]\n"
                      "evaluator: {warn_lag_gaps: 0}\n")
    rows = score_json(capsys, "--config", str(config), "--plot", str(tmp_path / "s.png"))
    assert {r["rule_set"] for r in rows} >= {"config burrowish", BURROW}
    assert DEFAULTS not in {r["rule_set"] for r in rows}
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_the_markdown_table_is_the_default_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "score", "--recording", str(RECORDING),
                 "--labels", str(LABELS)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| scenario | defaults | Burrow's rules |")
    assert "| **recall** |" in out


def test_bad_labels_and_a_missing_recording_are_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "labels.yaml"
    bad.write_text("groups: [{cluster: c, group: g, start: 0, end: 10}]\n")
    with pytest.raises(SystemExit, match=r"labels.yaml: groups.0.scenario: Field required"):
        main(["pipeline", "score", "--recording", str(RECORDING), "--labels", str(bad)])
    with pytest.raises(SystemExit, match="no recording"):
        main(["pipeline", "score", "--recording", str(tmp_path), "--labels", str(LABELS)])

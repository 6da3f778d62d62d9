"""Label files: read, checked, and their errors name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.pipeline.labels import LabelError, Labels, load_labels

GOOD = """
version: 1
groups:
  - cluster: prod
    group: billing
    scenario: consumer gone
    start: 100
    end: 1000
    windows:
      - {fault: consumer gone, start: 200, end: 500, expect: [STOP], tolerate: [WARN]}
  - {cluster: prod, group: audit, scenario: healthy, start: 100, end: 1000}
"""


def test_a_label_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "labels.yaml"
    path.write_text(GOOD)
    labels = load_labels(path)
    assert [g.group for g in labels.groups] == ["billing", "audit"]
    w = labels.groups[0].windows[0]
    assert (w.start, w.end, w.expect, w.tolerate) == (200, 500, ["STOP"], ["WARN"])
    labels.dump(tmp_path / "again.yaml")
    assert load_labels(tmp_path / "again.yaml") == labels
    json_path = tmp_path / "labels.json"
    json_path.write_text(labels.model_dump_json())
    assert load_labels(json_path) == labels


@pytest.mark.parametrize(("change", "message"), [
    ("expect: [STOP]", "groups.0.windows.0.expect.0"),  # replaced below by a bad status
    ("start: 200, end: 500", "end is before start"),
    ("scenario: consumer gone", "groups.0.scenario"),
])
def test_bad_labels_name_the_key(tmp_path: Path, change: str, message: str) -> None:
    bad = {
        "expect: [STOP]": GOOD.replace("expect: [STOP]", "expect: [DEAD]"),
        "start: 200, end: 500": GOOD.replace("start: 200, end: 500", "start: 600, end: 500"),
        "scenario: consumer gone": GOOD.replace("    scenario: consumer gone\n", ""),
    }[change]
    path = tmp_path / "labels.yaml"
    path.write_text(bad)
    with pytest.raises(LabelError, match=message) as err:
        load_labels(path)
    assert str(path) in str(err.value)


def test_a_window_outside_its_group_and_a_group_labelled_twice_are_refused() -> None:
    with pytest.raises(ValueError, match=r"windows\[0\]\.start is outside"):
        Labels.model_validate({"groups": [{
            "cluster": "c", "group": "g", "scenario": "s", "start": 0, "end": 10,
            "windows": [{"fault": "f", "start": 20, "expect": ["STOP"]}]}]})
    with pytest.raises(ValueError, match="labelled twice"):
        Labels.model_validate({"groups": [
            {"cluster": "c", "group": "g", "scenario": "s", "start": 0, "end": 10}] * 2})


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(LabelError, match="cannot read"):
        load_labels(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("groups: [")
    with pytest.raises(LabelError, match="not valid YAML"):
        load_labels(tmp_path / "bad.yaml")

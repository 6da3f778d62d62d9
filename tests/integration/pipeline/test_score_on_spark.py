"""``kafka-monitor pipeline score --spark``: the same scores as the in-process replay, on the
labelled recording kept in the repository (Spark local[2])."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.cli import main

pytestmark = [pytest.mark.spark, pytest.mark.slow(60), pytest.mark.xdist_group("cpu")]

SAMPLE = Path(__file__).resolve().parents[3] / "bench" / "data" / "alert-quality-sample"


def test_scores_on_spark_equal_the_in_process_ones(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["pipeline", "score", "--recording", str(SAMPLE / "recording"),
            "--labels", str(SAMPLE / "labels.yaml"), "--format", "json"]
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)
    assert main([*args, "--spark", "--master", "local[2]"]) == 0
    spark = json.loads(capsys.readouterr().out)
    assert spark == local
    assert any(r["scenario"] == "all" and r["detected"] > 0 for r in local)

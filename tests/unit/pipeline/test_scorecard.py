"""The table and the plot from known scores, and Burrow's configuration."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from monitor.config import EvaluatorConfig, RecorderConfig
from monitor.evaluate.job import Evaluator, rule_options
from monitor.model.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    PartitionMetadata,
)
from monitor.pipeline.alarms import episodes_frame
from monitor.pipeline.labels import GroupLabels, Labels, Window
from monitor.pipeline.score import score
from monitor.pipeline.scorecard import (
    Thresholds,
    burrow_config,
    markdown_table,
    plot,
    rule_set_episodes,
)
from monitor.record.recorder import Recorder
from monitor.rules.status import RuleOptions
from monitor.store.store import Store

LABELS = Labels(groups=[
    GroupLabels(cluster="c", group="g", scenario="consumer gone", start=0.0, end=1000.0,
                windows=[Window(fault="gone", start=100.0, end=500.0, expect=["STOP"])]),
    GroupLabels(cluster="c", group="h", scenario="idle topic", start=0.0, end=1000.0),
])


def results() -> dict:
    good = episodes_frame({"cluster": ["c"], "group": ["g"], "status": ["STOP"],
                           "start": [130.0], "end": [520.0]})
    noisy = episodes_frame({"cluster": ["c", "c"], "group": ["g", "h"],
                            "status": ["ALERT", "ALERT"], "start": [400.0, 10.0],
                            "end": [math.nan, 70.0]})
    return score({"ours": good, "threshold": noisy}, LABELS)


def test_the_table_has_a_row_per_scenario_and_the_totals() -> None:
    table = markdown_table(results())
    lines = table.splitlines()
    assert lines[0] == "| scenario | ours | threshold |"
    assert lines[2] == "| consumer gone | 1/1 · 30s | 1/1 · 300s |"
    assert lines[3] == "| idle topic | quiet | **1 false** |"
    assert "| **recall** | 100% | 100% |" in lines
    assert "| **precision** | 100% | 50% |" in lines
    assert "| **right status named** | 1/1 | – |" in lines
    assert "| **time to clear, median / max** | 20s / 20s | never / never |" in lines


def test_the_plot_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "scores.png"
    plot(results(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_burrows_configuration_gives_burrows_rule_options() -> None:
    """Burrow's rules exactly; only the group status keeps STOP, STALL and REWIND apart
    (Burrow's ERR) so that the diagnosis can be compared."""
    burrow = dataclasses.replace(RuleOptions.burrow(), burrow_err=False)
    assert rule_options(burrow_config(EvaluatorConfig())) == burrow


def test_threshold_rule_sets_are_named_by_their_settings() -> None:
    assert list(Thresholds().rule_sets()) == [
        "lag > 1000 for 5m", "lag > 60s for 5m", "lag growing over 5m for 5m"]


# --------------------------------------------------------------------------- a hand-made recording

C, T0 = "sim", 1_700_000_000.0


def record(path: Path) -> None:
    """Two groups on one topic (log end +10/s), read from the offsets topic, commits every
    2 s, evaluated every 5 s (at s = 4.5, 9.5, ...): ``ok`` keeps up; ``stop`` commits its
    last offset at s = 40 and is gone."""
    store = Store(EvaluatorConfig())
    clock = iter(range(10**6))
    recorder = Recorder(RecorderConfig(enabled=True, path=path),
                        clock=lambda: T0 + next(clock))
    store.listeners.append(recorder.observe)
    now = T0
    evaluator = Evaluator(store, EvaluatorConfig(), freshness=lambda _c: now)
    parts = {"t": (PartitionMetadata(0, 0, (0,), (0,)),)}
    store.put_metadata(ClusterMetadata(C, T0, {0: "h:1"}, 0, parts))
    for s in range(0, 180):
        now = T0 + s
        end = 10 * s + 100
        store.put_broker_offsets(BrokerOffsets(C, now, ["t"], [0], [0], [end]))
        if s % 2 == 0:
            groups = ["ok", "stop"] if s <= 40 else ["ok"]
            n = len(groups)
            store.put_commits(CommitBatch(C, "offsets_topic", now, groups, ["t"] * n, [0] * n,
                                          [end] * n, [round(now * 1000)] * n,
                                          list(range(10 * s, 10 * s + n))))
        if s % 5 == 4:
            now += 0.5
            results = {C: evaluator.evaluate_cluster(C, now)}
            recorder.record_round(results, lambda _c, at=now: at)
    recorder.close()


def test_a_hand_made_recording_scores_as_burrows_bound_says(tmp_path: Path) -> None:
    """``stop``'s window holds 10 commits 2 s apart (a span of 18 s): it is STOP once its
    silence exceeds 18 s, i.e. at the first round after s = 58, s = 59.5: 19.5 s after its
    last commit, under both rule sets. ``ok`` never raises an alarm."""
    record(tmp_path)
    labels = Labels(groups=[
        GroupLabels(cluster=C, group="ok", scenario="healthy", start=T0 + 20, end=T0 + 180),
        GroupLabels(cluster=C, group="stop", scenario="gone", start=T0 + 20, end=T0 + 180,
                    windows=[Window(fault="gone", start=T0 + 40, expect=["STOP"])]),
    ])
    results = score(rule_set_episodes(tmp_path, labels), labels)
    for rule_set in ("defaults", "Burrow's rules"):
        gone = results[rule_set]["gone"]
        assert (gone.detected, gone.ttd, gone.diagnosed) == (1, [19.5], 1), rule_set
        assert results[rule_set]["all"].false_alarms == 0, rule_set
    # 1,000 records behind after 100 s, then 5 minutes: beyond the recording's end.
    assert results["lag > 1000 for 5m"]["gone"].detected == 0

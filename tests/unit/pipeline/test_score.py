"""The scorer on hand-made episodes whose scores are known in advance."""

from __future__ import annotations

import math

import pytest

from monitor.pipeline.alarms import ALERT, episodes_frame
from monitor.pipeline.labels import GroupLabels, Labels, Window
from monitor.pipeline.score import Totals, score, score_group


def episodes(*rows: tuple[str, float, float]) -> object:
    return episodes_frame({
        "cluster": ["c"] * len(rows), "group": ["g"] * len(rows),
        "status": [r[0] for r in rows], "start": [r[1] for r in rows],
        "end": [r[2] for r in rows],
    })


def group(*windows: Window, start: float = 0.0, end: float = 1000.0) -> GroupLabels:
    return GroupLabels(cluster="c", group="g", scenario="s", start=start, end=end,
                       windows=list(windows))


STOPPED = Window(fault="gone", start=100.0, end=500.0, expect=["STOP"], tolerate=["WARN"])


def test_a_fault_detected_late_and_cleared_after_its_end() -> None:
    s = score_group(episodes(("WARN", 130.0, 160.0), ("STOP", 160.0, 530.0)),
                    group(STOPPED))
    [incident] = s.incidents
    assert incident.detected and incident.diagnosed
    assert incident.ttd == 30.0
    assert incident.ttc == 30.0  # the alarm on at 500 went off at 530
    assert s.false_alarms == []
    assert s.alarms == 1 and s.true_alarms == 1  # WARN then STOP: one alarm
    assert s.wrong_seconds == 0.0
    # healthy: 0..100 and 530..1000
    assert s.healthy_seconds == pytest.approx(100.0 + 470.0)


def test_alarms_outside_every_window_are_false_and_touching_ones_count_once() -> None:
    s = score_group(episodes(("WARN", 10.0, 20.0), ("STALL", 20.0, 40.0),
                             ("STOP", 600.0, 650.0), ("WARN", 700.0, math.nan)),
                    group(STOPPED))
    assert s.false_alarms == [(10.0, 40.0), (600.0, 650.0), (700.0, 1000.0)]
    [incident] = s.incidents
    assert not incident.detected and incident.ttd is None and incident.ttc is None
    t = Totals()
    t.add(s)
    assert t.recall == 0.0 and t.precision == 0.0
    assert t.false_alarms == 3
    assert t.false_seconds == pytest.approx(30.0 + 50.0 + 300.0)
    # 380 false seconds in 600 healthy seconds: 380/60 min per 600/86400 day
    assert t.false_minutes_per_day == pytest.approx((380 / 60) / (600 / 86400))


def test_an_alarm_on_before_the_fault_is_false_until_it_starts_and_detects_at_once() -> None:
    s = score_group(episodes(("WARN", 80.0, 520.0)), group(STOPPED))
    [incident] = s.incidents
    assert incident.ttd == 0.0 and incident.ttc == 20.0
    assert incident.diagnosed is False  # WARN only: tolerated, but not the name of it
    assert s.false_alarms == [(80.0, 100.0)]
    assert s.true_alarms == 1


def test_a_wrong_status_is_counted_while_the_fault_is_still_detected() -> None:
    s = score_group(episodes(("REWIND", 200.0, 300.0), ("STOP", 300.0, 500.0)), group(STOPPED))
    [incident] = s.incidents
    assert incident.detected and incident.diagnosed and incident.ttd == 100.0
    assert incident.ttc == 0.0  # went off exactly at the end
    assert s.wrong_seconds == 100.0


def test_an_alarm_that_never_clears_and_a_fault_to_the_end() -> None:
    open_fault = Window(fault="gone", start=100.0, expect=["STOP"])
    s = score_group(episodes(("STOP", 150.0, math.nan)), group(open_fault))
    [incident] = s.incidents
    assert incident.ttd == 50.0 and incident.ttc is None  # no end: nothing to clear
    assert s.false_alarms == []
    s = score_group(episodes(("STOP", 150.0, math.nan)), group(STOPPED))
    assert s.incidents[0].ttc == math.inf
    assert s.false_alarms == []  # still the same alarm: slow to clear, not a new one


def test_alarms_without_a_status_detect_and_diagnose_nothing() -> None:
    s = score_group(episodes((ALERT, 400.0, 700.0)), group(STOPPED))
    [incident] = s.incidents
    assert incident.detected and incident.ttd == 300.0 and incident.diagnosed is None
    assert incident.ttc == 200.0 and s.false_alarms == []


def test_episodes_are_clipped_to_the_scored_span() -> None:
    s = score_group(episodes(("STOP", 0.0, 60.0), ("STOP", 990.0, 2000.0)),
                    group(start=50.0, end=1000.0))
    assert s.false_alarms == [(50.0, 60.0), (990.0, 1000.0)]
    assert s.healthy_seconds == 950.0


def test_totals_per_scenario_and_for_all() -> None:
    labels = Labels(groups=[
        group(STOPPED),
        GroupLabels(cluster="c", group="h", scenario="healthy", start=0.0, end=1000.0),
    ])
    frame = episodes_frame({
        "cluster": ["c", "c"], "group": ["g", "h"], "status": ["STOP", "WARN"],
        "start": [160.0, 300.0], "end": [510.0, 360.0],
    })
    results = score({"rules": frame}, labels)
    assert set(results["rules"]) == {"s", "healthy", "all"}
    all_ = results["rules"]["all"].as_dict()
    assert all_["incidents"] == 1 and all_["recall"] == 1.0
    assert all_["false_alarms"] == 1 and all_["precision"] == 0.5
    assert all_["ttd_median"] == 60.0 and all_["ttc_max"] == 10.0
    assert results["rules"]["healthy"].as_dict()["incidents"] == 0

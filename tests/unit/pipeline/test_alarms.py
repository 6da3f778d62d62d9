"""Rule sets over hand-made evaluations: when each alerts, known in advance."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from monitor.pipeline.alarms import (
    ALERT,
    lag_growing,
    lag_records,
    lag_seconds,
    prometheus_alerts,
    status_alarms,
)


def evals(statuses: list[str], lags: list[int], every: float = 10.0,
          lag_s: list[float] | None = None, group: str = "g") -> pd.DataFrame:
    n = len(statuses)
    return pd.DataFrame({
        "cluster": ["c"] * n, "group": [group] * n,
        "evaluated_at": [i * every for i in range(n)], "status": statuses,
        "lag_seconds": lag_s if lag_s is not None else [0.0] * n,
        "totallag": lags, "partitions": [1] * n,
    })


def rows(frame: pd.DataFrame) -> list[tuple[str, float, float]]:
    return [(s, a, b) for s, a, b in zip(frame["status"], frame["start"], frame["end"],
                                          strict=True)]


def test_status_alarms_are_the_stretches_of_each_alarm_status() -> None:
    e = evals(["OK", "WARN", "WARN", "STOP", "OK", "NOTFOUND", "REWIND"], [0] * 7)
    got = rows(status_alarms(e))
    assert got[:2] == [("WARN", 10.0, 30.0), ("STOP", 30.0, 40.0)]
    assert got[2][0] == "REWIND" and got[2][1] == 60.0 and math.isnan(got[2][2])


def test_a_threshold_fires_after_it_held_for_its_hold_and_clears_when_it_stops_holding() -> None:
    lags = [0, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 500, 2000, 2000]
    got = rows(lag_records(evals(["OK"] * 11, lags), above=1000, hold=40.0))
    # above from t=10 to t=80 (70 s, > 40): fires at 50, clears at 80; from 90 on: only 10 s.
    assert got == [(ALERT, 50.0, 80.0)]


def test_lag_seconds_threshold() -> None:
    e = evals(["OK"] * 6, [0] * 6, lag_s=[0.0, 90.0, 90.0, 90.0, 10.0, 90.0])
    assert rows(lag_seconds(e, above=60.0, hold=20.0)) == [(ALERT, 30.0, 40.0)]


def test_lag_growing_compares_with_the_lag_a_window_ago() -> None:
    # Lag grows from t=0 to t=60, then falls. over=20: at t=20..60 the lag is above its value
    # 20 s earlier; hold=20: fires at 40, clears at 70 (lower than at 50).
    lags = [0, 10, 20, 30, 40, 50, 60, 50, 40, 30]
    assert rows(lag_growing(evals(["OK"] * 10, lags), over=20.0, hold=20.0)) == [
        (ALERT, 40.0, 70.0)]


def test_lag_growing_is_per_group() -> None:
    e = pd.concat([evals(["OK"] * 5, [0, 10, 20, 30, 40], group="up"),
                   evals(["OK"] * 5, [40, 30, 20, 10, 0], group="down")])
    got = lag_growing(e, over=10.0, hold=10.0)
    assert set(got["group"]) == {"up"}


def test_prometheus_alerts_name_the_status_their_alert_names_and_only_lag_counts() -> None:
    pages = pd.DataFrame({
        "cluster": ["c", "c", "c"], "group": ["g", "g", "g"],
        "alertname": ["KafkaConsumerGroupStopped", "KafkaConsumerGroupLagSecondsHigh",
                      "KafkaConsumerGroupRebalanceStorm"],
        "start": [1.0, 2.0, 3.0], "end": [5.0, math.nan, 4.0],
    })
    got = prometheus_alerts(pages)
    assert list(got["status"]) == ["STOP", ALERT]
    assert got["end"].isna().tolist() == [False, True]


@pytest.mark.parametrize("rule", [lag_records, lag_seconds, lag_growing, status_alarms])
def test_no_evaluations_no_alarms(rule: object) -> None:
    assert callable(rule)
    assert len(rule(evals([], []))) == 0

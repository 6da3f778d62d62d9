"""Alarm rule sets over evaluations: when each would have alerted, as episodes per group.

An episode is a stretch of time a rule set alerts for one group: ``cluster``, ``group``,
``status`` (the status it names; ``ALERT`` for rules that name none, as threshold alerts),
``start`` and ``end`` (the first evaluation it no longer holds; NaN while still on at the end).

The rule sets operators use, over the same evaluations (one row per group and evaluation
round, :data:`monitor.record.rows.VERDICT_COLUMNS`):

* :func:`status_alarms` -- a lag evaluator's verdicts: every WARN, STALL, STOP or REWIND (the
  project's defaults and Burrow's rules, each from its own replay);
* :func:`lag_records` -- total lag above N records for T (how kafka_exporter users alert);
* :func:`lag_seconds` -- lag in seconds above S for T (how kafka-lag-exporter users alert);
* :func:`lag_growing` -- the lag higher than it was W ago, for T (a rate-of-change alert);
* :func:`prometheus_alerts` -- the alerts a real Prometheus fired from the shipped rules over
  the series the service exported (what pages people).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from monitor.pipeline.backtest import alerts, timelines

ALARM_STATUSES = ("WARN", "STALL", "STOP", "REWIND")
ALERT = "ALERT"
"""The status of an alarm that names no status (a threshold crossed)."""

EPISODE_COLUMNS = ("cluster", "group", "status", "start", "end")

PAGE_STATUS: Mapping[str, str] = {
    "KafkaConsumerGroupStopped": "STOP",
    "KafkaConsumerGroupStalled": "STALL",
    "KafkaConsumerGroupLagGrowing": "WARN",
}
"""The shipped alerts that name a status; the group's other alerts (lag seconds, records
lost, retention risk) are :data:`ALERT`."""

LAG_ALERTS = frozenset({*PAGE_STATUS, "KafkaConsumerGroupLagSecondsHigh",
                        "KafkaConsumerGroupRecordsLost", "KafkaConsumerGroupRetentionRisk"})
"""The shipped alerts about a group's consumption, the ones scored. A rebalance storm's alert
is about membership: it is right in a storm whatever the lag does, so it is not scored
against lag incidents."""

__all__ = [
    "ALARM_STATUSES",
    "ALERT",
    "EPISODE_COLUMNS",
    "LAG_ALERTS",
    "PAGE_STATUS",
    "episodes_frame",
    "lag_growing",
    "lag_records",
    "lag_seconds",
    "prometheus_alerts",
    "status_alarms",
]


def episodes_frame(columns: Mapping[str, Any] | None = None) -> Any:
    import pandas as pd

    data = columns or {n: [] for n in EPISODE_COLUMNS}
    frame = pd.DataFrame({n: data[n] for n in EPISODE_COLUMNS})
    return frame.astype({"cluster": object, "group": object, "status": object,
                         "start": "float64", "end": "float64"})


def _from_alerts(fired: Any) -> Any:
    return episodes_frame({
        "cluster": fired["cluster"].to_numpy(object), "group": fired["group"].to_numpy(object),
        "status": fired["status"].to_numpy(object), "start": fired["fired_at"].to_numpy(float),
        "end": fired["resolved_at"].to_numpy(float),
    })


def status_alarms(evals: Any, hold: float = 0.0,
                  statuses: tuple[str, ...] = ALARM_STATUSES) -> Any:
    """Each stretch of an alarm status, from the first evaluation that said it (plus ``hold``,
    if it held that long) to the first that said something else."""
    fired = alerts(timelines(evals), {s: hold for s in statuses})
    return _from_alerts(fired)


def _condition(evals: Any, holds: Any, hold: float) -> Any:
    """Episodes of :data:`ALERT` where ``holds`` (one bool per evaluation) stayed true for
    ``hold`` seconds, as a Prometheus alert with ``for: hold`` fires."""
    marked = evals.assign(status=np.where(np.asarray(holds, dtype=bool), ALERT, "OK"))
    return _from_alerts(alerts(timelines(marked), {ALERT: hold}))


def lag_records(evals: Any, above: int = 1000, hold: float = 300.0) -> Any:
    """``sum by (group) (lag) > above`` for ``hold`` (kafka_exporter's users' alert)."""
    return _condition(evals, evals["totallag"].to_numpy(np.int64) > above, hold)


def lag_seconds(evals: Any, above: float = 60.0, hold: float = 300.0) -> Any:
    """``max by (group) (lag_seconds) > above`` for ``hold`` (kafka-lag-exporter's users')."""
    return _condition(evals, evals["lag_seconds"].to_numpy(np.float64) > above, hold)


def lag_growing(evals: Any, over: float = 300.0, hold: float = 300.0) -> Any:
    """``delta(lag[over]) > 0`` for ``hold``: the lag is higher than ``over`` seconds ago (the
    latest evaluation at or before then) and above zero, continuously for ``hold``."""
    import pandas as pd

    if len(evals) == 0:
        return episodes_frame()
    e = evals.sort_values(["cluster", "group", "evaluated_at"], kind="stable")
    e = e.reset_index(drop=True)
    before = e[["cluster", "group", "evaluated_at", "totallag"]].rename(
        columns={"totallag": "lag_before", "evaluated_at": "at_before"})
    probe = e[["cluster", "group", "evaluated_at"]].assign(
        at_before=e["evaluated_at"] - over).reset_index()
    joined = pd.merge_asof(
        probe.sort_values("at_before"), before.sort_values("at_before"), on="at_before",
        by=["cluster", "group"], direction="backward",
    ).set_index("index").sort_index()
    lag = e["totallag"].to_numpy(np.float64)
    earlier = joined["lag_before"].to_numpy(np.float64)  # NaN: no evaluation that long ago
    with np.errstate(invalid="ignore"):
        holds = (lag > earlier) & (lag > 0)
    return _condition(e, holds, hold)


def prometheus_alerts(pages: Any) -> Any:
    """Episodes from the alerts about consumption (:data:`LAG_ALERTS`) Prometheus fired
    (columns ``cluster``, ``group``, ``alertname``, ``start``, ``end``), each named by the
    status its alert names."""
    pages = pages[pages["alertname"].isin(LAG_ALERTS)]
    names = pages["alertname"].to_numpy(object)
    status = np.array([PAGE_STATUS.get(n, ALERT) for n in names], dtype=object)
    return episodes_frame({
        "cluster": pages["cluster"].to_numpy(object), "group": pages["group"].to_numpy(object),
        "status": status, "start": pages["start"].to_numpy(float),
        "end": pages["end"].to_numpy(float),
    })

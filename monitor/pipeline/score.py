"""Alert quality: alarm episodes (:mod:`monitor.pipeline.alarms`) scored against labelled
incidents (:mod:`monitor.pipeline.labels`).

Per group and incident window:

* **detected**: an alarm was on at some time inside the window; **time to detect** is from the
  window's start to the first such alarm (0 when one was already on);
* **diagnosed** (rule sets that name statuses): an alarm inside the window named one of the
  window's ``expect`` statuses; **wrong** seconds: alarms inside it that named a status neither
  expected nor tolerated;
* **time to clear** (windows that end before the group's end): from the window's end until the
  alarm that was on then went off (0 if none was on; infinite if it never did).

Everything else is healthy time: an alarm there is a **false alarm** (touching alarms count
once, whatever statuses they name). Per rule set and scenario: recall (detected / incidents),
false alarms, false-alarm minutes per day of healthy time, precision (alarms that overlapped an
incident / all alarms), time to detect and to clear (median and maximum).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monitor.pipeline.alarms import ALERT
from monitor.pipeline.labels import GroupLabels, Labels

__all__ = ["GroupScore", "IncidentScore", "Totals", "score", "score_group", "summary_rows"]

Interval = tuple[float, float]


@dataclass(frozen=True, slots=True)
class IncidentScore:
    fault: str
    detected: bool
    ttd: float | None  # s from the window's start to the first alarm
    ttc: float | None  # s from the window's end until the alarm went off; None: not measured
    diagnosed: bool | None  # None: the rule set names no status


@dataclass(slots=True)
class GroupScore:
    labels: GroupLabels
    incidents: list[IncidentScore] = field(default_factory=list)
    false_alarms: list[Interval] = field(default_factory=list)
    healthy_seconds: float = 0.0
    alarms: int = 0  # merged alarm stretches
    true_alarms: int = 0  # of which overlapped an incident window
    wrong_seconds: float = 0.0


def _merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Union of intervals; touching ones (end == next start) become one."""
    out: list[Interval] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _subtract(interval: Interval, holes: Sequence[Interval]) -> list[Interval]:
    """What of ``interval`` lies outside every hole (holes merged and sorted)."""
    parts: list[Interval] = []
    s, e = interval
    for hs, he in holes:
        if he <= s or hs >= e:
            continue
        if hs > s:
            parts.append((s, hs))
        s = max(s, he)
        if s >= e:
            break
    if s < e:
        parts.append((s, e))
    return parts


def score_group(episodes: Any, g: GroupLabels) -> GroupScore:
    """Score one group's alarm episodes (rows of an episodes frame for this group)."""
    out = GroupScore(g)
    starts = episodes["start"].to_numpy(np.float64)
    ends = np.nan_to_num(episodes["end"].to_numpy(np.float64), nan=math.inf)
    statuses = episodes["status"].to_numpy(object)
    keep = (ends > g.start) & (starts < g.end)
    eps = [(max(float(s), g.start), min(float(e), g.end), str(st))
           for s, e, st in zip(starts[keep], ends[keep], statuses[keep], strict=True)]
    stretches = _merge((s, e) for s, e, _ in eps)
    named = any(st != ALERT for _, _, st in eps)

    windows = [(w, w.start, g.window_end(w)) for w in g.windows]
    clearing: list[Interval] = []
    for w, ws, we in windows:
        inside = [(s, e, st) for s, e, st in eps if s <= we and e > ws]
        if not inside:
            out.incidents.append(IncidentScore(w.fault, False, None, None,
                                               False if named else None))
            continue
        ttd = max(min(s for s, _, _ in inside), ws) - ws
        ttc: float | None = None
        if w.end is not None and we < g.end:
            active = [st for st in stretches if st[0] <= we < st[1]]
            if not active:
                ttc = 0.0
            else:
                s_end = active[0][1]
                ttc = math.inf if s_end >= g.end else s_end - we  # on until the end
                clearing.append((we, s_end))
        diagnosed = any(st in w.expect for _, _, st in inside) if named else None
        allowed = {*w.expect, *w.tolerate, ALERT}
        out.wrong_seconds += sum(min(e, we) - max(s, ws) for s, e, st in inside
                                 if st not in allowed)
        out.incidents.append(IncidentScore(w.fault, True, ttd, ttc, diagnosed))

    excused = _merge([(ws, we) for _, ws, we in windows] + clearing)
    for stretch in stretches:
        out.alarms += 1
        if any(stretch[0] <= we and stretch[1] > ws for _, ws, we in windows):
            out.true_alarms += 1
        out.false_alarms += _subtract(stretch, excused)
    out.false_alarms = _merge(out.false_alarms)
    out.healthy_seconds = sum(e - s for s, e in _subtract((g.start, g.end), excused))
    return out


@dataclass(slots=True)
class Totals:
    """One cell of the table: a rule set's scores over some groups."""

    incidents: int = 0
    detected: int = 0
    diagnosed: int = 0
    named: bool = False
    ttd: list[float] = field(default_factory=list)
    ttc: list[float] = field(default_factory=list)
    alarms: int = 0
    true_alarms: int = 0
    false_alarms: int = 0
    false_seconds: float = 0.0
    healthy_seconds: float = 0.0
    wrong_seconds: float = 0.0

    def add(self, s: GroupScore) -> None:
        for i in s.incidents:
            self.incidents += 1
            self.detected += i.detected
            if i.diagnosed is not None:
                self.named = True
                self.diagnosed += i.diagnosed
            if i.ttd is not None:
                self.ttd.append(i.ttd)
            if i.ttc is not None:
                self.ttc.append(i.ttc)
        self.alarms += s.alarms
        self.true_alarms += s.true_alarms
        self.false_alarms += len(s.false_alarms)
        self.false_seconds += sum(e - b for b, e in s.false_alarms)
        self.healthy_seconds += s.healthy_seconds
        self.wrong_seconds += s.wrong_seconds

    @property
    def recall(self) -> float | None:
        return self.detected / self.incidents if self.incidents else None

    @property
    def precision(self) -> float | None:
        counted = self.true_alarms + self.false_alarms
        return self.true_alarms / counted if counted else None

    @property
    def false_minutes_per_day(self) -> float | None:
        if self.healthy_seconds <= 0:
            return None
        return (self.false_seconds / 60.0) / (self.healthy_seconds / 86400.0)

    def as_dict(self) -> dict[str, Any]:
        def stat(values: list[float], fn: Any) -> float | None:
            return float(fn(values)) if values else None

        return {
            "incidents": self.incidents, "detected": self.detected,
            "diagnosed": self.diagnosed if self.named else None,
            "recall": self.recall, "precision": self.precision,
            "false_alarms": self.false_alarms,
            "false_alarm_minutes_per_day": self.false_minutes_per_day,
            "healthy_hours": self.healthy_seconds / 3600.0,
            "ttd_median": stat(self.ttd, np.median), "ttd_max": stat(self.ttd, max),
            "ttc_median": stat(self.ttc, np.median), "ttc_max": stat(self.ttc, max),
            "wrong_status_seconds": self.wrong_seconds if self.named else None,
        }


def score(episodes: Mapping[str, Any], labels: Labels) -> dict[str, dict[str, Totals]]:
    """Per rule set (the keys of ``episodes``) and scenario, plus ``"all"``: the totals."""
    results: dict[str, dict[str, Totals]] = {}
    for name, frame in episodes.items():
        by_group = {key: part for key, part in frame.groupby(["cluster", "group"], sort=False)}
        empty = frame.iloc[0:0]
        cells: dict[str, Totals] = {}
        for g in labels.groups:
            s = score_group(by_group.get((g.cluster, g.group), empty), g)
            cells.setdefault(g.scenario, Totals()).add(s)
            cells.setdefault("all", Totals()).add(s)
        results[name] = cells
    return results


def summary_rows(results: Mapping[str, Mapping[str, Totals]]) -> list[dict[str, Any]]:
    """Flat rows (rule set, scenario, scores) for JSON and tables."""
    return [{"rule_set": name, "scenario": scenario, **totals.as_dict()}
            for name, cells in results.items() for scenario, totals in cells.items()]

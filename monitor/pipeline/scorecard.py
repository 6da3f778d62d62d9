"""A recording scored under several rule sets side by side: the table and the plot.

:func:`rule_set_episodes` replays the recording under each evaluator configuration (the
project's defaults, Burrow's rules, the user's ``--config`` files), derives the threshold and
rate-of-change alerts from the defaults' evaluations (lag and lag in seconds do not depend on
the rules), and reads the alerts a real Prometheus fired during the recording when the
recording holds them (``prometheus-alerts.json``, written by ``bench/alert_quality.py``: one
object per alert episode with ``cluster``, ``group``, ``alertname``, ``start``, ``end``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.config import EvaluatorConfig
from monitor.pipeline import alarms
from monitor.pipeline.backtest import read_local, replay_frame
from monitor.pipeline.labels import Labels
from monitor.pipeline.score import Totals

PAGES_FILE = "prometheus-alerts.json"
DEFAULTS = "defaults"
BURROW = "Burrow's rules"
PAGES = "shipped alerts (Prometheus)"

__all__ = [
    "BURROW",
    "DEFAULTS",
    "PAGES",
    "PAGES_FILE",
    "Thresholds",
    "burrow_config",
    "labelled_keys",
    "markdown_table",
    "plot",
    "read_pages",
    "rule_set_episodes",
]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The threshold and rate alerts scored beside the verdicts (the common choices)."""

    lag_records: int = 1000
    lag_seconds: float = 60.0
    growing_over: float = 300.0
    hold: float = 300.0

    def rule_sets(self) -> dict[str, Callable[[Any], Any]]:
        m = _minutes
        return {
            f"lag > {self.lag_records} for {m(self.hold)}":
                lambda e: alarms.lag_records(e, self.lag_records, self.hold),
            f"lag > {self.lag_seconds:g}s for {m(self.hold)}":
                lambda e: alarms.lag_seconds(e, self.lag_seconds, self.hold),
            f"lag growing over {m(self.growing_over)} for {m(self.hold)}":
                lambda e: alarms.lag_growing(e, self.growing_over, self.hold),
        }


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else f"{seconds:g}s"


def burrow_config(base: EvaluatorConfig) -> EvaluatorConfig:
    """``base`` with every improvement over Burrow off: Burrow's rules exactly
    (:meth:`monitor.rules.status.RuleOptions.burrow`), statuses kept unmapped so they can be
    compared with the defaults'."""
    return base.model_copy(update={
        "idle_aware_stop": False, "marker_tolerance": 0, "young_window_stop": 0.0,
        "warn_lag_gaps": 0.0, "gone_stop": 0.0, "live_member_stall": False,
        "burrow_status": False,
    })


def read_pages(recording: str | Path) -> Any | None:
    """The Prometheus alert episodes kept with a recording, or None if it has none."""
    import pandas as pd

    path = Path(recording) / PAGES_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    frame = pd.DataFrame(data, columns=["cluster", "group", "alertname", "start", "end"])
    frame["end"] = frame["end"].astype("float64")  # null: still firing at the end
    return alarms.prometheus_alerts(frame)


def labelled_keys(labels: Labels) -> list[str]:
    """``cluster``, a unit separator (U+001F), ``group`` of each labelled group (pandas drops
    a NUL in string concatenation): the keys the scores read."""
    return [f"{g.cluster}\x1f{g.group}" for g in labels.groups]


def _labelled(evals: Any, labels: Labels) -> Any:
    return evals[(evals["cluster"] + "\x1f" + evals["group"]).isin(labelled_keys(labels))]


def rule_set_episodes(
    recording: str | Path, labels: Labels, *, configs: Mapping[str, EvaluatorConfig] | None = None,
    thresholds: Thresholds = Thresholds(), evaluate: Callable[[EvaluatorConfig], Any] | None = None,
) -> dict[str, Any]:
    """Alarm episodes per rule set (name -> episodes frame) over one recording.

    ``configs``: evaluator configurations to score (default: the project's defaults); the
    first is the base of Burrow's and gives the evaluations the thresholds read.
    ``evaluate``: config -> evaluations frame (default: replayed here at the recorded rounds;
    the command passes a Spark backtest for large recordings)."""
    if evaluate is None:
        rows = read_local(recording)

        def evaluate(config: EvaluatorConfig) -> Any:
            return replay_frame(rows, config)

    configs = dict(configs or {DEFAULTS: EvaluatorConfig()})
    base_name, base = next(iter(configs.items()))
    out: dict[str, Any] = {}
    base_evals = None
    for name, config in [*configs.items(), (BURROW, burrow_config(base))]:
        evals = _labelled(evaluate(config), labels)
        if base_evals is None:
            base_evals = evals
        out[name] = alarms.status_alarms(evals)
    assert base_evals is not None
    for name, rule in thresholds.rule_sets().items():
        out[name] = rule(base_evals)
    pages = read_pages(recording)
    if pages is not None:
        out[PAGES] = pages
    return out


# ---------------------------------------------------------------------- the table and the plot


def _secs(v: float | None) -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return "never"
    return f"{v:.0f}s" if v < 600 else f"{v / 60:.0f}m"


def _cell(t: Totals) -> str:
    d = t.as_dict()
    parts = []
    if t.incidents:
        parts.append(f"{t.detected}/{t.incidents}")
        if t.ttd:
            parts.append(_secs(d["ttd_median"]))
    if t.false_alarms:
        parts.append(f"**{t.false_alarms} false**")
    elif not t.incidents:
        parts.append("quiet")
    return " · ".join(parts)


def markdown_table(results: Mapping[str, Mapping[str, Totals]],
                   scenarios: list[str] | None = None) -> str:
    """Scenarios down, rule sets across: detected/incidents · median time to detect · false
    alarms; then the totals: recall, precision, false-alarm minutes per day, time to detect
    (median / max), time to clear (median / max)."""
    names = list(results)
    order = scenarios or [s for s in next(iter(results.values())) if s != "all"]
    head = "| scenario | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n"
    body = "".join(
        f"| {s} | " + " | ".join(_cell(results[n][s]) for n in names) + " |\n" for s in order
    )
    summary = [
        ("recall", lambda d: "–" if d["recall"] is None else f"{d['recall']:.0%}"),
        ("precision", lambda d: "–" if d["precision"] is None else f"{d['precision']:.0%}"),
        ("false alarms", lambda d: str(d["false_alarms"])),
        ("false-alarm min/day",
         lambda d: "–" if d["false_alarm_minutes_per_day"] is None
         else f"{d['false_alarm_minutes_per_day']:.0f}"),
        ("right status named",
         lambda d: "–" if d["diagnosed"] is None else f"{d['diagnosed']}/{d['detected']}"),
        ("time to detect, median / max",
         lambda d: f"{_secs(d['ttd_median'])} / {_secs(d['ttd_max'])}"),
        ("time to clear, median / max",
         lambda d: f"{_secs(d['ttc_median'])} / {_secs(d['ttc_max'])}"),
    ]
    totals = {n: results[n]["all"].as_dict() for n in names}
    foot = "".join(
        f"| **{label}** | " + " | ".join(fmt(totals[n]) for n in names) + " |\n"
        for label, fmt in summary
    )
    return head + body + foot


def plot(results: Mapping[str, Mapping[str, Totals]], path: str | Path,
         scenarios: list[str] | None = None) -> None:
    """Time to detect per scenario and rule set (missed: a cross at the top), false alarms
    per rule set; a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    order = scenarios or [s for s in next(iter(results.values()))
                          if s != "all" and results[names[0]][s].incidents]
    order = [s for s in order if results[names[0]][s].incidents]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.5),
                                      gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(1, len(names))
    top = 1.0
    for n in names:
        for s in order:
            t = results[n][s]
            if t.ttd:
                top = max(top, max(t.ttd))
    for i, n in enumerate(names):
        xs, ys, missed = [], [], []
        for j, s in enumerate(order):
            t = results[n][s]
            x = j + (i - (len(names) - 1) / 2) * width
            if t.ttd:
                xs.append(x)
                ys.append(float(max(t.ttd)))
            if t.detected < t.incidents:
                missed.append(x)
        left.bar(xs, ys, width, label=n, color=f"C{i}")
        if missed:
            left.scatter(missed, [top * 1.15] * len(missed), marker="x", color=f"C{i}")
    left.set_xticks(range(len(order)), order, rotation=30, ha="right")
    left.set_ylabel("slowest time to detect (s); x = a fault missed")
    left.set_title("Time to detect, per fault")
    left.legend(fontsize=8)
    false = [results[n]["all"].false_alarms for n in names]
    bars = right.barh(range(len(names)), false, color=[f"C{i}" for i in range(len(names))])
    right.bar_label(bars, fontsize=8, padding=2)
    right.set_yticks(range(len(names)), names, fontsize=8)
    right.invert_yaxis()
    right.set_xlabel("false alarms (whole suite)")
    right.set_title("False alarms")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Building blocks shared by the dashboards: the Prometheus datasource and cluster variables,
status value mappings, and a small grid layout.

grafanalib emits Grafana 8+ panel JSON; what it models awkwardly (table field mappings,
overrides, transformations) is passed through ``extraJson`` here, in one place, so the
dashboard modules read as a list of panels and queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attr
from grafanalib.core import (
    Dashboard,
    GridPos,
    Panel,
    Stat,
    Target,
    Template,
    Templating,
    Time,
    TimeSeries,
)

DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}
TAGS = ["kafka", "kafka-monitor"]

# kafka_monitor_group_status codes (monitor.rules.Status) and their colours.
GROUP_STATUS = [
    ("NOTFOUND", "purple"),
    ("OK", "green"),
    ("WARN", "yellow"),
    ("REWIND", "orange"),
    ("STALL", "red"),
    ("STOP", "dark-red"),
]
# kafka_monitor_cluster_status codes (monitor.evaluate.cluster_health.STATUS_LEVEL).
CLUSTER_STATUS = [("OK", "green"), ("WARN", "yellow"), ("ERR", "red")]


def value_mappings(codes: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Grafana value mappings turning a status code (its index) into its word and colour."""
    return [{
        "type": "value",
        "options": {
            str(code): {"text": word, "color": color, "index": code}
            for code, (word, color) in enumerate(codes)
        },
    }]


def steps(*pairs: tuple[float | None, str]) -> list[dict[str, Any]]:
    """Threshold steps: ``(None, "green"), (0.2, "yellow")`` = green below 0.2, yellow above."""
    return [{"value": value, "color": color} for value, color in pairs]


def target(
    expr: str, legend: str = "", ref: str = "A", *, instant: bool = False, table: bool = False
) -> Target:
    """A Prometheus query. ``table`` makes an instant query in table format (one row per
    series, labels as columns), as the status tables need."""
    return Target(
        expr=expr,
        legendFormat=legend,
        refId=ref,
        instant=instant or table,
        format="table" if table else "time_series",
        datasource=DATASOURCE,
        intervalFactor=1,
    )


def stat(
    title: str, expr: str, *, thresholds: list[dict[str, Any]], legend: str = "",
    unit: str = "none", description: str | None = None,
    mappings: list[dict[str, Any]] | None = None, graph_mode: str = "none",
    color_mode: str = "value", text_mode: str = "auto",
) -> Stat:
    """A single-value panel showing the query's latest value."""
    return Stat(
        title=title, dataSource=DATASOURCE, reduceCalc="lastNotNull", graphMode=graph_mode,
        colorMode=color_mode, textMode=text_mode, format=unit, description=description,
        targets=[target(expr, legend)], thresholds=thresholds, mappings=mappings or [],
    )


def series(
    title: str,
    queries: Sequence[tuple[str, str]],
    unit: str = "none",
    description: str = "",
    calcs: Sequence[str] = ("lastNotNull", "max"),
    **extra: Any,
) -> TimeSeries:
    """A time-series panel of ``(expr, legend)`` queries (refIds A, B, ...), its legend a
    table on the right; ``extra`` goes to grafanalib's ``TimeSeries`` (e.g. thresholds)."""
    return TimeSeries(
        title=title, dataSource=DATASOURCE, unit=unit, description=description,
        targets=[target(expr, legend, chr(ord("A") + i))
                 for i, (expr, legend) in enumerate(queries)],
        legendDisplayMode="table", legendPlacement="right", legendCalcs=list(calcs),
        **extra,
    )


def datasource_variable() -> Template:
    return Template(
        name="datasource", label="Data source", query="prometheus", type="datasource",
        default="Prometheus",
    )


def query_variable(
    name: str, query: str, *, label: str, multi: bool = True, include_all: bool = True
) -> Template:
    """A variable filled from ``label_values(...)``; refreshed when the time range changes so
    new clusters and groups appear without reloading."""
    return Template(
        name=name, label=label, query=query, dataSource=DATASOURCE, multi=multi,
        includeAll=include_all, allValue=".*" if include_all else None, refresh=2,
        default="$__all" if include_all else None,
    )


def cluster_variable() -> Template:
    return query_variable(
        "cluster", "label_values(kafka_monitor_group_status, cluster)", label="Cluster"
    )


def layout(rows: Sequence[tuple[int, Sequence[tuple[int, Panel]]]]) -> list[Panel]:
    """Place panels on Grafana's 24-column grid: each row is (height, [(width, panel), ...]),
    rows stacked top to bottom. Panel ids follow reading order, so they stay stable when the
    generator runs again."""
    panels: list[Panel] = []
    y = 0
    for height, row in rows:
        x = 0
        for width, panel in row:
            panel.gridPos = GridPos(h=height, w=width, x=x, y=y)
            panel.id = len(panels) + 1
            panels.append(panel)
            x += width
        if x > 24:
            raise ValueError(f"row at y={y} is {x} columns wide (max 24)")
        y += height
    return panels


def dashboard(
    uid: str, title: str, description: str, templates: Sequence[Template], panels: list[Panel],
    links: Sequence[dict[str, Any]] = (),
) -> Dashboard:
    return Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=TAGS,
        timezone="browser",
        refresh="30s",
        time=Time("now-3h", "now"),
        templating=Templating(list=[datasource_variable(), *templates]),
        panels=panels,
        links=list(links),
    )


def dashboard_link(title: str, uid: str, *, keep_vars: bool = True) -> dict[str, Any]:
    """A link in the dashboard's header to another of ours, carrying the variables."""
    return {
        "title": title, "type": "link", "url": f"/d/{uid}", "icon": "dashboard",
        "keepTime": True, "includeVars": keep_vars, "targetBlank": False, "tags": [],
        "asDropdown": False, "tooltip": "",
    }


@attr.s
class _BarGauge(Panel):
    """Grafana 8+ bar gauge (grafanalib's ``BarGauge`` still writes the Grafana 6
    ``fieldOptions`` form): the last value of each series as a horizontal bar, for top-N
    lists."""

    unit: str = attr.ib(default="short")
    mappings: list[dict[str, Any]] = attr.ib(factory=list)

    def to_json_data(self) -> dict[str, Any]:
        return self.panel_json({  # type: ignore[no-any-return]
            "type": "bargauge",
            "fieldConfig": {
                "defaults": {"unit": self.unit, "min": 0, "mappings": self.mappings,
                             "color": {"mode": "thresholds"}},
                "overrides": [],
            },
            "options": {
                "displayMode": "gradient",
                "orientation": "horizontal",
                "showUnfilled": True,
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
        })


def bar_gauge(
    title: str, targets: list[Target], unit: str, thresholds: list[dict[str, Any]],
    description: str = "",
) -> Panel:
    """A :class:`_BarGauge` (typed entry point: mypy cannot see the attrs fields it inherits
    from grafanalib's untyped ``Panel``)."""
    fields: dict[str, Any] = {"title": title, "dataSource": DATASOURCE, "targets": targets,
                              "unit": unit, "thresholds": thresholds,
                              "description": description}
    return _BarGauge(**fields)

"""Consumer groups overview: how many groups are in each status, which are worst (lag in
seconds and in offsets), and a status table linking each group to its detail dashboard.

Built on the group-level series (``kafka_monitor_group_*``, ``kafka_consumergroup_group_*``),
which the exporter writes in both of its forms, so it works with
``exporter.partition_series: false`` too.
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Stat, Table, TimeSeries

from dashboards.common import (
    DATASOURCE,
    GROUP_STATUS,
    bar_gauge,
    cluster_variable,
    dashboard,
    dashboard_link,
    layout,
    stat,
    steps,
    target,
    value_mappings,
)

UID = "kafka-monitor-groups"
GROUP_UID = "kafka-monitor-group"  # consumer_group.UID, repeated to avoid a cycle
SEL = 'cluster=~"$cluster"'


def _count(status: str, color: str) -> Stat:
    return Stat(
        title=status, dataSource=DATASOURCE, reduceCalc="lastNotNull", graphMode="none",
        colorMode="background",
        description=f"Groups whose status is {status} (kafka_monitor_group_status_state).",
        targets=[target(
            f'sum(kafka_monitor_group_status_state{{{SEL},status="{status}"}}) or vector(0)'
        )],
        thresholds=steps((None, "green"), (1, color)) if status != "OK" else steps(
            (None, "green")),
    )


def _stat(title: str, expr: str, unit: str, description: str, thresholds: list[dict[str, object]],
          ) -> Stat:
    return stat(title, expr, thresholds=thresholds, unit=unit, description=description,
                graph_mode="area")


def _status_table() -> Table:
    """One row per group: status (coloured word), lag, lag seconds, members, Kafka's state,
    stale flag; the group name links to the group's dashboard."""
    queries = [
        ("A", f"kafka_monitor_group_status{{{SEL}}}"),
        ("B", f"kafka_consumergroup_group_sum_lag{{{SEL}}}"),
        ("C", f"kafka_consumergroup_group_max_lag_seconds{{{SEL}}}"),
        ("D", f"kafka_consumergroup_members{{{SEL}}}"),
        ("E", f"kafka_monitor_group_stale{{{SEL}}}"),
        ("F", f"kafka_monitor_group_info{{{SEL}}}"),
    ]
    link = (f"/d/{GROUP_UID}?var-datasource=${{datasource}}&var-cluster=${{__data.fields.cluster}}"
            "&var-group=${__value.raw}&${__url_time_range}")

    def override(name: str, *props: dict[str, object]) -> dict[str, object]:
        return {"matcher": {"id": "byName", "options": name}, "properties": list(props)}

    return Table(
        title="Groups", dataSource=DATASOURCE, filterable=True,
        description="Every group of the selected clusters, worst first. Stale: the monitor "
        "could not read the group's offsets recently and holds its last verdict.",
        targets=[target(expr, ref=ref, table=True) for ref, expr in queries],
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True, "__name__": True, "instance": True,
                                  "job": True, "Value #F": True, "pod": True,
                                  "namespace": True, "service": True, "endpoint": True},
                "indexByName": {"cluster": 0, "group": 1, "Value #A": 2, "Value #C": 3,
                                "Value #B": 4, "Value #D": 5, "state": 6, "Value #E": 7},
                "renameByName": {"Value #A": "Status", "Value #B": "Lag (offsets)",
                                 "Value #C": "Lag (seconds)", "Value #D": "Members",
                                 "Value #E": "Stale", "state": "Kafka state"},
            }},
        ],
        sortBy=[],
        extraJson={
            "options": {"sortBy": [{"displayName": "Status", "desc": True}]},
            "fieldConfig": {"overrides": [
                override("Status", {"id": "mappings", "value": value_mappings(GROUP_STATUS)},
                         {"id": "custom.displayMode", "value": "color-background"}),
                override("Lag (seconds)", {"id": "unit", "value": "s"}),
                override("Lag (offsets)", {"id": "unit", "value": "short"}),
                override("Stale", {"id": "mappings", "value": [{
                    "type": "value", "options": {"0": {"text": "", "index": 0},
                                                 "1": {"text": "stale", "color": "orange",
                                                       "index": 1}}}]},
                         {"id": "custom.displayMode", "value": "color-text"}),
                override("group", {"id": "links", "value": [
                    {"title": "Group detail", "url": link}]}),
            ]},
        },
    )


def build() -> Dashboard:
    panels = layout([
        (4, [
            (3, _stat("Groups", f"count(kafka_monitor_group_status{{{SEL}}}) or vector(0)",
                      "none", "Groups the monitor evaluates.", steps((None, "blue")))),
            (3, _count("OK", "green")),
            (3, _count("WARN", "yellow")),
            (3, _count("STALL", "red")),
            (3, _count("STOP", "dark-red")),
            (3, _stat("Stale groups", f"sum(kafka_monitor_group_stale{{{SEL}}}) or vector(0)",
                      "none", "Groups whose offsets could not be read recently.",
                      steps((None, "green"), (1, "orange")))),
            (3, _stat("Total lag", f"sum(kafka_consumergroup_group_sum_lag{{{SEL}}})",
                      "short", "Lag in offsets summed over every group.",
                      steps((None, "blue")))),
            (3, _stat("Worst lag", f"max(kafka_consumergroup_group_max_lag_seconds{{{SEL}}})",
                      "s", "The largest lag in seconds of any group.",
                      steps((None, "green"), (60, "yellow"), (300, "red")))),
        ]),
        (12, [(24, _status_table())]),
        (9, [
            (12, bar_gauge(
                "Top 10 groups by lag (seconds)", unit="s",
                description="How long ago the newest record each group has committed was "
                "written (largest partition).",
                targets=[target(
                    f"topk(10, kafka_consumergroup_group_max_lag_seconds{{{SEL}}})",
                    "{{cluster}} / {{group}}", instant=True)],
                thresholds=steps((None, "green"), (60, "yellow"), (300, "red")))),
            (12, bar_gauge(
                "Top 10 groups by lag (offsets)", unit="short",
                description="Records not yet consumed, summed over the group's partitions.",
                targets=[target(f"topk(10, kafka_consumergroup_group_sum_lag{{{SEL}}})",
                                "{{cluster}} / {{group}}", instant=True)],
                thresholds=steps((None, "blue")))),
        ]),
        (9, [
            (12, TimeSeries(
                title="Lag in seconds, top 10 groups", dataSource=DATASOURCE, unit="s",
                targets=[target(
                    f"topk(10, kafka_consumergroup_group_max_lag_seconds{{{SEL}}})",
                    "{{cluster}} / {{group}}")],
                legendDisplayMode="table", legendPlacement="right",
                legendCalcs=["lastNotNull", "max"])),
            (12, TimeSeries(
                title="Lag in offsets, top 10 groups", dataSource=DATASOURCE, unit="short",
                targets=[target(f"topk(10, kafka_consumergroup_group_sum_lag{{{SEL}}})",
                                "{{cluster}} / {{group}}")],
                legendDisplayMode="table", legendPlacement="right",
                legendCalcs=["lastNotNull", "max"])),
        ]),
        (8, [
            (24, TimeSeries(
                title="Groups by status", dataSource=DATASOURCE, unit="none",
                description="How many groups were in each status over time.",
                targets=[target(
                    f"sum by (status) (kafka_monitor_group_status_state{{{SEL}}})",
                    "{{status}}")],
                stacking={"mode": "normal", "group": "A"}, fillOpacity=40, drawStyle="line",
                overrides=[
                    {"matcher": {"id": "byName", "options": word},
                     "properties": [{"id": "color",
                                     "value": {"mode": "fixed", "fixedColor": color}}]}
                    for word, color in GROUP_STATUS
                ])),
        ]),
    ])
    return dashboard(
        UID, "Kafka consumer groups",
        "Every consumer group's status (Burrow's rules), lag in seconds and in offsets.",
        [cluster_variable()], panels,
        links=[dashboard_link("Group detail", GROUP_UID),
               dashboard_link("Cluster health", "kafka-monitor-cluster")],
    )

"""One consumer group in detail: its status and Kafka state, members, status over time per
topic and per partition, lag per partition in offsets and seconds, consume vs produce rates,
who owns each partition now, its state timeline and rebalances, and its retention risk (lead,
time to loss, records lost).

Per-partition panels (the owners table too) need ``exporter.partition_series: true`` (the
default); the per-topic panels work in both forms.
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Stat, StateTimeline, Table, TimeSeries

from dashboards.common import (
    DATASOURCE,
    GROUP_STATUS,
    dashboard,
    dashboard_link,
    layout,
    query_variable,
    series,
    stat,
    steps,
    target,
    value_mappings,
)

UID = "kafka-monitor-group"
SEL = 'cluster="$cluster",group="$group"'


def _stat(title: str, expr: str, unit: str = "none", *, legend: str = "",
          mappings: list[dict[str, object]] | None = None,
          thresholds: list[dict[str, object]] | None = None, text_mode: str = "auto",
          color_mode: str = "value") -> Stat:
    return stat(title, expr, thresholds=thresholds or steps((None, "blue")), legend=legend,
                unit=unit, mappings=mappings, color_mode=color_mode, text_mode=text_mode)


def _timeline(title: str, queries: list[tuple[str, str]], description: str) -> StateTimeline:
    return StateTimeline(
        title=title, dataSource=DATASOURCE, description=description,
        targets=[target(expr, legend, chr(ord("A") + i))
                 for i, (expr, legend) in enumerate(queries)],
        mappings=value_mappings(GROUP_STATUS),
        colorMode="fixed", showValue="never", mergeValues=True, rowHeight=0.8,
        extraJson={"fieldConfig": {"defaults": {"color": {"mode": "fixed",
                                                          "fixedColor": "green"}}}},
    )


RETENTION_RISK = [("OK", "green"), ("WARN", "orange"), ("LOST", "red")]


def _state_timeline() -> StateTimeline:
    """One row per Kafka state the group was in (the state set's 1s)."""
    return StateTimeline(
        title="Group state over time", dataSource=DATASOURCE,
        description="Kafka's state of the group (Stable, PreparingRebalance, "
        "CompletingRebalance, Empty, Dead, ...), one row per state, filled while the group is "
        "in it: rebalances show as blips out of Stable.",
        targets=[target(f"kafka_consumergroup_state{{{SEL}}} == 1", "{{state}}")],
        mappings=[{"type": "value", "options": {"1": {"text": "in state", "index": 0}}}],
        colorMode="fixed", showValue="never", mergeValues=True, rowHeight=0.8,
        extraJson={"fieldConfig": {"defaults": {"color": {"mode": "fixed",
                                                          "fixedColor": "blue"}}}},
    )


def _owners_table() -> Table:
    """The group's partitions and their owners now, one row per partition, from
    ``kafka_monitor_partition_owner_info`` (empty while the group has no live members)."""
    return Table(
        title="Owners", dataSource=DATASOURCE, filterable=True,
        description="Who owns each partition now: the member's host, client id and member id "
        "(Kafka's consumer id). Empty while the group has no members. Needs "
        "exporter.partition_series; the HTTP API lists the same owners "
        "(/v3/kafka/<cluster>/consumer/<group>/lag).",
        targets=[target(f"kafka_monitor_partition_owner_info{{{SEL}}}", table=True)],
        transformations=[
            {"id": "organize", "options": {
                "excludeByName": {"Time": True, "Value": True, "__name__": True,
                                  "cluster": True, "group": True, "instance": True,
                                  "job": True, "pod": True, "namespace": True,
                                  "service": True, "endpoint": True},
                "indexByName": {"topic": 0, "partition": 1, "member_host": 2, "client_id": 3,
                                "consumer_id": 4},
                "renameByName": {"topic": "Topic", "partition": "Partition",
                                 "member_host": "Member host", "client_id": "Client id",
                                 "consumer_id": "Member id"},
            }},
        ],
        sortBy=[],
        extraJson={"options": {"sortBy": [{"displayName": "Topic", "desc": False}]}},
    )


def build() -> Dashboard:
    panels = layout([
        (4, [
            (4, _stat("Status", f"kafka_monitor_group_status{{{SEL}}}",
                      mappings=value_mappings(GROUP_STATUS), color_mode="background",
                      thresholds=steps((None, "transparent")))),
            (4, _stat("Kafka state", f"kafka_monitor_group_info{{{SEL}}}", legend="{{state}}",
                      text_mode="name")),
            (4, _stat("Members", f"kafka_consumergroup_members{{{SEL}}}",
                      thresholds=steps((None, "red"), (1, "green")))),
            (4, _stat("Lag (offsets)", f"kafka_consumergroup_group_sum_lag{{{SEL}}}", "short")),
            (4, _stat("Lag (seconds)", f"kafka_consumergroup_group_max_lag_seconds{{{SEL}}}",
                      "s", thresholds=steps((None, "green"), (60, "yellow"), (300, "red")))),
            (4, _stat("Stale", f"kafka_monitor_group_stale{{{SEL}}}",
                      mappings=[{"type": "value", "options": {
                          "0": {"text": "current", "color": "green", "index": 0},
                          "1": {"text": "stale", "color": "orange", "index": 1}}}],
                      thresholds=steps((None, "green"), (1, "orange")))),
        ]),
        (6, [
            (24, _timeline(
                "Status over time",
                [(f"kafka_monitor_group_status{{{SEL}}}", "group"),
                 (f"kafka_monitor_group_topic_status{{{SEL}}}", "{{topic}}")],
                "The group's status (top row), then each topic's worst partition.")),
        ]),
        (8, [
            (24, _timeline(
                "Partition status over time",
                [(f"kafka_monitor_partition_status{{{SEL}}}", "{{topic}} [{{partition}}]")],
                "Each partition's status (needs exporter.partition_series).")),
        ]),
        (9, [
            (12, series("Lag per partition (seconds)",
                         [(f"kafka_consumergroup_group_lag_seconds{{{SEL}}}",
                           "{{topic}} [{{partition}}]")], "s",
                         "How long ago the log end was at the committed offset.")),
            (12, series("Lag per partition (offsets)",
                         [(f"kafka_consumergroup_group_lag{{{SEL}}}",
                           "{{topic}} [{{partition}}]")], "short")),
        ]),
        (8, [
            (12, series("Lag per topic (seconds)",
                         [(f"kafka_consumergroup_group_topic_max_lag_seconds{{{SEL}}}",
                           "{{topic}}")], "s", "The topic's worst partition.")),
            (12, series("Lag per topic (offsets)",
                         [(f"kafka_consumergroup_group_topic_sum_lag{{{SEL}}}",
                           "{{topic}}")], "short")),
        ]),
        (8, [
            (12, TimeSeries(
                title="Consumed vs produced (records/s)", dataSource=DATASOURCE, unit="short",
                description="Commit progress of the group against the growth of the log end "
                "of the partitions it reads: consumption below production means growing lag.",
                targets=[
                    target(f"sum by (topic) (rate(kafka_consumergroup_group_offset{{{SEL}}}"
                           "[$__rate_interval]))", "consumed {{topic}}", "A"),
                    target('sum by (topic) (rate(kafka_topic_partition_current_offset'
                           '{cluster="$cluster"}[$__rate_interval]) and on (cluster, topic, '
                           f"partition) kafka_consumergroup_group_offset{{{SEL}}})",
                           "produced {{topic}}", "B"),
                ],
                legendDisplayMode="table", legendPlacement="bottom",
                legendCalcs=["lastNotNull", "mean"])),
            (12, TimeSeries(
                title="Members", dataSource=DATASOURCE, unit="none",
                targets=[target(f"kafka_consumergroup_members{{{SEL}}}", "members")])),
        ]),
        (8, [
            (12, series("Lag velocity and time to catch up",
                         [(f"kafka_consumergroup_group_lag_velocity{{{SEL}}}",
                           "lag velocity (records/s)"),
                          (f"kafka_consumergroup_group_time_to_catch_up_seconds{{{SEL}}}",
                           "time to catch up (s)")], "short",
                         "Records/s the lag grows (> 0) or shrinks (< 0), production minus "
                         "consumption over the commit window; while it shrinks, the seconds "
                         "until the slowest lagging partition has caught up at this pace.")),
            (6, _stat("Hot partitions", f"kafka_consumergroup_group_hot_partitions{{{SEL}}}",
                      thresholds=steps((None, "green"), (1, "orange")))),
            (6, _stat("Lag seconds method", f"kafka_monitor_group_lag_seconds_source{{{SEL}}}",
                      legend="{{source}}", text_mode="name")),
        ]),
        (10, [
            (24, _owners_table()),
        ]),
        (4, [
            (6, _stat("Rebalances (window)", f"kafka_monitor_group_rebalance_storm{{{SEL}}}",
                      mappings=[{"type": "value", "options": {
                          "0": {"text": "no storm", "color": "green", "index": 0},
                          "1": {"text": "STORM", "color": "red", "index": 1}}}],
                      thresholds=steps((None, "green"), (1, "red")))),
            (6, _stat("Rebalances (total)", f"kafka_consumergroup_rebalances_total{{{SEL}}}")),
            (6, _stat("Retention risk", f"kafka_monitor_group_retention_risk{{{SEL}}}",
                      mappings=value_mappings(RETENTION_RISK), color_mode="background",
                      thresholds=steps((None, "transparent")))),
            (6, _stat("Records lost to retention",
                      f"kafka_consumergroup_group_sum_lost_records{{{SEL}}}", "short",
                      thresholds=steps((None, "green"), (1, "red")))),
        ]),
        (7, [
            (12, _state_timeline()),
            (12, series("Rebalances",
                         [(f"increase(kafka_consumergroup_rebalances_total{{{SEL}}}"
                           "[$__rate_interval])", "rebalances"),
                          (f"increase(kafka_consumergroup_rebalancing_seconds_total{{{SEL}}}"
                           "[$__rate_interval])", "seconds rebalancing"),
                          (f"increase(kafka_consumergroup_member_changes_total{{{SEL}}}"
                           "[$__rate_interval])", "members {{change}}")],
                         "none", "Rebalances completed, time spent rebalancing and members "
                         "joining or leaving, per interval. More than rebalance.storm_count "
                         "rebalances within rebalance.storm_window is a storm.")),
        ]),
        (8, [
            (12, series("Lead per partition (records retention keeps behind the group)",
                         [(f"kafka_consumergroup_group_lead{{{SEL}}}",
                           "{{topic}} [{{partition}}]")], "short",
                         "Committed offset minus log-start offset: a lead shrinking to 0 "
                         "means retention is about to delete records the group has not read "
                         "(negative: it has).")),
            (12, series("Time to loss per partition",
                         [(f"kafka_consumergroup_group_time_to_loss_seconds{{{SEL}}}",
                           "{{topic}} [{{partition}}]")], "s",
                         "Estimated time until retention deletes the partition's next unread "
                         "record, where the log start outpaces the group; below "
                         "retention.warn (1 h) the group is at risk.",
                         thresholds=steps((None, "red"), (3600, "green")),
                         thresholdsStyleMode="line")),
        ]),
    ])
    return dashboard(
        UID, "Kafka consumer group",
        "One consumer group: status per partition over time, lag in offsets and seconds.",
        [
            query_variable("cluster", "label_values(kafka_monitor_group_status, cluster)",
                           label="Cluster", multi=False, include_all=False),
            query_variable("group",
                           'label_values(kafka_monitor_group_status{cluster="$cluster"}, group)',
                           label="Group", multi=False, include_all=False),
        ],
        panels,
        links=[dashboard_link("All groups", "kafka-monitor-groups")],
    )

"""Mirrors (``mirrors[]`` in the configuration, :mod:`monitor.ingest.mirror`): replication latency
and loss from the mirror canary, source-minus-destination log-end lag, records counted per
window at both ends, the mirroring group's status and lag, and each source group's failover
plan (ready, not verified, records read again).

Metric names are ``kafka_mirror_*`` (monitor/ingest/mirror.py) and ``kafka_mirror_canary_*``
(monitor/ingest/canary/metrics.py).
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Stat

from dashboards.common import (
    GROUP_STATUS,
    dashboard,
    dashboard_link,
    layout,
    query_variable,
    series,
    stat,
    steps,
    value_mappings,
)

UID = "kafka-monitor-mirrors"
SEL = 'mirror=~"$mirror"'
WINDOW = "$__rate_interval"


def _stat(title: str, expr: str, unit: str, thresholds: list[dict[str, object]],
          description: str, mappings: list[dict[str, object]] | None = None) -> Stat:
    return stat(title, expr, thresholds=thresholds, legend="{{mirror}}", unit=unit,
                description=description, mappings=mappings, color_mode="background")


def build() -> Dashboard:
    panels = layout([
        (5, [
            (6, _stat("Mirroring group", f"kafka_mirror_group_status{{{SEL}}}", "none",
                      steps((None, "transparent")), "Status of the mirror's consumer group "
                      "on the source.", value_mappings(GROUP_STATUS))),
            (6, _stat("Replication latency p99",
                      f"histogram_quantile(0.99, sum by (mirror, le) (rate("
                      f"kafka_mirror_canary_end_to_end_latency_seconds_bucket{{{SEL}}}[5m])))",
                      "s", steps((None, "green"), (10, "orange"), (30, "red")),
                      "Canary records produced at the source, consumed at the destination.")),
            (6, _stat("Canary delivered",
                      f"min by (mirror) (kafka_mirror_canary_consume_availability{{{SEL}}})",
                      "percentunit", steps((None, "red"), (0.99, "orange"), (0.999, "green")),
                      "Canary records that reached the destination in time.")),
            (6, _stat("Records missing at destination",
                      f"sum by (mirror) (kafka_mirror_window_difference_sum{{{SEL}}})", "short",
                      steps((None, "green"), (1, "orange")),
                      "Source minus destination records over every closed window since the "
                      "monitor started (negative: duplicated).")),
        ]),
        (8, [
            (12, series("Replication latency", [
                (f"histogram_quantile({q}, sum by (mirror, le) (rate("
                 f"kafka_mirror_canary_end_to_end_latency_seconds_bucket{{{SEL}}}[{WINDOW}])))",
                 f"{{{{mirror}}}} p{round(q * 100, 1):g}") for q in (0.5, 0.99, 0.999)], "s")),
            (12, series("Mirroring group lag", [
                (f"kafka_mirror_group_lag_seconds{{{SEL}}}", "{{mirror}} seconds"),
            ], "s", "The mirror's consumer group on the source, in seconds.")),
        ]),
        (8, [
            (12, series("Log-end lag (source - destination)", [
                (f"kafka_mirror_topic_lag{{{SEL}}}", "{{mirror}} / {{topic}}")], "short")),
            (12, series("Records per window", [
                (f"kafka_mirror_window_source_records{{{SEL}}}", "{{mirror}} / {{topic}} source"),
                (f"kafka_mirror_window_destination_records{{{SEL}}}",
                 "{{mirror}} / {{topic}} destination"),
                (f"kafka_mirror_window_difference{{{SEL}}}",
                 "{{mirror}} / {{topic}} difference"),
            ], "short", "Records written at each end in the last closed window; the "
                "difference is loss (positive) or duplication (negative).")),
        ]),
        (8, [
            (12, series("Mirror canary availability", [
                (f"kafka_mirror_canary_consume_availability{{{SEL}}}",
                 "{{mirror}} consume [{{partition}}]"),
                (f"kafka_mirror_canary_produce_availability{{{SEL}}}",
                 "{{mirror}} produce [{{partition}}]"),
            ], "percentunit")),
            (12, series("Log-end lag per partition", [
                (f"kafka_mirror_lag{{{SEL}}}", "{{mirror}} / {{topic}} [{{partition}}]")],
                "short")),
        ]),
        (8, [  # failover: each source group's plan on the destination (monitor/ingest/failover)
            (8, _stat("Groups ready to fail over",
                      f"sum by (mirror) (kafka_mirror_failover_ready{{{SEL}}}) / count by "
                      f"(mirror) (kafka_mirror_failover_ready{{{SEL}}})", "percentunit",
                      steps((None, "red"), (0.99, "orange"), (1, "green")),
                      "Share of the source groups whose failover plan is verified: the "
                      "destination holds their first unconsumed record after the translated "
                      "offsets.")),
            (8, series("Failover plan not verified", [
                (f"1 - kafka_mirror_failover_ready{{{SEL}}}", "{{mirror}} / {{group}}"),
                (f"kafka_mirror_failover_state{{{SEL},state=\"would_skip\"}}",
                 "{{mirror}} / {{group}} would skip"),
            ], "short", "1 while a group's plan is not verified (mirror behind, unverifiable "
                "or would skip).")),
            (8, series("Failover: records read again", [
                (f"kafka_mirror_failover_reread_records{{{SEL}}}", "{{mirror}} / {{group}}"),
            ], "short", "Records a failover would read a second time (the margin's cost).")),
        ]),
    ])
    return dashboard(
        UID, "Kafka mirrors",
        "MirrorMaker pipelines: replication latency and loss, lag between the ends.",
        [query_variable("mirror", "label_values(kafka_mirror_group_status, mirror)",
                        label="Mirror")],
        panels,
        links=[dashboard_link("Canary", "kafka-monitor-canary", keep_vars=False)],
    )

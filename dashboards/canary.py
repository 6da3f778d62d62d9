"""Canary probes (``monitor/ingest/canary/``): produce and consume availability, produce and
end-to-end latency percentiles, records lost and duplicated, per cluster and
per broker (the leader of the canary partition when the record was sent).

Metric names are ``kafka_canary_*`` from :mod:`monitor.ingest.canary.metrics`.
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Stat

from dashboards.common import (
    dashboard,
    dashboard_link,
    layout,
    query_variable,
    series,
    stat,
    steps,
)

UID = "kafka-monitor-canary"
SEL = 'cluster=~"$cluster"'
WINDOW = "$__rate_interval"


def _quantiles(metric: str, by: str, legend: str) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{SEL}}}"
             f"[{WINDOW}])))", f"{legend} p{round(q * 100, 1):g}") for q in (0.5, 0.99, 0.999)]


def _stat(title: str, expr: str, unit: str, thresholds: list[dict[str, object]],
          description: str) -> Stat:
    return stat(title, expr, thresholds=thresholds, legend="{{cluster}}", unit=unit,
                description=description, graph_mode="area")


def build() -> Dashboard:
    availability = steps((None, "red"), (0.99, "orange"), (0.999, "green"))
    panels = layout([
        (5, [
            (6, _stat("Produce availability",
                      f"sum by (cluster) (rate(kafka_canary_produce_acks_total{{{SEL}}}[5m])) / "
                      f"sum by (cluster) (rate(kafka_canary_produce_attempts_total{{{SEL}}}"
                      "[5m]))", "percentunit", availability,
                      "Canary records acknowledged / sent, last 5 minutes.")),
            (6, _stat("Consume availability",
                      f"min by (cluster) (kafka_canary_consume_availability{{{SEL}}})",
                      "percentunit", availability,
                      "Consumed / (consumed + lost) over the probe's window, worst partition.")),
            (6, _stat("Records lost (1h)",
                      f"sum by (cluster) (increase(kafka_canary_records_lost_total{{{SEL}}}[1h]))",
                      "short", steps((None, "green"), (1, "red")),
                      "Acknowledged records not consumed within canary.loss_sla.")),
            (6, _stat("Records duplicated (1h)",
                      f"sum by (cluster) (increase(kafka_canary_records_duplicated_total"
                      f"{{{SEL}}}[1h]))", "short", steps((None, "green"), (1, "orange")),
                      "Canary records consumed more than once.")),
        ]),
        (8, [
            (12, series("Produce availability per broker", [
                (f"sum by (cluster, broker) (rate(kafka_canary_produce_acks_total{{{SEL}}}"
                 f"[{WINDOW}])) / sum by (cluster, broker) (rate("
                 f"kafka_canary_produce_attempts_total{{{SEL}}}[{WINDOW}]))",
                 "{{cluster}} / broker {{broker}}")], "percentunit",
                "Per leader broker: a broker failing its partitions shows here first.")),
            (12, series("Consume availability per partition", [
                (f"kafka_canary_consume_availability{{{SEL}}}",
                 "{{cluster}} [{{partition}}]")], "percentunit")),
        ]),
        (8, [
            (12, series("End-to-end latency (send to consume)", _quantiles(
                "kafka_canary_end_to_end_latency_seconds", "cluster", "{{cluster}}"), "s")),
            (12, series("Produce latency (send to ack)", _quantiles(
                "kafka_canary_produce_latency_seconds", "cluster", "{{cluster}}"), "s")),
        ]),
        (8, [
            (12, series("Lost and duplicated", [
                (f"sum by (cluster) (increase(kafka_canary_records_lost_total{{{SEL}}}"
                 f"[{WINDOW}]))", "{{cluster}} lost"),
                (f"sum by (cluster) (increase(kafka_canary_records_duplicated_total{{{SEL}}}"
                 f"[{WINDOW}]))", "{{cluster}} duplicated"),
            ], "short")),
            (6, series("Brokers covered", [
                (f"kafka_canary_broker_covered{{{SEL}}}", "{{cluster}} / broker {{broker}}")],
                "none", "1 when the broker leads a canary partition (probed).")),
            (6, series("Commit latency p99", [
                (f"histogram_quantile(0.99, sum by (cluster, le) (rate("
                 f"kafka_canary_commit_latency_seconds_bucket{{{SEL}}}[{WINDOW}])))",
                 "{{cluster}}")], "s", "The canary group's offset commits.")),
        ]),
    ])
    return dashboard(
        UID, "Kafka canary",
        "Synthetic records produced and consumed on every broker: availability, latency, "
        "loss and duplicates.",
        [query_variable("cluster", "label_values(kafka_canary_produce_attempts_total, cluster)",
                        label="Cluster")],
        panels,
        links=[dashboard_link("Cluster health", "kafka-monitor-cluster"),
               dashboard_link("Mirrors", "kafka-monitor-mirrors", keep_vars=False)],
    )

"""Broker and cluster health: the cluster's status, controllers, under-replicated and offline
partitions, request-handler idle against the 20 % / 10 % thresholds, leader and replica skew,
brokers missing, and traffic.

Cluster-level figures from metadata (``kafka_monitor_cluster_*``) work without JMX (managed
clusters); per-broker ones (``kafka_broker_*``) need ``clusters[].jmx``.
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Stat, Table, TimeSeries

from dashboards.common import (
    CLUSTER_STATUS,
    DATASOURCE,
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

UID = "kafka-monitor-cluster"
SEL = 'cluster=~"$cluster"'
BROKER = "{{cluster}} / broker {{broker}}"


def _stat(title: str, expr: str, thresholds: list[dict[str, object]], description: str,
          mappings: list[dict[str, object]] | None = None, unit: str = "none") -> Stat:
    return stat(title, expr, thresholds=thresholds, legend="{{cluster}}", unit=unit,
                description=description, mappings=mappings, color_mode="background")


def _series(title: str, queries: list[tuple[str, str]], unit: str = "none",
            description: str = "", thresholds: list[dict[str, object]] | None = None,
            ) -> TimeSeries:
    """With the thresholds drawn as lines, when there are any."""
    return series(
        title, queries, unit, description, calcs=["lastNotNull"],
        thresholds=thresholds or steps((None, "green")),
        thresholdsStyleMode="line" if thresholds else "off",
    )


def _broker_table() -> Table:
    queries = [
        ("A", f"kafka_monitor_broker_in_metadata{{{SEL}}}"),
        ("B", f"kafka_monitor_broker_suspect{{{SEL}}}"),
        ("C", f"kafka_monitor_broker_jmx_up{{{SEL}}}"),
        ("D", f"kafka_monitor_broker_leaders{{{SEL}}}"),
        ("E", f"kafka_monitor_broker_replicas{{{SEL}}}"),
        ("F", f"kafka_broker_request_handler_avg_idle_ratio{{{SEL}}}"),
    ]
    yes_no = [{"type": "value", "options": {"0": {"text": "no", "index": 0},
                                            "1": {"text": "yes", "index": 1}}}]

    def override(name: str, *props: dict[str, object]) -> dict[str, object]:
        return {"matcher": {"id": "byName", "options": name}, "properties": list(props)}

    return Table(
        title="Brokers", dataSource=DATASOURCE,
        description="Suspect: the broker missing from the ISR of every under-replicated "
        "partition (the likely culprit).",
        targets=[target(expr, ref=ref, table=True) for ref, expr in queries],
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True, "__name__": True, "instance": True,
                                  "job": True, "pod": True, "namespace": True,
                                  "service": True, "endpoint": True},
                "indexByName": {"cluster": 0, "broker": 1},
                "renameByName": {"Value #A": "In metadata", "Value #B": "Suspect",
                                 "Value #C": "JMX up", "Value #D": "Leaders",
                                 "Value #E": "Replicas", "Value #F": "Request handler idle"},
            }},
        ],
        extraJson={"fieldConfig": {"overrides": [
            override("In metadata", {"id": "mappings", "value": yes_no}),
            override("JMX up", {"id": "mappings", "value": yes_no}),
            override("Suspect", {"id": "mappings", "value": yes_no}),
            override("Request handler idle", {"id": "unit", "value": "percentunit"}),
        ]}},
    )


def build() -> Dashboard:
    idle = steps((None, "red"), (0.1, "orange"), (0.2, "green"))
    panels = layout([
        (4, [
            (4, _stat("Cluster status", f"kafka_monitor_cluster_status{{{SEL}}}",
                      steps((None, "green"), (1, "yellow"), (2, "red")),
                      "The monitor's verdict on the cluster (reasons: /v3/kafka/<cluster>/"
                      "health).", value_mappings(CLUSTER_STATUS))),
            (4, _stat("Active controllers",
                      f"kafka_monitor_cluster_active_controllers{{{SEL}}}",
                      steps((None, "red"), (1, "green"), (2, "red")),
                      "Summed over brokers answering JMX; exactly 1 is healthy.")),
            (4, _stat("Under-replicated",
                      f"kafka_monitor_cluster_under_replicated_partitions{{{SEL}}}",
                      steps((None, "green"), (1, "orange")),
                      "Partitions whose ISR lacks an assigned replica (metadata).")),
            (4, _stat("Offline partitions",
                      f"kafka_monitor_cluster_offline_partitions{{{SEL}}}",
                      steps((None, "green"), (1, "red")),
                      "Partitions without a leader (metadata).")),
            (4, _stat("Brokers missing",
                      f"count by (cluster) (kafka_monitor_broker_in_metadata{{{SEL}}} == 0) "
                      f"or sum by (cluster) (kafka_monitor_broker_in_metadata{{{SEL}}}) * 0",
                      steps((None, "green"), (1, "red")),
                      "Brokers holding replicas but absent from metadata.")),
            (4, _stat("Non-preferred leaders",
                      f"kafka_monitor_cluster_non_preferred_leaders{{{SEL}}}",
                      steps((None, "green"), (1, "yellow")),
                      "Partitions not led by their preferred replica (run a preferred "
                      "leader election).")),
        ]),
        (8, [
            (12, _series("Request handler idle",
                         [(f"kafka_broker_request_handler_avg_idle_ratio{{{SEL}}}", BROKER)],
                         "percentunit", "Below 20 %: near saturation; below 10 %: saturated.",
                         idle)),
            (12, _series("Network processor idle",
                         [(f"kafka_broker_network_processor_avg_idle_ratio{{{SEL}}}",
                           BROKER)], "percentunit", thresholds=idle)),
        ]),
        (8, [
            (8, _series("Under-replicated partitions", [
                (f"kafka_monitor_cluster_under_replicated_partitions{{{SEL}}}",
                 "{{cluster}} (metadata)"),
                (f"kafka_broker_under_replicated_partitions{{{SEL}}}", BROKER),
            ])),
            (8, _series("Offline partitions", [
                (f"kafka_monitor_cluster_offline_partitions{{{SEL}}}",
                 "{{cluster}} (metadata)"),
                (f"kafka_broker_offline_partitions{{{SEL}}}", BROKER + " (controller)"),
            ])),
            (8, _series("Active controller", [
                (f"kafka_broker_active_controller_count{{{SEL}}}", BROKER),
            ], description="1 on the broker that is the controller.")),
        ]),
        (8, [
            (8, _series("Leaders per broker",
                        [(f"kafka_monitor_broker_leaders{{{SEL}}}", BROKER)])),
            (8, _series("Replicas per broker",
                        [(f"kafka_monitor_broker_replicas{{{SEL}}}", BROKER)])),
            (8, _series("Skew (max/mean - 1)", [
                (f"kafka_monitor_cluster_leader_skew{{{SEL}}}", "{{cluster}} leaders"),
                (f"kafka_monitor_cluster_replica_skew{{{SEL}}}", "{{cluster}} replicas"),
            ], "percentunit", "0 when every live broker has the same share.")),
        ]),
        (8, [
            (12, _series("Bytes in / out", [
                (f"kafka_broker_bytes_in_per_second{{{SEL}}}", BROKER + " in"),
                (f"kafka_broker_bytes_out_per_second{{{SEL}}}", BROKER + " out"),
            ], "Bps")),
            (6, _series("Messages in", [
                (f"kafka_broker_messages_in_per_second{{{SEL}}}", BROKER),
            ], "short")),
            (6, _series("ISR shrinks / expands", [
                (f"kafka_broker_isr_shrinks_per_second{{{SEL}}}", BROKER + " shrinks"),
                (f"kafka_broker_isr_expands_per_second{{{SEL}}}", BROKER + " expands"),
            ], "short")),
        ]),
        (8, [(24, _broker_table())]),
    ])
    return dashboard(
        UID, "Kafka cluster health",
        "Brokers and clusters as the monitor sees them through metadata and JMX.",
        [query_variable("cluster", "label_values(kafka_monitor_cluster_status, cluster)",
                        label="Cluster")],
        panels,
        links=[dashboard_link("Consumer groups", "kafka-monitor-groups")],
    )

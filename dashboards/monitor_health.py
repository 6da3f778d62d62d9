"""The monitor itself ("who watches the watchers"): is it scraped, are its collectors
succeeding and current, how long evaluation and rendering take, how the
``__consumer_offsets`` reader and the JMX scrapes are doing.

A blind monitor reports stale groups (verdicts held), not STOP; this dashboard shows why it is
blind.
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Stat, Table

from dashboards.common import (
    DATASOURCE,
    dashboard,
    dashboard_link,
    layout,
    query_variable,
    series,
    stat,
    steps,
    target,
)

UID = "kafka-monitor-self"
SEL = 'cluster=~"$cluster"'
COLLECTOR = "{{cluster}} / {{collector}}"


def _stat(title: str, expr: str, thresholds: list[dict[str, object]], description: str,
          unit: str = "none") -> Stat:
    return stat(title, expr, thresholds=thresholds, unit=unit, description=description,
                color_mode="background")


def _collector_table() -> Table:
    queries = [
        ("A", f"kafka_monitor_collector_ready{{{SEL}}}"),
        ("B", f"kafka_monitor_collector_consecutive_errors{{{SEL}}}"),
        ("C", f"time() - kafka_monitor_collector_last_success_timestamp_seconds{{{SEL}}}"),
        ("D", f"kafka_monitor_collector_last_duration_seconds{{{SEL}}}"),
        ("E", f"kafka_monitor_collector_errors_total{{{SEL}}}"),
        ("F", f"kafka_monitor_collector_runs_total{{{SEL}}}"),
    ]

    def override(name: str, *props: dict[str, object]) -> dict[str, object]:
        return {"matcher": {"id": "byName", "options": name}, "properties": list(props)}

    return Table(
        title="Collectors", dataSource=DATASOURCE,
        description="GET /healthz on the monitor gives each collector's last error.",
        targets=[target(expr, ref=ref, table=True) for ref, expr in queries],
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True, "__name__": True, "job": True, "pod": True,
                                  "namespace": True, "service": True, "endpoint": True},
                "indexByName": {"cluster": 0, "collector": 1, "instance": 2},
                "renameByName": {"Value #A": "Ready", "Value #B": "Failures in a row",
                                 "Value #C": "Last success (ago)", "Value #D": "Last round",
                                 "Value #E": "Errors", "Value #F": "Runs"},
            }},
        ],
        extraJson={"fieldConfig": {"overrides": [
            override("Ready", {"id": "mappings", "value": [{"type": "value", "options": {
                "0": {"text": "no", "color": "red", "index": 0},
                "1": {"text": "yes", "color": "green", "index": 1}}}]},
                {"id": "custom.displayMode", "value": "color-text"}),
            override("Failures in a row", {"id": "thresholds", "value": {
                "mode": "absolute", "steps": steps((None, "green"), (1, "orange"),
                                                   (3, "red"))}},
                {"id": "custom.displayMode", "value": "color-background"}),
            override("Last success (ago)", {"id": "unit", "value": "s"}),
            override("Last round", {"id": "unit", "value": "s"}),
        ]}},
    )


def build() -> Dashboard:
    panels = layout([
        (4, [
            (4, _stat("Monitor instances up", 'sum(up{job=~"$job"})',
                      steps((None, "red"), (1, "green")),
                      "Prometheus targets of the monitor's job that answered the last scrape.")),
            (4, _stat("Verdict age",
                      f"time() - min(kafka_monitor_evaluation_timestamp_seconds{{{SEL}}})",
                      steps((None, "green"), (30, "yellow"), (120, "red")),
                      "How old the oldest exported evaluation is.", "s")),
            (4, _stat("Collectors failing",
                      f"count(kafka_monitor_collector_consecutive_errors{{{SEL}}} > 0) "
                      "or vector(0)", steps((None, "green"), (1, "red")),
                      "Collectors whose last round failed.")),
            (4, _stat("Collectors not ready",
                      f"count(kafka_monitor_collector_ready{{{SEL}}} == 0) or vector(0)",
                      steps((None, "green"), (1, "orange")),
                      "Collectors without data to serve yet (/ready is 503).")),
            (4, _stat("Stale groups", f"sum(kafka_monitor_group_stale{{{SEL}}}) or vector(0)",
                      steps((None, "green"), (1, "orange")),
                      "Groups whose offsets could not be read recently.")),
            (4, _stat("Broker JMX down",
                      f"count(kafka_monitor_broker_jmx_up{{{SEL}}} == 0) or vector(0)",
                      steps((None, "green"), (1, "orange")),
                      "Brokers whose last JMX scrape failed.")),
        ]),
        (9, [(24, _collector_table())]),
        (8, [
            (12, series("Collector errors", [
                (f"increase(kafka_monitor_collector_errors_total{{{SEL}}}[$__rate_interval])",
                 COLLECTOR)], "short", "Failed rounds per interval.")),
            (12, series("Collector round duration", [
                (f"kafka_monitor_collector_last_duration_seconds{{{SEL}}}", COLLECTOR)], "s")),
        ]),
        (8, [
            (12, series("Evaluation", [
                (f"kafka_monitor_evaluation_duration_seconds{{{SEL}}}",
                 "{{cluster}} evaluation"),
                (f"kafka_monitor_exporter_render_duration_seconds{{{SEL}}}",
                 "{{cluster}} rendering /metrics"),
            ], "s", "Time per round to evaluate every group, and to render its metrics.")),
            (12, series("Verdict age", [
                (f"time() - kafka_monitor_evaluation_timestamp_seconds{{{SEL}}}",
                 "{{cluster}} ({{instance}})")], "s")),
        ]),
        (8, [
            (8, series("__consumer_offsets reader", [
                (f"rate(kafka_monitor_offsets_topic_records_total{{{SEL}}}[$__rate_interval])",
                 "{{cluster}} records/s"),
                (f"rate(kafka_monitor_offsets_topic_commits_stored_total{{{SEL}}}"
                 "[$__rate_interval])", "{{cluster}} commits stored/s"),
            ], "short")),
            (8, series("Reader failures", [
                (f"increase(kafka_monitor_offsets_topic_handler_errors_total{{{SEL}}}"
                 "[$__rate_interval])", "{{cluster}} handler errors"),
                (f"increase(kafka_monitor_offsets_topic_reader_restarts_total{{{SEL}}}"
                 "[$__rate_interval])", "{{cluster}} restarts"),
            ], "short")),
            (8, series("JMX scrape duration", [
                (f"kafka_monitor_broker_jmx_scrape_duration_seconds{{{SEL}}}",
                 "{{cluster}} / broker {{broker}}")], "s")),
        ]),
    ])
    return dashboard(
        UID, "kafka-monitor itself",
        "The monitor's own health: scrapes, collectors, evaluation, readers.",
        [
            query_variable("job", "label_values(kafka_monitor_evaluation_rounds_total, job)",
                           label="Job", include_all=False, multi=False),
            query_variable("cluster",
                           "label_values(kafka_monitor_collector_runs_total, cluster)",
                           label="Cluster"),
        ],
        panels,
        links=[dashboard_link("Consumer groups", "kafka-monitor-groups"),
               dashboard_link("Cluster health", "kafka-monitor-cluster")],
    )

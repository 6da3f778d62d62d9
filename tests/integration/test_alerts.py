"""The alert rules in alerts/: valid for Prometheus (promtool check rules), unit-tested with
promtool test rules, every alert documented (severity, summary, description, runbook) and
tested, the rules the issue asks for present, and the example Alertmanager configuration
valid and routing as its comments say (amtool). No Kafka here; the rules' metric names are
checked against a real /metrics output in tests/integration/serve/test_prometheus.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.promql import metric_names
from tests.harness.tools import ROOT, require

pytestmark = pytest.mark.prometheus

ALERTS = ROOT / "alerts"
RULES = ALERTS / "kafka-monitor.rules.yml"
AM_CONFIG = ALERTS / "alertmanager.example.yml"
UNIT_TESTS = sorted((ALERTS / "tests").glob("*.test.yml"))


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def alert_rules() -> list[dict[str, Any]]:
    return [r for r in rules() if "alert" in r]


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_promtool_accepts_the_rule_files() -> None:
    files = sorted(ALERTS.glob("*.rules.yml"))
    result = run(require("promtool"), "check", "rules", *map(str, files))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    assert UNIT_TESTS, "no promtool unit tests in alerts/tests/"
    result = run(require("promtool"), "test", "rules", *map(str, UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_catch_a_broken_threshold(tmp_path: Path) -> None:
    """The unit tests bite: the same tests on rules with the 10 % idle threshold moved fail."""
    (tmp_path / "tests").mkdir()
    text = RULES.read_text()
    assert "< 0.10" in text
    (tmp_path / RULES.name).write_text(text.replace("< 0.10", "< 0.04"))
    for test in UNIT_TESTS:
        (tmp_path / "tests" / test.name).write_text(test.read_text())
    result = run(require("promtool"), "test", "rules",
                 *map(str, sorted((tmp_path / "tests").glob("*.yml"))))
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "KafkaBrokerRequestHandlerIdleLow" in output, output


@pytest.mark.parametrize(
    "rule", alert_rules(), ids=lambda r: f"{r['alert']}-{r['labels']['severity']}"
)
def test_every_alert_is_documented(rule: dict[str, Any]) -> None:
    assert rule["labels"]["severity"] in {"critical", "warning"}
    notes = rule["annotations"]
    assert notes["summary"].strip()
    assert len(notes["description"]) > 40 and len(notes["runbook"]) > 40


def test_every_rule_has_a_unit_test() -> None:
    """Each alert fires in some promtool test case, each recording rule is evaluated in one."""
    fired: set[str] = set()
    evaluated: set[str] = set()
    for path in UNIT_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for t in case.get("alert_rule_test", []):
                if t.get("exp_alerts"):
                    fired.add(t["alertname"])
            for t in case.get("promql_expr_test", []):
                evaluated |= metric_names(t["expr"])
    assert {r["alert"] for r in alert_rules()} <= fired
    assert {r["record"] for r in rules() if "record" in r} <= evaluated


def test_the_issue_s_alerts_exist() -> None:
    """Issue 8's list, and those of later issues."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for rule in alert_rules():
        by_name.setdefault(rule["alert"], []).append(rule)
    expected = {
        "KafkaConsumerGroupStopped": 'status="STOP"',
        "KafkaConsumerGroupStalled": 'status="STALL"',
        "KafkaConsumerGroupLagGrowing": 'status="WARN"',
        "KafkaConsumerGroupLagSecondsHigh": "kafka_consumergroup_group_max_lag_seconds",
        "KafkaUnderReplicatedPartitions": "under_replicated_partitions > 0",
        "KafkaActiveControllerCount": "!= 1",
        "KafkaOfflinePartitions": "offline_partitions) > 0",
        "KafkaUnderMinIsrPartitions": "kafka_broker_under_min_isr_partitions",
        "KafkaBrokerRequestHandlerIdleLow": "kafka_broker_request_handler_avg_idle_ratio",
        "KafkaMonitorDown": 'up{job="kafka-monitor"} == 0',
        "KafkaMonitorCollectorFailing": "kafka_monitor_collector_consecutive_errors",
        "KafkaCanaryProduceAvailabilityLow": "kafka_canary_produce_acks_total",
        "KafkaCanaryConsumeAvailabilityLow": "kafka_canary_consume_availability",
        "KafkaCanaryRecordsLost": "kafka_canary_records_lost_total",
        "KafkaMirrorLatencyHigh": "kafka_mirror_canary_end_to_end_latency_seconds_bucket",
        "KafkaMirrorCanaryLoss": "kafka_mirror_canary_consume_availability",
        "KafkaMirrorRecordsMissing": "kafka_mirror_window_difference_sum",
        # issue 28: failover plans
        "KafkaMirrorFailoverWouldSkip": 'kafka_mirror_failover_state{state="would_skip"}',
        "KafkaMirrorFailoverNotReady": "kafka_mirror_failover_ready",
    }
    for name, fragment in expected.items():
        assert name in by_name and all(fragment in r["expr"] for r in by_name[name]), name
    idle = {r["labels"]["severity"]: r["expr"] for r in by_name["KafkaBrokerRequestHandlerIdleLow"]}
    assert idle == {"warning": "kafka_broker_request_handler_avg_idle_ratio < 0.20",
                    "critical": "kafka_broker_request_handler_avg_idle_ratio < 0.10"}


def test_alertmanager_example_config_is_valid() -> None:
    result = run(require("amtool"), "check-config", str(AM_CONFIG))
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize(("labels", "receiver"), [
    (["alertname=KafkaMonitorDown", "severity=critical"], "monitoring-pager"),
    (["alertname=KafkaConsumerGroupStopped", "severity=critical", "cluster=prod"], "kafka-pager"),
    (["alertname=KafkaConsumerGroupLagGrowing", "severity=warning"], "kafka-team"),
])
def test_alertmanager_example_routes(labels: list[str], receiver: str) -> None:
    result = run(require("amtool"), "config", "routes", "test", f"--config.file={AM_CONFIG}",
                 f"--verify.receivers={receiver}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("expr", "names"), [
    ('up{job="kafka-monitor"} == 0', {"up"}),
    ("max by (cluster) (a) > 0 or max by (cluster) (b_total) > 0", {"a", "b_total"}),
    ('sum by (topic) (rate(x{c="$cluster"}[$__rate_interval]) and on (c, topic) y{g="a b"})',
     {"x", "y"}),
    ("time() - q > 1e3 unless r offset 5m", {"q", "r"}),
    ('label_values(kafka_monitor_group_status{cluster="$cluster"}, group)',
     {"kafka_monitor_group_status"}),
    ("kafka_monitor:evaluation_age_seconds > 120", {"kafka_monitor:evaluation_age_seconds"}),
    ("sum(x) or vector(0)", {"x"}),
])
def test_metric_names_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names

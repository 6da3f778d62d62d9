"""End to end with a real Prometheus: `kafka-monitor run` watches the real Kafka 0.9 broker
(JMX on, both offset sources, the canary on, and a mirror of a topic onto the same broker)
while a producer, a healthy consumer and a consumer that stops for good run; a real
Prometheus server scrapes the monitor every second and evaluates alerts/ every second.

* every metric a dashboard panel or an alert rule queries is in the monitor's real /metrics
  output (names are never invented);
* every dashboard query runs on Prometheus (valid PromQL on real data);
* the STOP alert reaches the firing state in Prometheus' alerts API for the stopped group, and
  not for the healthy one.

The rules are loaded from a test-specific copy of alerts/*.rules.yml in which every ``for`` is
5s instead of minutes (the only change), so the test takes about a minute.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import dashboards
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    HealthyConsumer,
    ProducerLoad,
    StoppedConsumer,
    librdkafka_logger,
)
from monitor.model import metric_catalogue as catalogue
from tests.harness import processes
from tests.harness.html import parse, section
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.net import free_port, wait_for
from tests.harness.promql import metric_names
from tests.harness.tools import ROOT, require

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus, pytest.mark.slow(100)]

RULE_FILES = sorted((ROOT / "alerts").glob("*.rules.yml"))
SHORT_FOR = "5s"
# Series Prometheus itself makes for every target.
PROMETHEUS_SERIES = {"up"}
ONLY_AT_RISK = {
    "kafka_consumergroup_group_time_to_loss_seconds",
    "kafka_consumergroup_group_min_time_to_loss_seconds",
}
"""Families with a series only while retention is about to delete records a group has not
read. This stack cannot bring that about: its broker checks retention every 5 minutes, as
Kafka does by default. tests/integration/rules/test_retention.py reads them from /metrics on a
broker that checks every second."""
ONLY_CATCHING_UP = {"kafka_consumergroup_group_time_to_catch_up_seconds"}
"""A series only while a group's lag shrinks: this stack's groups keep up, fall behind or
stop. tests/integration/rules/test_velocity.py reads it from /metrics on a group draining a
backlog."""
SOMETIMES_EMPTY = ONLY_AT_RISK | ONLY_CATCHING_UP


@dataclass
class Stack:
    monitor: str  # base URL
    prometheus: str  # base URL
    healthy: str
    stopped: str
    dead: StoppedConsumer


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def exported_names(monitor: str) -> set[str]:
    """Sample names in the monitor's /metrics (``_total`` included, as PromQL sees them), and
    the broker families declared without samples because every broker lacks the MBean (the
    health API lists it ``absent``: under-min-ISR on Kafka 0.9), which a newer broker fills."""
    with urllib.request.urlopen(f"{monitor}/metrics", timeout=10) as response:
        families = list(text_string_to_metric_families(response.read().decode()))
    names = {s.name for f in families for s in f.samples}
    jmx = get_json(f"{monitor}/v3/kafka/local/health")["health"]["jmx"]
    lacking = set.intersection(*(set(b["absent"]) for b in jmx.values())) if jmx else set()
    return names | {f.name for f in families
                    if not f.samples and f.name.removeprefix("kafka_broker_") in lacking}


def shortened_rules(directory: Path) -> list[Path]:
    """Copies of the rule files with every ``for`` set to SHORT_FOR, nothing else changed."""
    paths = []
    for source in RULE_FILES:
        data = yaml.safe_load(source.read_text())
        for group in data["groups"]:
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = SHORT_FOR
        path = directory / source.name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def stack(kafka: LocalKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus_bin = require("prometheus")
    tmp = tmp_path_factory.mktemp("prometheus-e2e")
    prefix = make_unique_name("prom")
    topic = f"{prefix}-orders"
    kafka.create_topic(topic, partitions=2)
    healthy, stopped = f"{prefix}-healthy", f"{prefix}-stopped"

    monitor_port, prometheus_port = free_port(), free_port()
    broker = kafka.brokers[0]
    config = {
        "clusters": [{
            "name": "local",
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "offsets_source": "both",
            "groups": {"allow": [f"^{prefix}"]},
            "jmx": [{"broker_id": broker.id, "host": "127.0.0.1", "port": broker.jmx_port}],
        }, {
            # The same broker again, as a mirror's destination (a mirror of a topic onto
            # itself: the mirror families and the mirror canary are exported for real).
            "name": "mirror-dst",
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "groups": {"allow": ["^$"]},
        }],
        "canary": {"enabled": True, "interval": "200ms"},
        "mirrors": [{"name": "loop", "source": "local", "destination": "mirror-dst",
                     "topics": [topic], "group": healthy, "count_window": "5s",
                     "count_delay": "1s"}],
        "collectors": {"metadata_interval": "2s", "broker_offsets_interval": "1s",
                       "group_offsets_interval": "1s", "jmx_interval": "2s"},
        "evaluator": {"interval": "1s"},
        "http": {"host": "127.0.0.1", "port": monitor_port},
    }
    (tmp / "monitor.yaml").write_text(yaml.safe_dump(config))
    prometheus_config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in shortened_rules(tmp)],
        "scrape_configs": [{
            "job_name": "kafka-monitor",
            "static_configs": [{"targets": [f"127.0.0.1:{monitor_port}"]}],
        }],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(prometheus_config))

    monitor_log = (tmp / "monitor.log").open("wb")
    prometheus_log = (tmp / "prometheus.log").open("wb")
    monitor_url = f"http://127.0.0.1:{monitor_port}"
    prometheus_url = f"http://127.0.0.1:{prometheus_port}"
    cfg: dict[str, Any] = {**kafka.client_config(), "logger": librdkafka_logger}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(monitor_log.close)
        cleanup.callback(prometheus_log.close)
        monitor = processes.start(
            [sys.executable, "-m", "monitor", "run", "--config", str(tmp / "monitor.yaml")],
            stdout=monitor_log, stderr=subprocess.STDOUT,
        )
        cleanup.callback(processes.stop, monitor, 30)
        prometheus = processes.start(
            [prometheus_bin, f"--config.file={tmp / 'prometheus.yml'}",
             f"--web.listen-address=127.0.0.1:{prometheus_port}",
             f"--storage.tsdb.path={tmp / 'tsdb'}", "--log.level=warn"],
            stdout=prometheus_log, stderr=subprocess.STDOUT,
        )
        cleanup.callback(processes.stop, prometheus)
        cleanup.enter_context(ProducerLoad(cfg, topic, rate=20))
        cleanup.enter_context(HealthyConsumer(cfg, topic, healthy))
        dead = cleanup.enter_context(StoppedConsumer(cfg, topic, stopped, stop_after_s=8))
        try:
            wait_for(lambda: urllib.request.urlopen(f"{prometheus_url}/-/ready", timeout=2)
                     .status == 200, 30, "Prometheus ready")
            wait_for(lambda: urllib.request.urlopen(f"{monitor_url}/ready", timeout=2)
                     .status == 200, 90, "the monitor ready")
            yield Stack(monitor_url, prometheus_url, healthy, stopped, dead)
        except BaseException:
            print((tmp / "monitor.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            print((tmp / "prometheus.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            raise


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard uid, panel title, expr) of every dashboard query and variable."""
    return [
        (board["uid"], title, expr)
        for board in (json.loads(text) for text in dashboards.generate().values())
        for title, expr in dashboards.queries(board)
    ]


def rule_exprs() -> tuple[list[str], set[str]]:
    """Every rule expression, and the names recording rules define."""
    rules = [r for p in RULE_FILES for g in yaml.safe_load(p.read_text())["groups"]
             for r in g["rules"]]
    return [r["expr"] for r in rules], {r["record"] for r in rules if "record" in r}


def test_every_queried_metric_is_exported(stack: Stack) -> None:
    """Dashboards and alert rules query only names in the monitor's real /metrics (JMX and
    both offset sources on, so every family the code can export for Kafka 0.9 is there)."""
    exprs, recorded = rule_exprs()
    used: dict[str, set[str]] = {}
    for uid, title, expr in dashboard_queries():
        for name in metric_names(expr):
            used.setdefault(name, set()).add(f"dashboard {uid}: {title}")
    for expr in exprs:
        for name in metric_names(expr) - recorded:
            used.setdefault(name, set()).add("alerts/")
    assert catalogue.CATALOGUE.keys() >= SOMETIMES_EMPTY
    wanted = set(used) - PROMETHEUS_SERIES - SOMETIMES_EMPTY
    assert len(wanted) > 40  # the lexer found the queries' names

    def missing() -> set[str]:
        return wanted - exported_names(stack.monitor)

    with contextlib.suppress(TimeoutError, AssertionError):
        wait_for(lambda: not missing(), 120, "every queried family in /metrics")
    gone = missing()
    assert not gone, {name: sorted(used[name]) for name in gone}


def test_every_exported_family_matches_the_catalogue(stack: Stack) -> None:
    """Every family on the real /metrics (lag, health, JMX, canaries, mirror, collectors) is
    declared in the metric catalogue with the same kind, help and labels."""
    def families() -> list[Any]:
        with urllib.request.urlopen(f"{stack.monitor}/metrics", timeout=10) as response:
            return list(text_string_to_metric_families(response.read().decode()))

    wait_for(lambda: any(f.name == "kafka_mirror_window_source_records" and f.samples
                         for f in families()), 120, "the mirror's first counted window")
    exported = families()
    assert len(exported) > 80
    wrong = []
    for f in exported:
        if f.name.startswith(("python_", "process_")):  # prometheus_client's own
            continue
        base = catalogue.CATALOGUE.get(f.name.removesuffix("_created"))
        if f.name.endswith("_created") and base is not None and base.kind != "gauge":
            continue  # a counter's or histogram's creation time, as the text format has it
        entry = catalogue.CATALOGUE.get(f.name)
        labels = {k for s in f.samples for k in s.labels} - {"le"}
        if entry is None or entry.kind != f.type or entry.help != f.documentation \
                or not labels <= set(entry.labels) or (f.samples and not labels
                                                       and entry.labels):
            wrong.append((f.name, f.type, f.documentation, sorted(labels), entry))
    assert not wrong, wrong


def query(stack: Stack, expr: str) -> dict[str, Any]:
    url = f"{stack.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        return get_json(url)  # type: ignore[no-any-return]
    except urllib.error.HTTPError as err:  # 400 on a bad query: keep Prometheus' reason
        return json.loads(err.read())  # type: ignore[no-any-return]


def grafana_to_promql(expr: str, stack: Stack) -> str:
    """Grafana's variables as a user would pick them; label_values(sel, label) -> sel."""
    expr = dashboards_label_values(expr)
    for var, value in (("$__rate_interval", "10s"), ("$cluster", "local"),
                       ("$group", stack.healthy), ("$job", "kafka-monitor"),
                       ("$mirror", "loop")):
        expr = expr.replace(var, value)
    return expr


def dashboards_label_values(expr: str) -> str:
    if expr.startswith("label_values("):
        return expr[len("label_values("):].rsplit(",", 1)[0]
    return expr


def test_every_dashboard_query_runs_on_prometheus(stack: Stack) -> None:
    """Each query is valid PromQL on a real Prometheus, and (once every family has been
    scraped for a while) returns data: a panel that would stay empty is a broken panel."""
    wait_for(lambda: query(stack, "kafka_broker_request_handler_avg_idle_ratio")["data"]
             ["result"], 60, "JMX figures in Prometheus")
    wait_for(lambda: query(stack, f'kafka_monitor_group_status{{group="{stack.healthy}"}}')
             ["data"]["result"], 60, "the healthy group in Prometheus")
    # The mirror counts from a quiet anchor (up to ten 5 s windows on a busy topic): its
    # window families appear once the first window after it closed. Waited for here, so the
    # test passes alone as well as after the others.
    wait_for(lambda: query(stack, "kafka_mirror_window_source_records")["data"]["result"], 90,
             "the mirror's first counted window in Prometheus")
    failures, empty = [], []
    for uid, title, expr in dashboard_queries():
        answer = query(stack, grafana_to_promql(expr, stack))
        if answer["status"] != "success":
            failures.append((uid, title, expr, answer.get("error")))
        elif not answer["data"]["result"] and not metric_names(expr) <= SOMETIMES_EMPTY:
            empty.append((uid, title, expr))
    assert not failures
    # rate() and increase() need two samples in the window: give those the time to get them.
    deadline = time.monotonic() + 30
    while empty and time.monotonic() < deadline:
        time.sleep(1)
        empty = [(uid, title, expr) for uid, title, expr in empty
                 if not query(stack, grafana_to_promql(expr, stack))["data"]["result"]]
    assert not empty, "\n".join(map(str, empty))


def test_rules_load_and_evaluate_without_errors(stack: Stack) -> None:
    groups = get_json(f"{stack.prometheus}/api/v1/rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    exprs, _ = rule_exprs()
    assert len(rules) == len(exprs)
    wait_for(lambda: all(r.get("health") == "ok" for g in get_json(
        f"{stack.prometheus}/api/v1/rules")["data"]["groups"] for r in g["rules"]),
        30, "every rule evaluated")


def test_stop_alert_fires_for_the_stopped_group(stack: Stack) -> None:
    assert stack.dead.closed.wait(60), "the stopped consumer never stopped"

    def stop_alerts() -> dict[str, str]:
        alerts = get_json(f"{stack.prometheus}/api/v1/alerts")["data"]["alerts"]
        return {a["labels"]["group"]: a["state"] for a in alerts
                if a["labels"]["alertname"] == "KafkaConsumerGroupStopped"}

    wait_for(lambda: stop_alerts().get(stack.stopped) == "firing", 100,
             "KafkaConsumerGroupStopped firing in Prometheus")
    alerts = get_json(f"{stack.prometheus}/api/v1/alerts")["data"]["alerts"]
    (fired,) = [a for a in alerts if a["labels"]["alertname"] == "KafkaConsumerGroupStopped"
                and a["labels"]["group"] == stack.stopped]
    assert fired["labels"]["severity"] == "critical"
    assert fired["labels"]["cluster"] == "local"
    assert fired["annotations"]["summary"] == (
        f"Consumer group {stack.stopped} on local is STOP")
    assert stack.healthy not in stop_alerts()


def test_canary_and_mirror_pages_show_the_probes_figures(stack: Stack) -> None:
    """The status page's canary and mirror pages on the probes' real rounds: per broker
    availability and latency, the mirror's topic lag and its group's verdict."""

    def page(path: str) -> str:
        with urllib.request.urlopen(f"{stack.monitor}{path}", timeout=10) as response:
            assert response.headers.get_content_type() == "text/html"
            return response.read().decode()

    def canary_rows() -> list[list[str]]:
        """The cluster canary's broker rows once records have been consumed (latency known).
        The page also lists the mirror's canary, with a table of its own."""
        html = section(page("/ui/canary"), "canary local")
        rows = [r for r in parse(html, "brokers").body if len(r) == 6]
        return [r for r in rows if r[3] != "–"]

    rows = wait_for(lambda: canary_rows() or None, 60, "a canary round with records consumed")
    broker, produce, consume, e2e, lost, duplicated = rows[0]
    assert broker == "0" and produce.endswith("%") and float(produce[:-1]) > 90
    assert e2e.endswith("ms") and lost.isdigit() and duplicated.isdigit()
    overview = page("/")
    assert 'href="/ui/canary"' in overview and 'href="/ui/mirror/loop"' in overview
    html = page("/ui/mirror/loop")
    topics = parse(html, "mirror-topics").body
    assert [r[0] for r in topics] == [f"{stack.healthy.removesuffix('-healthy')}-orders"]
    lag, lost, duplicated = topics[0][1:]
    assert lost.isdigit() and duplicated.isdigit()  # counted, whatever the counts are
    assert "Mirroring group" in html and stack.healthy in html
    assert "Canary records lost" in html  # the mirror's canary (mirrors[].canary, default on)

"""One catalogue of metric families (``monitor/model/metric_catalogue.py``), and everything
held to it: producers build their families from it, never from a name of their own, and
dashboards and alert rules query only names it declares. (That every family a running service
exports matches its entry, kind, help and labels, is checked on a real scrape in
tests/integration/serve/test_prometheus.py.)"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

import dashboards
from monitor.model import metric_catalogue as catalogue
from tests.harness.promql import metric_names
from tests.harness.tools import ROOT

PACKAGE = ROOT / "monitor"
CONSTRUCTORS = {"GaugeMetricFamily", "CounterMetricFamily", "HistogramMetricFamily",
                "SummaryMetricFamily", "InfoMetricFamily", "StateSetMetricFamily",
                "Gauge", "Counter", "Histogram", "Summary", "Info", "Enum"}
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def declared(sample: str) -> bool:
    """Whether a PromQL name is a catalogue family or one of its samples' names."""
    if sample in catalogue.CATALOGUE:
        return True
    return any(sample.endswith(s) and sample.removesuffix(s) in catalogue.CATALOGUE
               for s in SUFFIXES)


def prometheus_constructor_calls(path: Path) -> list[tuple[int, str]]:
    """(line, source) of calls constructing a prometheus_client metric or family in ``path``,
    when the module imports that name from prometheus_client."""
    tree = ast.parse(path.read_text())
    imported = {a.asname or a.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "prometheus_client") for a in node.names if a.name in CONSTRUCTORS}
    return [(node.lineno, ast.unparse(node)) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in imported]


def test_only_the_catalogue_names_metric_families() -> None:
    """Outside the catalogue, a prometheus_client metric or family is built from a
    catalogue entry (``f.name``), never from a name or help text written in place."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "metric_catalogue.py":
            continue
        for line, call in prometheus_constructor_calls(path):
            if not call.split("(", 1)[1].startswith("f.name, f.help"):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {call}")
    assert not offenders, offenders


def test_the_catalogue_check_sees_a_family_written_in_place(tmp_path: Path) -> None:
    """The check above is not vacuous: a module building a family from a literal is found."""
    module = tmp_path / "m.py"
    module.write_text("from prometheus_client.core import GaugeMetricFamily\n"
                      "g = GaugeMetricFamily('kafka_x', 'help', labels=['cluster'])\n")
    assert prometheus_constructor_calls(module) == [
        (2, "GaugeMetricFamily('kafka_x', 'help', labels=['cluster'])")
    ]


def test_dashboards_and_alert_rules_query_only_catalogue_names() -> None:
    rules = [r for p in sorted((ROOT / "alerts").glob("*.rules.yml"))
             for g in yaml.safe_load(p.read_text())["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in rules if "record" in r}
    exprs = [r["expr"] for r in rules]
    exprs += [expr for board in (json.loads(t) for t in dashboards.generate().values())
              for _, expr in dashboards.queries(board)]
    names = {n for e in exprs for n in metric_names(e)} - recorded - {"up"}
    assert len(names) > 40  # the lexer found the queries' names
    assert sorted(n for n in names if not declared(n)) == []


def test_entries_are_well_formed() -> None:
    """Names and labels are valid Prometheus identifiers, counters are not named ``_total``
    (prometheus_client adds it), every family has help, and no label repeats."""
    for f in catalogue.CATALOGUE.values():
        assert f.name.isidentifier() and f.name.startswith("kafka_"), f
        assert f.help and not f.help.endswith(" "), f
        assert len(set(f.labels)) == len(f.labels), f
        if f.kind == "counter":
            assert not f.name.endswith("_total"), f
    assert isinstance(catalogue.gauge("kafka_monitor_group_status").type, str)
    with pytest.raises(TypeError, match="is a counter"):
        catalogue.gauge("kafka_monitor_evaluation_rounds")

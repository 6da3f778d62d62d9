"""Metric names a PromQL expression selects, for checking dashboards and alert rules against
what the service exports.

A small lexer rather than a parser: it removes what cannot be a metric name (string literals,
label matchers, ranges, label lists of by/without/on/ignoring/group_*, Grafana variables),
then every remaining identifier not followed by ``(`` and not a keyword is a metric name.
Tested on the expressions the project uses (tests/integration/test_alerts.py); a real
Prometheus also runs every dashboard query in tests/integration/serve/test_prometheus.py,
which catches syntax errors.
"""

from __future__ import annotations

import re

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_LABEL_LISTS = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(?![\w:]|\s*\()")
# Grafana's label_values(selector, label): the second argument is a label, not a metric.
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", re.DOTALL)
_KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "bool", "offset", "inf", "nan", "atan2",
}


def metric_names(expr: str) -> set[str]:
    """Names of the metrics ``expr`` selects (``up{job="x"} == 0`` -> ``{"up"}``)."""
    text = _LABEL_VALUES.sub(r"\1", expr)
    text = _STRINGS.sub('""', text)
    text = _VARIABLES.sub("", text)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _LABEL_LISTS.sub(" ", text)
    # A number's exponent or a duration's unit is glued to digits: drop numbers first.
    text = re.sub(r"(?<![\w:])\d[\w.]*", " ", text)
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in _KEYWORDS}

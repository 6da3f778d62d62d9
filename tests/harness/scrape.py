"""A Prometheus exposition read back with prometheus_client's own parser, sample by sample."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Series", "scrape_text", "value"]

Series = dict[frozenset[tuple[str, str]], float]
"""One sample name's values, by label set."""


def scrape_text(text: str) -> dict[str, Series]:
    """Every sample of an exposition, by sample name, keyed by its label set."""
    out: dict[str, Series] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


def value(samples: dict[str, Series], name: str, **labels: object) -> float:
    """The value of ``name`` with exactly these labels (KeyError when there is none)."""
    key = frozenset((k, str(v)) for k, v in labels.items())
    return samples[name][key]

"""The backtest's per-group aggregations on hand-made evaluations."""

from __future__ import annotations

import pandas as pd

from monitor.pipeline.backtest import timelines


def test_groups_whose_names_run_together_keep_their_own_timelines() -> None:
    """Cluster "a" with group "bc" and cluster "ab" with group "c": one key each, even though
    their names concatenate to the same text."""
    evals = pd.DataFrame({
        "cluster": ["a", "ab", "a", "ab"], "group": ["bc", "c", "bc", "c"],
        "evaluated_at": [0.0, 0.0, 5.0, 5.0], "status": ["OK", "STOP", "OK", "STOP"],
        "lag_seconds": [0.0] * 4, "totallag": [0] * 4, "partitions": [1] * 4,
    })
    line = timelines(evals)
    got = sorted(zip(line["cluster"], line["group"], line["status"], line["since"],
                     line["until"], strict=True))
    assert got == [("a", "bc", "OK", 0.0, 5.0), ("ab", "c", "STOP", 0.0, 5.0)]

"""What the HTTP API and the metrics show of a mirror: the collector's latest round, its
canary's figures and the mirroring group's verdict from the evaluator (read, never computed
here)."""

from __future__ import annotations

from typing import Any

from monitor.config import MirrorConfig
from monitor.evaluate.job import Evaluator
from monitor.ingest.mirror import MirrorCollector

#: Group status as a number, as ``kafka_monitor_group_status`` (ERR: Burrow-style reporting).
STATUS_CODE = {"NOTFOUND": 0, "OK": 1, "WARN": 2, "REWIND": 3, "STALL": 4, "STOP": 5, "ERR": 5}


def group_status(evaluator: Evaluator, mirror: MirrorConfig) -> dict[str, Any] | None:
    """The mirroring group's verdict on the source cluster (None when no group is configured);
    NOTFOUND until the evaluator knows it."""
    if mirror.group is None:
        return None
    result = evaluator.result(mirror.source)
    g = result.group(mirror.group) if result is not None else None
    if g is None:
        return {"group": mirror.group, "status": "NOTFOUND", "totallag": None,
                "lag_seconds": None, "state": None, "members": 0, "stale": False}
    return {"group": g.group, "status": g.status, "totallag": g.totallag,
            "lag_seconds": g.lag_seconds, "state": g.state, "members": g.members,
            "stale": g.stale}


def mirror_view(collector: MirrorCollector, evaluator: Evaluator) -> dict[str, Any]:
    """The ``/v3/mirror/<name>`` body."""
    m = collector.mirror
    return {
        "name": m.name, "source": m.source, "destination": m.destination,
        "topics": list(m.topics),
        "count_window_seconds": m.count_window, "count_delay_seconds": m.count_delay,
        **collector.snapshot(),
        "group": group_status(evaluator, m),
        "canary": collector.canary.snapshot() if collector.canary is not None else None,
    }



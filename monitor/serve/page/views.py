"""What the status page shows, as plain dicts for its templates: built from the service's cached
results (the latest evaluation, the store's offsets and health input, the lag history, the
probes' last rounds), never from Kafka. Pure reads, no HTML here (that is the templates')."""

from __future__ import annotations

import math
import time
from typing import Any

from monitor.evaluate.history import LagHistory
from monitor.ingest.canary.probe import CanaryProbe
from monitor.ingest.failover.collector import FailoverCollector
from monitor.ingest.mirror import MirrorCollector
from monitor.model.verdicts import GroupStatus, PartitionStatus, RetentionRisk
from monitor.serve.http.envelope import Served
from monitor.serve.metrics.health import cluster_health, thresholds_for
from monitor.serve.page import svg
from monitor.serve.probe_views import mirror_view

#: Worst first: what needs a person comes first on the page.
SEVERITY = {"STOP": 0, "ERR": 0, "STALL": 1, "REWIND": 2, "WARN": 3, "NOTFOUND": 4, "OK": 5}
#: Shown next to every status word (never colour alone).
SYMBOL = {"STOP": "■", "ERR": "■", "STALL": "‖", "REWIND": "↺", "WARN": "▲", "NOTFOUND": "?",
          "OK": "✓"}
STATUS_ORDER = ["STOP", "STALL", "REWIND", "WARN", "NOTFOUND", "OK"]
MAX_ROWS = 500  # groups listed on the overview, worst first; the filter finds the others


def status_badge(word: str) -> dict[str, str]:
    return {"word": word, "symbol": SYMBOL.get(word, "?"), "css": word.lower()}


def duration(seconds: float | None) -> str:
    """A lag or age as a person reads it: 0 s, 42 s, 3 min 5 s, 2 h 10 min."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.0f} s" if s >= 10 or s == 0 else f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def overview(service: Served, query: str = "", now: float | None = None) -> dict[str, Any]:
    """Clusters with their health, then every group worst first (``query``: a substring of
    the cluster or group name), with counts per status over all groups."""
    now = time.time() if now is None else now
    history: LagHistory = service.history
    clusters = [_cluster(service, c.name, now) for c in service.config.clusters]
    counts = dict.fromkeys(STATUS_ORDER, 0)
    # Sorted on plain tuples; only the rows listed become dicts.
    found: list[tuple[int, float, int, str, str, int, Any]] = []
    needle = query.casefold()
    for c in service.config.clusters:
        ev = service.evaluator.result(c.name)
        if ev is None:
            continue
        s = ev.summary()
        for i, group in enumerate(s.group):
            word = s.status[i]
            counts[word if word in counts else "STOP"] += 1
            if needle and needle not in group.casefold() and needle not in c.name.casefold():
                continue
            found.append((SEVERITY.get(word, 0), -s.lag_seconds[i], -s.totallag[i], c.name,
                          group, i, s))
    found.sort(key=lambda f: f[:5])
    shown = []
    for _, _, _, cluster, group, i, s in found[:MAX_ROWS]:
        shown.append({
            "cluster": cluster, "group": group, "status": status_badge(s.status[i]),
            "lag_text": duration(s.lag_seconds[i]), "totallag": s.totallag[i],
            "partitions": s.partitions[i], "members": s.members[i], "stale": s.stale[i],
        })
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    for r in shown:
        by_cluster.setdefault(r["cluster"], []).append(r)
    for cluster, members in by_cluster.items():
        times, values = history.matrix(cluster, [r["group"] for r in members])
        for r, picture in zip(members, svg.sparklines(times, values, now), strict=True):
            r["sparkline"] = picture
    return {
        "title": "Consumer groups",
        "clusters": clusters,
        "counts": [{"status": status_badge(w), "count": counts[w]} for w in STATUS_ORDER],
        "total": sum(counts.values()),
        "groups": shown,
        "matched": len(found),
        "query": query,
    }


def _cluster(service: Served, name: str, now: float) -> dict[str, Any]:
    health = cluster_health(service.store, name, thresholds_for(service.config))
    metadata = service.store.metadata(name)
    d = health.diagnosis
    ev = service.evaluator.result(name)
    return {
        "name": name,
        "status": status_badge(health.status),
        "reasons": [r.message for r in health.reasons][:5],
        "brokers": len(metadata.brokers) if metadata is not None else None,
        "missing_brokers": list(d.missing_brokers) if d is not None else [],
        "under_replicated": len(d.under_replicated) if d is not None else None,
        "offline": len(d.offline) if d is not None else None,
        "controller": metadata.controller_id if metadata is not None else None,
        "active_controllers": health.active_controllers,
        "evaluated_ago": duration(now - ev.evaluated_at) if ev is not None else None,
    }


def group_page(service: Served, cluster: str, group: str,
               now: float | None = None) -> dict[str, Any] | None:
    """One group in depth: per partition its status and why, offsets, lag, owner and the
    window of commits the verdict came from; its members; its lag chart. None: unknown."""
    now = time.time() if now is None else now
    ev = service.evaluator.result(cluster)
    g = ev.group(group) if ev is not None else None
    if ev is None or g is None:
        return None
    windows = service.store.group_windows(cluster, group) or {}
    partitions = []
    for p in sorted(g.partitions, key=lambda p: (SEVERITY.get(p.status, 0), p.topic,
                                                p.partition)):
        window = windows.get((p.topic, p.partition), [])
        committed = p.end.offset if p.end is not None else None
        partitions.append({
            "topic": p.topic, "partition": p.partition, "status": status_badge(p.status),
            "committed": committed,
            # The log end the verdict was judged on (the same round as the lag beside it).
            "log_end": committed + p.current_lag if committed is not None else None,
            "lag": p.current_lag,
            "lag_text": ("≥ " if p.lag_seconds_lower_bound else "") + duration(p.lag_seconds),
            "owner": p.client_id, "host": p.owner,
            "retention": retention_text(p.retention),
            "retention_risk": p.retention.risk if p.retention is not None else None,
            "why": why(p, now),
            "window": [{
                "offset": e["offset"],
                "age": duration(now - e["timestamp"] / 1000) if e["timestamp"] else "–",
                "lag": e["lag"],
            } for e in reversed(window)],  # newest first
        })
    times, values = service.history.matrix(cluster, [group])
    return {
        "title": f"{group} · {cluster}",
        "cluster": cluster, "group": group, "status": status_badge(g.status),
        "lag_text": duration(g.lag_seconds), "totallag": g.totallag,
        "state": g.state or "unknown", "generation": g.generation, "stale": g.stale,
        "offsets_age": duration(g.offsets_age_seconds),
        "members": [{"client_id": m.client_id, "host": m.host, "member_id": m.member_id,
                     "assignment": ", ".join(f"{t}-{n}" for t, n in m.assignment)}
                    for m in g.member_list],
        "partitions": partitions,
        "chart": svg.chart(times, values[0], now),
        "summary": summarise(g),
        "retention": _group_retention(g),
        "lifecycle": _lifecycle(g, now),
    }


def retention_text(r: RetentionRisk | None) -> str:
    """A partition's retention risk in a few words."""
    if r is None:
        return "log start not known"
    if r.risk == "LOST":
        return f"LOST: {r.lost_records:,} records deleted unread"
    lead = f"lead {r.lead:,}"
    if r.time_to_loss_seconds is not None:
        return f"{lead}; loss in ~{duration(r.time_to_loss_seconds)}"
    return f"{lead}; {r.time_to_loss_reason}" if r.time_to_loss_reason else lead


def _group_retention(g: GroupStatus) -> dict[str, Any] | None:
    r = g.retention
    if r is None:
        return None
    if r.risk == "LOST":
        text = f"{r.lost_records:,} records deleted before the group read them"
    elif r.time_to_loss_seconds is not None:
        text = f"unread records expected to be deleted in ~{duration(r.time_to_loss_seconds)}"
    else:
        text = "no unread record at risk"
    return {"risk": r.risk, "css": {"OK": "ok", "WARN": "warn", "LOST": "stop"}[r.risk],
            "text": text}


def _lifecycle(g: GroupStatus, now: float) -> dict[str, Any] | None:
    lc = g.lifecycle
    if lc is None:
        return None
    return {
        "rebalances": lc.rebalances,
        "at_least": lc.counted_from != "generations",
        "storm": lc.storm,
        "recent": lc.recent_rebalances,
        "rebalancing_text": duration(lc.rebalancing_seconds),
        "last": (f"{duration(now - lc.last_rebalance_at)} ago ({lc.last_cause})"
                 if lc.last_rebalance_at is not None else "none seen"),
        "joined": lc.members_joined, "left": lc.members_left,
        "history": [{"ago": duration(now - c.at), "state": c.state, "generation": c.generation,
                     "members": c.members, "rebalances": c.rebalances, "cause": c.cause or ""}
                    for c in reversed(lc.history)],  # newest first
    }


def summarise(g: GroupStatus) -> str:
    """One line on the group as a whole."""
    bad = [p for p in g.partitions if p.status != "OK"]
    if not g.partitions:
        return "No committed offsets under evaluation."
    if not bad:
        return f"All {g.partition_count} partitions OK."
    words = sorted({p.status for p in bad}, key=lambda w: SEVERITY.get(w, 0))
    return f"{len(bad)} of {g.partition_count} partitions not OK ({', '.join(words)})."


def why(p: PartitionStatus, now: float) -> str:
    """Why the partition has its status, in the rules' terms, from its window's ends."""
    start, end = p.start, p.end
    if end is None:
        return "No commit in the window."
    last = duration(now - end.timestamp_ms / 1000)
    if p.status in ("STOP", "ERR"):
        return (f"Last commit {last} ago at offset {end.offset}; lag {p.current_lag} is not "
                "being consumed.")
    if p.status == "STALL":
        return (f"Commits keep coming but stay at offset {end.offset} while lag is "
                f"{p.current_lag}.")
    if p.status == "REWIND":
        first = start.offset if start is not None else end.offset
        return f"The committed offset went back within the window (from {first})."
    if p.status == "WARN":
        grew = f" ({start.lag} → {end.lag})" if start is not None and start.lag is not None \
            and end.lag is not None else ""
        return f"Lag did not decrease across the window{grew}: the consumer falls behind."
    if p.current_lag == 0:
        return f"Caught up; last commit {last} ago."
    return f"Consuming; last commit {last} ago."


def canary_page(service: Served) -> dict[str, Any]:
    """Every canary probe's last round: availability, latency percentiles, losses."""
    probes = []
    for c in service.collectors:
        if isinstance(c, CanaryProbe):
            snap = c.snapshot()
            probes.append({"name": c.scope_value, "kind": c.kind, "cluster": c.cluster,
                           "snap": snap})
    return {"title": "Canaries", "probes": probes}


def mirror_page(service: Served, name: str) -> dict[str, Any] | None:
    found = next((c for c in service.collectors
                  if isinstance(c, MirrorCollector) and c.cluster == name), None)
    if found is None:
        return None
    view = mirror_view(found, service.evaluator)
    group = view.get("group")
    failover = next((c for c in service.collectors
                     if isinstance(c, FailoverCollector) and c.cluster == name), None)
    return {"title": f"Mirror {name}", "mirror": view,
            "group_status": status_badge(group["status"]) if group else None,
            "failover": failover.snapshot() if failover is not None else None}

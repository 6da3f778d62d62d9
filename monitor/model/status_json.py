"""A group's verdict as JSON, both ways: Burrow's v3 ``status`` object (plus our additive fields)
from a :class:`~monitor.evaluate.job.GroupStatus`, and back.

One definition for every place a verdict leaves or enters as JSON: the HTTP API renders it,
the Spark stream publishes it to its compacted statuses topic, and a service whose cluster is
evaluated by the stream (``offsets_source: pipeline``) reads it back and serves it as if it
had evaluated the group itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from monitor.model.observations import GroupMember
from monitor.model.verdicts import (
    CommitPoint,
    GroupLifecycleStatus,
    GroupRetention,
    GroupStatus,
    PartitionStatus,
    Rates,
    RetentionRisk,
    StateChange,
)


def _point(p: CommitPoint | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"offset": p.offset, "timestamp": p.timestamp_ms, "observedAt": p.observed_ms,
            "lag": p.lag}


def partition_json(p: PartitionStatus) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "owner": p.owner,
        "client_id": p.client_id,
        "status": p.status,
        "start": _point(p.start),
        "end": _point(p.end),
        "current_lag": p.current_lag,
        "complete": p.complete,
        "lag_seconds": p.lag_seconds,
        "lag_seconds_lower_bound": p.lag_seconds_lower_bound,
        "lag_seconds_source": p.lag_seconds_source,
        "retention": _retention(p.retention),
        "velocity": _rates(p.velocity),
        "hot": p.hot,
    }


def _rates(r: Rates | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"consumption_rate": r.consumption_rate, "production_rate": r.production_rate,
            "lag_velocity": r.lag_velocity,
            "time_to_catch_up_seconds": r.time_to_catch_up_seconds,
            "time_to_catch_up_reason": r.time_to_catch_up_reason}


def _retention(r: RetentionRisk | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"risk": r.risk, "lead": r.lead, "lost_records": r.lost_records,
            "time_to_loss_seconds": r.time_to_loss_seconds,
            "time_to_loss_reason": r.time_to_loss_reason, "log_start_rate": r.log_start_rate}


def _group_retention(r: GroupRetention | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"risk": r.risk, "lost_records": r.lost_records,
            "time_to_loss_seconds": r.time_to_loss_seconds,
            "partitions_at_risk": r.partitions_at_risk}


def _lifecycle(lc: GroupLifecycleStatus | None) -> dict[str, Any] | None:
    if lc is None:
        return None
    return {
        "rebalances": lc.rebalances,
        "rebalancing_seconds": lc.rebalancing_seconds,
        "rebalancing": lc.rebalancing,
        "last_rebalance_at": lc.last_rebalance_at,
        "last_cause": lc.last_cause,
        "members_joined": lc.members_joined,
        "members_left": lc.members_left,
        "storm": lc.storm,
        "recent_rebalances": lc.recent_rebalances,
        "counted_from": lc.counted_from,
        "history": [
            {"at": c.at, "state": c.state, "generation": c.generation, "members": c.members,
             "rebalances": c.rebalances, "cause": c.cause}
            for c in lc.history
        ],
    }


def status_json(g: GroupStatus, only_non_ok: bool) -> dict[str, Any]:
    parts = g.non_ok if only_non_ok else g.partitions
    return {
        "cluster": g.cluster,
        "group": g.group,
        "status": g.status,
        "complete": g.complete,
        "partitions": [partition_json(p) for p in parts],
        "partition_count": g.partition_count,
        "maxlag": partition_json(g.maxlag) if g.maxlag is not None else None,
        "totallag": g.totallag,
        "lag_seconds": g.lag_seconds,
        "state": g.state,
        "members": g.members,
        "generation": g.generation,
        "member_list": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "partitions": [{"topic": t, "partition": p} for t, p in m.assignment],
            }
            for m in g.member_list
        ],
        "stale": g.stale,
        "offsets_age_seconds": g.offsets_age_seconds,
        "evaluated_at": g.evaluated_at,
        "retention": _group_retention(g.retention),
        "lifecycle": _lifecycle(g.lifecycle),
        "lag_seconds_source": g.lag_seconds_source,
        "velocity": _rates(g.velocity),
        "hot_partitions": g.hot_partitions,
    }


def notfound_json(cluster: str, group: str) -> dict[str, Any]:
    return {
        "cluster": cluster, "group": group, "status": "NOTFOUND", "complete": 1.0,
        "partitions": [], "partition_count": 0, "maxlag": None, "totallag": 0,
    }


# ---------------------------------------------------------------------- back from JSON


STATUS_WORDS = frozenset({"OK", "WARN", "STALL", "STOP", "REWIND", "NOTFOUND", "ERR"})


def _word(value: Any) -> str:
    if value not in STATUS_WORDS:
        raise ValueError(f"not a status: {value!r}")
    return str(value)


def _point_from(d: Mapping[str, Any] | None) -> CommitPoint | None:
    if d is None:
        return None
    lag = d["lag"]
    return CommitPoint(int(d["offset"]), int(d["timestamp"]), int(d["observedAt"]),
                       None if lag is None else int(lag))


def partition_from_json(d: Mapping[str, Any]) -> PartitionStatus:
    return PartitionStatus(
        topic=str(d["topic"]), partition=int(d["partition"]), status=_word(d["status"]),
        start=_point_from(d["start"]), end=_point_from(d["end"]),
        current_lag=int(d["current_lag"]), lag_seconds=float(d["lag_seconds"]),
        lag_seconds_lower_bound=bool(d["lag_seconds_lower_bound"]),
        complete=float(d["complete"]), owner=str(d["owner"]), client_id=str(d["client_id"]),
        retention=_retention_from(d.get("retention")),
        lag_seconds_source=_opt_str(d.get("lag_seconds_source")),
        velocity=_rates_from(d.get("velocity")),
        hot=bool(d.get("hot", False)),
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _rates_from(d: Mapping[str, Any] | None) -> Rates | None:
    if d is None:
        return None
    return Rates(
        consumption_rate=_opt_float(d["consumption_rate"]),
        production_rate=_opt_float(d["production_rate"]),
        lag_velocity=_opt_float(d["lag_velocity"]),
        time_to_catch_up_seconds=_opt_float(d["time_to_catch_up_seconds"]),
        time_to_catch_up_reason=_opt_str(d["time_to_catch_up_reason"]),
    )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _retention_from(d: Mapping[str, Any] | None) -> RetentionRisk | None:
    if d is None:
        return None
    reason = d["time_to_loss_reason"]
    return RetentionRisk(
        risk=str(d["risk"]), lead=int(d["lead"]), lost_records=int(d["lost_records"]),
        time_to_loss_seconds=_opt_float(d["time_to_loss_seconds"]),
        time_to_loss_reason=None if reason is None else str(reason),
        log_start_rate=float(d["log_start_rate"]),
    )


def _group_retention_from(d: Mapping[str, Any] | None) -> GroupRetention | None:
    if d is None:
        return None
    return GroupRetention(
        risk=str(d["risk"]), lost_records=int(d["lost_records"]),
        time_to_loss_seconds=_opt_float(d["time_to_loss_seconds"]),
        partitions_at_risk=int(d["partitions_at_risk"]),
    )


def _lifecycle_from(d: Mapping[str, Any] | None) -> GroupLifecycleStatus | None:
    if d is None:
        return None
    history = tuple(
        StateChange(float(c["at"]), str(c["state"]),
                    None if c["generation"] is None else int(c["generation"]),
                    int(c["members"]), int(c["rebalances"]),
                    None if c["cause"] is None else str(c["cause"]))
        for c in d["history"]
    )
    cause = d["last_cause"]
    return GroupLifecycleStatus(
        rebalances=int(d["rebalances"]), rebalancing_seconds=float(d["rebalancing_seconds"]),
        rebalancing=bool(d["rebalancing"]), last_rebalance_at=_opt_float(d["last_rebalance_at"]),
        last_cause=None if cause is None else str(cause),
        members_joined=int(d["members_joined"]), members_left=int(d["members_left"]),
        storm=bool(d["storm"]), recent_rebalances=int(d["recent_rebalances"]),
        counted_from=str(d["counted_from"]), history=history,
    )


def group_from_json(d: Mapping[str, Any], *, stale: bool | None = None) -> GroupStatus:
    """The :class:`GroupStatus` a :func:`status_json` object describes (``KeyError``,
    ``TypeError`` or ``ValueError`` when it is not one). ``stale`` overrides the flag: the
    reader knows how old the verdict is, the writer did not."""
    members = tuple(
        GroupMember(str(m["member_id"]), str(m["client_id"]), str(m["host"]),
                    tuple((str(p["topic"]), int(p["partition"])) for p in m["partitions"]))
        for m in d["member_list"]
    )
    maxlag = d["maxlag"]
    age = d["offsets_age_seconds"]
    generation = d["generation"]
    return GroupStatus(
        cluster=str(d["cluster"]), group=str(d["group"]), status=_word(d["status"]),
        complete=float(d["complete"]),
        partitions=tuple(partition_from_json(p) for p in d["partitions"]),
        partition_count=int(d["partition_count"]),
        maxlag=partition_from_json(maxlag) if maxlag is not None else None,
        totallag=int(d["totallag"]), lag_seconds=float(d["lag_seconds"]),
        state=None if d["state"] is None else str(d["state"]),
        generation=None if generation is None else int(generation), member_list=members,
        stale=bool(d["stale"]) if stale is None else stale,
        offsets_age_seconds=None if age is None else float(age),
        evaluated_at=float(d["evaluated_at"]),
        retention=_group_retention_from(d.get("retention")),
        lifecycle=_lifecycle_from(d.get("lifecycle")),
        velocity=_rates_from(d.get("velocity")),
        hot_partitions=int(d.get("hot_partitions", 0)),
        lag_seconds_source=_opt_str(d.get("lag_seconds_source")),
    )

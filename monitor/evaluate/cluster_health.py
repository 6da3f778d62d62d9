"""Cluster health: diagnosis from metadata, and a status (OK, WARN, ERR) with its reasons.

Pure functions over observations (no I/O, no service), so they are tested with hand-built
metadata and reused wherever health is shown (HTTP, Prometheus).

Metadata alone (no JMX, so it also works on managed clusters) gives under-replicated and
offline partitions, leaders away from their preferred replica, per-broker replica and leader
counts with their skew, brokers missing, and the *suspect broker*: the broker missing from the
ISR of every under-replicated partition. That is the manual procedure of "Kafka: The Definitive
Guide" (list under-replicated partitions; if one broker is common to all of them, look at that
broker), automated.

Two Kafka facts shape the inputs. A metadata answer lists only *live* replicas while a replica's
broker is down (0.9 flags such partitions REPLICA_NOT_AVAILABLE), and a dead broker is simply
absent from the broker list. So both "ISR smaller than the replica set" and "broker missing"
need memory: :class:`Placement` keeps each partition's replica list as last seen complete and
the brokers seen before, and is updated from every metadata answer (:func:`update_placement`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from monitor.model.jmx_metrics import BY_NAME, CATALOGUE, BrokerJmx, JmxScrape
from monitor.model.observations import ClusterMetadata
from monitor.store.placement import Placement

Status = Literal["OK", "WARN", "ERR"]
STATUS_LEVEL: dict[Status, int] = {"OK": 0, "WARN": 1, "ERR": 2}
TopicPartition = tuple[str, int]

# --------------------------------------------------------------------------- diagnosis


@dataclass(frozen=True, slots=True)
class PartitionIssue:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]  # assigned (remembered) replicas
    isr: tuple[int, ...]
    missing: tuple[int, ...]  # assigned replicas not in the ISR

    def as_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic, "partition": self.partition, "leader": self.leader,
            "replicas": list(self.replicas), "isr": list(self.isr),
            "missing": list(self.missing),
        }


@dataclass(frozen=True, slots=True)
class MetadataDiagnosis:
    under_replicated: tuple[PartitionIssue, ...]
    offline: tuple[PartitionIssue, ...]
    non_preferred_leaders: tuple[PartitionIssue, ...]
    replicas_per_broker: dict[int, int]
    leaders_per_broker: dict[int, int]
    replica_skew: float  # max/mean - 1 over live brokers: 0 is perfectly even
    leader_skew: float
    live_brokers: tuple[int, ...]
    missing_brokers: tuple[int, ...]
    suspect_broker: int | None


def suspect_broker(issues: Iterable[PartitionIssue]) -> int | None:
    """The one broker missing from the ISR of *every* under-replicated partition, if there is
    exactly one; None when there are none or several (no single culprit)."""
    common: set[int] | None = None
    for issue in issues:
        common = set(issue.missing) if common is None else common & set(issue.missing)
        if not common:
            return None
    return next(iter(common)) if common is not None and len(common) == 1 else None


def _skew(counts: Mapping[int, int], brokers: Iterable[int]) -> float:
    values = [counts.get(b, 0) for b in brokers]
    if not values or sum(values) == 0:
        return 0.0
    return max(values) / (sum(values) / len(values)) - 1.0


def diagnose(
    metadata: ClusterMetadata,
    placement: Placement | None = None,
    expected_brokers: Iterable[int] = (),
) -> MetadataDiagnosis:
    """Everything metadata tells about replication and balance. ``placement`` (memory of
    earlier answers) restores replicas a down broker hides; ``expected_brokers`` (e.g. the
    ones with a configured JMX endpoint) are reported missing when absent from metadata."""
    remembered = placement.replicas if placement is not None else {}
    under: list[PartitionIssue] = []
    offline: list[PartitionIssue] = []
    moved: list[PartitionIssue] = []
    replicas_per: Counter[int] = Counter()
    leaders_per: Counter[int] = Counter()
    for topic, parts in metadata.topics.items():
        for p in parts:
            assigned = remembered.get((topic, p.partition), p.replicas)
            if not set(p.replicas) <= set(assigned):
                assigned = p.replicas  # reassigned since: trust the answer
            missing = tuple(b for b in assigned if b not in p.isr)
            issue = PartitionIssue(topic, p.partition, p.leader, assigned, p.isr, missing)
            replicas_per.update(assigned)
            if p.leader < 0:
                offline.append(issue)
            else:
                leaders_per[p.leader] += 1
                if assigned and p.leader != assigned[0]:
                    moved.append(issue)
            if missing:
                under.append(issue)
    live = tuple(sorted(metadata.brokers))
    known = set(placement.brokers if placement is not None else ()) | set(expected_brokers)
    missing_brokers = tuple(sorted(known - set(live)))
    return MetadataDiagnosis(
        under_replicated=tuple(under),
        offline=tuple(offline),
        non_preferred_leaders=tuple(moved),
        replicas_per_broker={b: replicas_per.get(b, 0) for b in sorted(set(live) | known)},
        leaders_per_broker={b: leaders_per.get(b, 0) for b in sorted(set(live) | known)},
        replica_skew=_skew(replicas_per, live),
        leader_skew=_skew(leaders_per, live),
        live_brokers=live,
        missing_brokers=missing_brokers,
        suspect_broker=suspect_broker(under),
    )


# --------------------------------------------------------------------------- status


@dataclass(frozen=True, slots=True)
class HealthThresholds:
    """Request-handler idle fractions below which a broker is WARN / ERR, and how old
    metadata may be before it no longer counts as current."""

    idle_warn: float = 0.20
    idle_err: float = 0.10
    max_metadata_age: float | None = None  # seconds; None: never stale
    idle_warmup: float = 10.0  # seconds of broker uptime before its 1-min rate means anything


@dataclass(frozen=True, slots=True)
class Reason:
    status: Status
    code: str
    message: str
    broker: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {"status": self.status, "code": self.code, "message": self.message,
                "broker": self.broker}


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    cluster: str
    status: Status
    reasons: tuple[Reason, ...]
    diagnosis: MetadataDiagnosis | None
    jmx: JmxScrape | None
    active_controllers: int | None  # summed over brokers that answered JMX

    def as_dict(self, limit: int = 100) -> dict[str, object]:
        """JSON-ready; partition lists are cut to ``limit`` entries (counts stay exact)."""

        def issues(items: tuple[PartitionIssue, ...]) -> dict[str, object]:
            return {"count": len(items), "partitions": [i.as_dict() for i in items[:limit]]}

        d = self.diagnosis
        metadata = None if d is None else {
            "live_brokers": list(d.live_brokers),
            "missing_brokers": list(d.missing_brokers),
            "suspect_broker": d.suspect_broker,
            "under_replicated": issues(d.under_replicated),
            "offline": issues(d.offline),
            "non_preferred_leaders": issues(d.non_preferred_leaders),
            "replicas_per_broker": {str(b): n for b, n in d.replicas_per_broker.items()},
            "leaders_per_broker": {str(b): n for b, n in d.leaders_per_broker.items()},
            "replica_skew": round(d.replica_skew, 4),
            "leader_skew": round(d.leader_skew, 4),
        }
        brokers = None if self.jmx is None else {
            str(b.broker_id): {
                "ok": b.ok,
                "error": b.error,
                "observed_at": b.observed_at,
                "duration_seconds": round(b.duration, 3),
                "last_success": b.last_success,
                "metrics": {m.name: b.get(m) for m in CATALOGUE} if b.ok else None,
                "absent": sorted(
                    m.name for m in CATALOGUE if b.ok and b.get(m) is None
                    and m.query in self.jmx.queries
                ),
            }
            for b in sorted(self.jmx.brokers.values(), key=lambda b: b.broker_id)
        }
        return {
            "cluster": self.cluster,
            "status": self.status,
            "reasons": [r.as_dict() for r in self.reasons],
            "active_controllers": self.active_controllers,
            "metadata": metadata,
            "jmx": brokers,
        }


def _value(broker: BrokerJmx, name: str) -> float | None:
    return broker.get(BY_NAME[name])


def _jmx_reasons(
    jmx: JmxScrape, thresholds: HealthThresholds
) -> tuple[list[Reason], int | None]:
    reasons: list[Reason] = []
    answered = [b for b in jmx.brokers.values() if b.ok]
    for b in sorted(jmx.brokers.values(), key=lambda b: b.broker_id):
        if not b.ok:
            reasons.append(Reason("WARN", "jmx_unreachable",
                                  f"broker {b.broker_id}: JMX failing: {b.error}", b.broker_id))
            continue
        urp = _value(b, "under_replicated_partitions")
        if urp:
            reasons.append(Reason("WARN", "under_replicated_partitions",
                                  f"broker {b.broker_id} reports {urp:g} under-replicated "
                                  "partitions (JMX)", b.broker_id))
        under_min = _value(b, "under_min_isr_partitions")
        if under_min:
            reasons.append(Reason("ERR", "under_min_isr_partitions",
                                  f"broker {b.broker_id} reports {under_min:g} partitions under "
                                  "min.insync.replicas (JMX)", b.broker_id))
        offline = _value(b, "offline_partitions")
        if offline:
            reasons.append(Reason("ERR", "offline_partitions",
                                  f"controller on broker {b.broker_id} reports {offline:g} "
                                  "offline partitions (JMX)", b.broker_id))
        idle = _value(b, "request_handler_avg_idle_ratio")
        uptime = b.uptime_seconds
        if idle is not None and (uptime is None or uptime >= thresholds.idle_warmup):
            level: Status | None = (
                "ERR" if idle < thresholds.idle_err
                else "WARN" if idle < thresholds.idle_warn else None
            )
            if level is not None:
                reasons.append(Reason(level, "request_handler_idle",
                                      f"broker {b.broker_id}: request handlers idle "
                                      f"{idle:.0%} of the time", b.broker_id))
    controllers = [
        c for b in answered if (c := _value(b, "active_controller_count")) is not None
    ]
    total = round(sum(controllers))
    if controllers:
        all_answered = len(answered) == len(jmx.brokers)
        if total > 1:
            reasons.append(Reason("ERR", "active_controllers",
                                  f"{total} brokers claim to be the active controller"))
        elif total == 0:
            reasons.append(Reason(
                "ERR" if all_answered else "WARN", "active_controllers",
                "no active controller" + ("" if all_answered
                                          else " among the brokers that answered JMX")))
    return reasons, (total if controllers else None)


def assess(
    cluster: str,
    metadata: ClusterMetadata | None,
    placement: Placement | None = None,
    jmx: JmxScrape | None = None,
    thresholds: HealthThresholds | None = None,
    now: float | None = None,
) -> ClusterHealth:
    """The cluster's status: the worst of its reasons (OK when there are none).

    WARN: under-replicated partitions, a broker's JMX unreachable, request handlers idle
    below ``idle_warn``, metadata missing or stale. ERR: offline partitions, partitions under
    min ISR, active controllers summed over brokers ≠ 1, idle below ``idle_err``, a broker
    missing from metadata.
    """
    thresholds = thresholds or HealthThresholds()
    reasons: list[Reason] = []
    diagnosis = None
    if metadata is None:
        reasons.append(Reason("WARN", "no_metadata", "no metadata collected yet"))
    else:
        expected = jmx.brokers.keys() if jmx is not None else ()
        diagnosis = diagnose(metadata, placement, expected)
        age = (now if now is not None else metadata.observed_at) - metadata.observed_at
        if thresholds.max_metadata_age is not None and age > thresholds.max_metadata_age:
            reasons.append(Reason("WARN", "metadata_stale", f"metadata is {age:.0f}s old"))
        for broker in diagnosis.missing_brokers:
            reasons.append(Reason("ERR", "broker_missing",
                                  f"broker {broker} is missing from metadata", broker))
        if diagnosis.under_replicated:
            suspect = diagnosis.suspect_broker
            reasons.append(Reason(
                "WARN", "under_replicated_partitions",
                f"{len(diagnosis.under_replicated)} under-replicated partitions (metadata)"
                + (f"; every one lacks broker {suspect}" if suspect is not None else ""),
                suspect))
        if diagnosis.offline:
            reasons.append(Reason("ERR", "offline_partitions",
                                  f"{len(diagnosis.offline)} partitions have no leader"))
    controllers: int | None = None
    if jmx is not None:
        jmx_reasons, controllers = _jmx_reasons(jmx, thresholds)
        reasons.extend(jmx_reasons)
    status: Status = max((r.status for r in reasons), key=STATUS_LEVEL.__getitem__,
                         default="OK")
    return ClusterHealth(cluster, status, tuple(reasons), diagnosis, jmx, controllers)

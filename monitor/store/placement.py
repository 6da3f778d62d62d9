"""The memory broker health needs beyond the latest metadata: each partition's assigned
replicas as last seen complete, and the brokers known to belong to the cluster (a 0.9 broker
lists only the live replicas of a partition whose replica is down, so a dead broker would
otherwise vanish from the placement). Kept by the store, read by
:mod:`monitor.evaluate.cluster_health`."""

from __future__ import annotations

from dataclasses import dataclass, field

from monitor.model.observations import ClusterMetadata

TopicPartition = tuple[str, int]
REPLICA_NOT_AVAILABLE = "REPLICA_NOT_AVAILABLE"
LEADER_NOT_AVAILABLE = "LEADER_NOT_AVAILABLE"
# Answers in which a 0.9 broker lists only the live replicas: the placement is not what it says.
_PARTIAL_ANSWERS = frozenset({REPLICA_NOT_AVAILABLE, LEADER_NOT_AVAILABLE})


@dataclass(frozen=True, slots=True)
class Placement:
    """What metadata showed before: each partition's assigned replicas (last seen complete)
    and the brokers known to belong to the cluster."""

    replicas: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    brokers: frozenset[int] = frozenset()


def update_placement(previous: Placement | None, metadata: ClusterMetadata) -> Placement:
    """Fold one metadata answer into the memory. A partition flagged REPLICA_NOT_AVAILABLE or
    LEADER_NOT_AVAILABLE (its leader died and no new one is elected yet: the moment a dead
    leader's partitions are first seen) keeps its remembered replica list; deleted topics are
    forgotten; a broker stays known while it is in metadata or still assigned replicas (so a
    decommissioned broker whose partitions were moved away is forgotten, while a dead one is
    not)."""
    old = previous.replicas if previous is not None else {}
    replicas: dict[TopicPartition, tuple[int, ...]] = {}
    for topic, parts in metadata.topics.items():
        for p in parts:
            tp = (topic, p.partition)
            before = old.get(tp)
            if (
                p.error in _PARTIAL_ANSWERS
                and before is not None
                and set(p.replicas) < set(before)
            ):
                replicas[tp] = before
            else:
                replicas[tp] = p.replicas
    assigned = {b for r in replicas.values() for b in r}
    return Placement(replicas, frozenset(metadata.brokers) | assigned)

"""Committed group offsets and group membership, read through the Admin API.

One round: ListGroups (every broker) → the groups to read are the listed ones, every group the
store already knows and ``extra_groups``, all through the cluster's ``groups`` allow/deny
filter → DescribeGroups, many groups per call (state, assignor, members and what they own) →
OffsetFetch per group with ``concurrency`` requests in flight → one ``CommitBatch`` per round.

Why known groups are read even when not listed: on Kafka 0.9 a group whose last member left is
Dead and dropped from ListGroups, but its committed offsets stay; stopped groups must keep being
reported (users of other exporters complain that they vanish).

Failures are per group: a group whose coordinator is down, moving or slow gets a
``GroupFetchFailed`` (the store keeps its offsets, marked stale) and the others are published.
The Kafka calls run in a child process (:mod:`monitor.ingest.admin_worker`) because
librdkafka can abort the whole process on a coordinator failure; a worker that dies fails that
round's unread groups, and a fresh one is started next round. A worker whose coordinator
requests failed is replaced before the next round too: an AdminClient that cached a dead
coordinator keeps timing out after the coordinator moved (librdkafka #5511), and reusing it is
what aborted (#4605).

OffsetFetch form: brokers before 0.10.2 (``broker_version_fallback`` below it) get explicit
partitions. Kafka 0.9.0.1 does answer an empty partition list with every committed offset,
but a broker that is not (or no longer) the group's coordinator answers it with an empty list
and no error (measured on 0.9.0.1: explicit partitions get NOT_COORDINATOR_FOR_GROUP instead),
which would read as "all offsets deleted". Partitions asked for: the members' assignment, the
partitions already known for the group and, for a group with neither, every partition of the
allowed topics in the latest metadata. Newer brokers get the all-partitions form (it has a
group-level error code), with the same partitions asked for explicitly when it answers nothing
(librdkafka's mock cluster does not implement the all-partitions form; on Kafka this costs one
request, for groups without offsets only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from monitor.config import ClusterConfig
from monitor.ingest.admin_worker import (
    BUDGET_EXHAUSTED,
    TIMED_OUT,
    AdminWorker,
    AdminWorkerError,
    OffsetEntry,
)
from monitor.ingest.base import Collector
from monitor.ingest.kafka_client import client_config
from monitor.model.metric_catalogue import Reading
from monitor.model.observations import (
    CommitBatch,
    GroupDeleted,
    GroupFetchFailed,
    GroupMember,
    GroupMembership,
    OffsetsDeleted,
)
from monitor.store.store import Commit, Store, TopicPartition

_log = logging.getLogger("monitor.collector.group_offsets")

#: Seconds allowed on top of librdkafka's own request timeout before a worker counts as hung.
_GRACE = 5.0
#: Extra time for a fresh worker's first op: interpreter start, imports, client creation.
_STARTUP_GRACE = 30.0
#: Groups per DescribeGroups call; up to ``_DESCRIBE_IN_FLIGHT * concurrency`` groups in flight
#: (a description is small and cheap for the broker; offsets are the expensive part).
_DESCRIBE_IN_FLIGHT = 4
#: Errors from a coordinator request that say nothing about the worker's client; any other error
#: (timeout, transport, coordinator moved) retires the worker before the next round.
_BENIGN_ERRORS = frozenset(
    {"_UNSUPPORTED_FEATURE", "GROUP_AUTHORIZATION_FAILED", "GROUP_ID_NOT_FOUND", "_INVALID_ARG"}
)
#: A per-partition error that only means "no offset here", not a failed read.
_NO_OFFSET_ERRORS = frozenset({"UNKNOWN_TOPIC_OR_PART"})
_ALL_PARTITIONS_FORM_SINCE = (0, 10, 2)  # OffsetFetch v2: group-level error code


@dataclass
class RoundStats:
    """What one round did, for logs, tests and benchmarks."""

    round: int
    started_at: float  # unix seconds
    seconds: float = 0.0
    listed: int = 0
    listing_complete: bool = False
    groups: int = 0  # groups the round set out to read
    fetched: int = 0  # groups whose offsets were read
    commits: int = 0
    deleted_groups: int = 0
    deleted_offsets: int = 0
    failures: dict[str, str] = field(default_factory=dict)  # group -> error
    # Groups whose offsets were read but whose description failed (state and members unknown),
    # e.g. KIP-848 groups where the broker has no ConsumerGroupDescribe: group -> error.
    undescribed: dict[str, str] = field(default_factory=dict)
    worker_pid: int | None = None
    worker_started: bool = False  # this round spawned a new worker
    worker_retired: bool = False  # ... and/or replaced it afterwards
    phase_seconds: dict[str, float] = field(default_factory=dict)
    error: str | None = None  # why the round failed as a whole


@dataclass
class _Round:
    stats: RoundStats
    listed: set[str] = field(default_factory=set)
    list_errors: list[tuple[str, str]] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    described: dict[str, Any] = field(default_factory=dict)
    offsets: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # not asked: why

    @property
    def listing_complete(self) -> bool:
        return not self.list_errors


class GroupOffsetsCollector(Collector):
    """Committed offsets and membership of a cluster's consumer groups (source ``admin``).

    ``extra_groups`` are read every round whether or not Kafka lists them (still subject to
    the ``groups`` filter): for brokers that cannot list groups (ListGroups denied by ACLs,
    librdkafka's mock cluster) or groups that must be watched from the first round.
    """

    kind = "group_offsets"

    def __init__(
        self,
        cluster: ClusterConfig,
        interval: float,
        concurrency: int,
        store: Store,
        *,
        extra_groups: Iterable[str] = (),
    ) -> None:
        super().__init__(cluster.name, interval)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self._config = cluster
        self._store = store
        self.concurrency = concurrency
        self.extra_groups = frozenset(extra_groups)
        self.explicit_partitions = _needs_explicit_partitions(cluster.broker_version_fallback)
        self._worker: AdminWorker | None = None
        self.rounds = 0  # rounds started (a round's commits carry its number as order)
        self.phase = "idle"  # what the current round waits for: list, describe, offsets
        self._suspects: set[str] = set()
        self.worker_starts = 0
        self._closed = False
        self.last_round: RoundStats | None = None
        self.describe_failures = 0  # groups not described, summed over rounds
        self._undescribed: set[str] = set()  # logged once until described again

    @property
    def worker_pid(self) -> int | None:
        """PID of the current worker process (None between a crash and the next round)."""
        return self._worker.pid if self._worker is not None else None

    # ------------------------------------------------------------------------- a round

    def collect(self) -> None:
        self.rounds += 1
        started = time.monotonic()
        r = _Round(RoundStats(round=self.rounds, started_at=time.time()))
        allowed = self._config.groups.matches
        # Known before listing, so that they are reported stale if the worker dies listing.
        r.targets = sorted(
            {g for g in self._store.groups(self.cluster) if allowed(g)}
            | {g for g in self.extra_groups if allowed(g)}
        )
        crash: AdminWorkerError | None = None
        try:
            worker = self._ensure_worker(r.stats)
            self._read(worker, r)
        except AdminWorkerError as exc:  # it was killed on the way: a new one next round
            crash = exc
            self._worker = None
            if not self._closed:
                _log.warning(
                    "admin worker lost", extra={"collector": self.name, "error": str(exc)}
                )
        self.phase = "idle"
        self._publish(r, crash)
        stats = r.stats
        if self._worker is not None and self._client_suspect(r):
            self._retire_worker()
            stats.worker_retired = True
        self._suspects = set(stats.failures)
        stats.seconds = time.monotonic() - started
        self.last_round = stats
        if crash is not None:
            stats.error = str(crash)
            raise crash
        if not stats.fetched and (stats.failures or not (r.listed or r.listing_complete)):
            first = next(iter(stats.failures.items()), None)
            stats.error = (
                f"none of {stats.groups} group(s) could be read (e.g. {first[0]}: {first[1]})"
                if first is not None
                else f"cannot list groups: {_describe_errors(r.list_errors)}"
            )
            raise RuntimeError(stats.error)

    def _read(self, worker: AdminWorker, r: _Round) -> None:
        timeout = self._config.request_timeout
        budget = max(self.interval, timeout)
        startup = _STARTUP_GRACE if r.stats.worker_started else 0.0
        allowed = self._config.groups.matches

        wanted = set(r.targets)
        self.phase = "list"
        listing = worker.call("list", {"timeout": timeout}, timeout + _GRACE + startup, _ignore)
        r.stats.phase_seconds["list"] = listing["seconds"]
        r.list_errors = [tuple(e) for e in listing["errors"]]
        r.listed = {g for g in listing["groups"] if allowed(g)}
        r.stats.listed, r.stats.listing_complete = len(r.listed), r.listing_complete
        wanted |= r.listed
        # Groups that failed last round go last, so a dead coordinator's groups (which take a
        # whole request timeout each) never hold up the healthy ones.
        r.targets = sorted(wanted - self._suspects) + sorted(wanted & self._suspects)
        if not r.targets:
            return

        self.phase = "describe"
        summary = worker.call(
            "describe",
            {
                "groups": r.targets,
                "timeout": timeout,
                "budget": budget / 2,
                "chunk": self.concurrency,
                "limit": self.concurrency * _DESCRIBE_IN_FLIGHT,
            },
            budget / 2 + timeout + _GRACE,
            r.described.update,
        )
        r.stats.phase_seconds["describe"] = summary["seconds"]

        requests = self._offset_requests(r)
        if not requests:
            return
        self.phase = "offsets"
        summary = worker.call(
            "offsets",
            {"requests": requests, "timeout": timeout, "budget": budget,
             "limit": self.concurrency},
            budget + timeout + _GRACE,
            r.offsets.update,
        )
        r.stats.phase_seconds["offsets"] = summary["seconds"]

    def _offset_requests(self, r: _Round) -> list[tuple[str, Any, Any]]:
        """(group, partitions or None for all, fallback partitions) per group to read.

        Partitions named: every partition of each topic the group is known to consume (its
        members' assignment, the commits the store holds), so partitions it never committed
        before and partitions added since are seen too (``assign()`` users such as stream
        processors commit without membership); for a group with neither, every partition of
        the allowed topics."""
        partitions_of = self._partitions_by_topic()
        everything = sorted(tp for tps in partitions_of.values() for tp in tps)
        requests: list[tuple[str, Any, Any]] = []
        for group in r.targets:
            described = r.described.get(group)
            if described is not None and described[0] == "error" and described[1] in (
                TIMED_OUT, BUDGET_EXHAUSTED
            ):
                # Same coordinator as OffsetFetch: asking again would only wait as long.
                r.skipped[group] = f"describe: {described[1]}: {described[2]}"
                continue
            wanted: set[TopicPartition] = set()
            if described is not None and described[0] == "ok":
                for member in described[1]["members"]:
                    wanted.update((t, p) for t, p in member[4])
            snapshot = self._store.group(self.cluster, group)
            if snapshot is not None:
                wanted.update(snapshot.commits)
            for topic in {t for t, _ in wanted}:
                wanted.update(partitions_of.get(topic, ()))
            allowed = self._config.topics.matches
            partitions = sorted(tp for tp in wanted if allowed(tp[0])) or everything
            if self.explicit_partitions:
                if not partitions:
                    r.skipped[group] = "no partitions known to ask for (no metadata yet)"
                    continue
                requests.append((group, partitions, None))
            else:
                requests.append((group, None, partitions))
        return requests

    def _partitions_by_topic(self) -> dict[str, list[TopicPartition]]:
        """Partitions of the allowed topics, from the latest metadata in the store."""
        metadata = self._store.metadata(self.cluster)
        if metadata is None:
            return {}
        allowed = self._config.topics.matches
        return {
            topic: [(topic, p.partition) for p in parts]
            for topic, parts in metadata.topics.items()
            if allowed(topic)
        }

    # ------------------------------------------------------------------------- publishing

    def _publish(self, r: _Round, crash: AdminWorkerError | None) -> None:
        """Memberships, then the round's commits, then deletions, then failures (last, so
        a partly read group ends up stale rather than fresh)."""
        stats, store, cluster = r.stats, self._store, self.cluster
        stats.groups = len(r.targets)
        now = time.time()
        for group, result in r.described.items():
            if result[0] != "ok":
                stats.undescribed[group] = f"{result[1]}: {result[2]}"
                continue
            if result[1]["state"] == "Dead":
                # Kafka's answer for a group with no members and no metadata (0.9: whenever
                # the last member left): as a group-metadata tombstone, it keeps the offsets.
                store.put_group_deleted(GroupDeleted(cluster, group, now))
            else:
                store.put_group(_membership(cluster, group, result[1], now))

        topic_allowed = self._config.topics.matches
        batch: dict[str, list[Any]] = {"groups": [], "topics": [], "partitions": [], "offsets": []}
        deletions: list[tuple[str, list[TopicPartition], bool]] = []
        for group in r.targets:
            result = r.offsets.get(group)
            if result is None:
                stats.failures[group] = (
                    r.skipped.get(group) or (str(crash) if crash else "not read this round")
                )
                continue
            if result[0] != "ok":
                stats.failures[group] = f"{result[1]}: {result[2]}"
                continue
            form, entries = result[1], result[2]
            failed = [e for e in entries if e[3] is not None and e[3] not in _NO_OFFSET_ERRORS]
            committed = [e for e in entries if e[3] is None and e[2] >= 0]
            for topic, partition, offset, _ in committed:
                if topic_allowed(topic):
                    batch["groups"].append(group)
                    batch["topics"].append(topic)
                    batch["partitions"].append(partition)
                    batch["offsets"].append(offset)
            if failed:
                stats.failures[group] = f"{failed[0][3]} for {len(failed)} partition(s)"
                continue
            stats.fetched += 1
            snapshot = self._store.group(cluster, group)
            if snapshot is None:
                continue
            gone = self._gone(r, snapshot.commits, form, entries, committed)
            group_gone = not committed and r.listing_complete and group not in r.listed
            if gone or group_gone:
                deletions.append((group, gone, group_gone))

        observed = time.time()
        if batch["offsets"]:
            n = len(batch["offsets"])
            store.put_commits(
                CommitBatch(
                    cluster=cluster,
                    source="admin",
                    observed_at=observed,
                    groups=batch["groups"],
                    topics=batch["topics"],
                    partitions=batch["partitions"],
                    offsets=batch["offsets"],
                    commit_times=[None] * n,
                    orders=[r.stats.round] * n,
                )
            )
            stats.commits = n
        for group, gone, group_gone in deletions:
            if group_gone:
                store.put_group_deleted(GroupDeleted(cluster, group, observed))
                stats.deleted_groups += 1
            for topic, partition in gone:
                store.put_offsets_deleted(
                    OffsetsDeleted(cluster, group, topic, partition, observed)
                )
            stats.deleted_offsets += len(gone)
        for group, error in stats.failures.items():
            store.put_group_fetch_failed(GroupFetchFailed(cluster, group, error, observed))
        self._report_undescribed(stats)

    def _report_undescribed(self, stats: RoundStats) -> None:
        """Counted every round, logged when a group starts failing to be described: its
        offsets are still judged, only its state and members are unknown."""
        self.describe_failures += len(stats.undescribed)
        for group in sorted(stats.undescribed.keys() - self._undescribed):
            _log.warning("group not described; its offsets are still read",
                         extra={"collector": self.name, "group": group,
                                "error": stats.undescribed[group]})
        self._undescribed = set(stats.undescribed)

    def counters(self) -> list[Reading]:
        return [Reading("kafka_monitor_group_describe_failures", (self.cluster,),
                        self.describe_failures)]

    def _gone(
        self,
        r: _Round,
        stored: dict[TopicPartition, Commit],
        form: str,
        entries: list[OffsetEntry],
        committed: list[OffsetEntry],
    ) -> list[TopicPartition]:
        """Partitions the store holds a commit for that Kafka now says have none: absent from
        an all-partitions answer, or asked for explicitly and answered without an offset.
        Only commits seen before the round started: a newer one (another source) wins."""
        has = {(e[0], e[1]) for e in committed}
        asked = {(e[0], e[1]) for e in entries}
        allowed = self._config.topics.matches
        return sorted(
            tp
            for tp, commit in stored.items()
            if tp not in has
            and (form == "all" or tp in asked)
            and commit.observed_at < r.stats.started_at
            and allowed(tp[0])
        )

    # ------------------------------------------------------------------------- the worker

    def _ensure_worker(self, stats: RoundStats) -> AdminWorker:
        worker = self._worker
        if worker is None or not worker.alive:
            if self._closed:
                raise AdminWorkerError("collector closed")
            if worker is not None:
                worker.kill()  # reap a worker that died between rounds
            worker = AdminWorker(
                client_config(self._config, **{"client.id": f"kafka-monitor-{self.cluster}"}),
                name=f"admin-worker-{self.cluster}",
            )
            try:
                worker.start()
            except OSError as exc:
                raise AdminWorkerError(f"cannot start the admin worker: {exc}") from exc
            self._worker = worker
            self.worker_starts += 1
            stats.worker_started = True
        stats.worker_pid = worker.pid
        return worker

    def _client_suspect(self, r: _Round) -> bool:
        """Whether a coordinator request failed in a way that may have left the worker's
        client with a stale coordinator or a pending request (see the module docstring)."""
        results = list(r.described.values()) + list(r.offsets.values())
        return any(res[0] == "error" and res[1] not in _BENIGN_ERRORS for res in results)

    def _retire_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            _log.info(
                "replacing admin worker after coordinator errors",
                extra={"collector": self.name, "pid": worker.pid},
            )
            worker.kill()

    def close(self) -> None:
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()


def _membership(cluster: str, group: str, d: dict[str, Any], observed_at: float) -> GroupMembership:
    return GroupMembership(
        cluster=cluster,
        group=group,
        source="admin",
        observed_at=observed_at,
        state=d["state"],
        # The Admin API only says whether the protocol type is empty ("simple" groups that
        # commit without group management) or not (consumer groups, as far as it describes).
        protocol_type="" if d["simple"] else "consumer",
        protocol=d["protocol"],
        generation=None,  # DescribeGroups does not return it
        members=tuple(
            GroupMember(
                member_id=member_id,
                client_id=client_id,
                host=host,
                assignment=tuple(sorted((t, p) for t, p in assignment)),
                instance_id=instance_id,
            )
            for member_id, client_id, host, instance_id, assignment in d["members"]
        ),
    )


def _needs_explicit_partitions(version: str | None) -> bool:
    if version is None:
        return False  # the client negotiates versions: a broker this old needs the fallback
    parts = tuple(int(x) for x in version.split("."))
    return parts < _ALL_PARTITIONS_FORM_SINCE


def _describe_errors(errors: list[tuple[str, str]]) -> str:
    return "; ".join(f"{name}: {message}" for name, message in errors[:3]) or "no answer"


def _ignore(items: list[tuple[str, Any]]) -> None:
    return None

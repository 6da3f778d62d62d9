"""Observations as flat rows: the one format the recorder writes, the streaming source emits
and the replay reads, so a recording, a live stream and the service's store see the same data.

One row per unit of an observation (a commit of a :class:`CommitBatch`, a partition of a
:class:`BrokerOffsets` round, one membership snapshot ...). Rows of one observation share
``(run, seq)`` and keep their position in ``idx``; ``seq`` is the order in which the store
applied the observations (the recorder's counter; the stream uses observation time), ``run``
one life of the producer (a service restart starts a new store, so a replay starts afresh).
Nested parts (members, topic lists, canary snapshots) are JSON in ``payload``: they are rare
next to commits and log ends, which are plain columns.

Kinds: ``commits``, ``log_ends``, ``metadata``, ``membership``, ``group_deleted``,
``offsets_deleted``, ``fetch_failed``, ``group_removed``, ``canary`` (not replayed), and the
replay's clock marks ``round`` (an evaluation the service made: ``payload`` holds its reader
freshness) and ``fresh`` (the stream has read everything up to ``observed_at``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.model.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    GroupDeleted,
    GroupFetchFailed,
    GroupMember,
    GroupMembership,
    OffsetsDeleted,
    PartitionMetadata,
)
from monitor.store.store import GroupRemoved

if TYPE_CHECKING:
    from monitor.evaluate.job import ClusterEvaluation

# (name, arrow type name); ``cluster`` is a column in memory and a directory in a recording.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("cluster", "string"),
    ("run", "int64"),
    ("seq", "int64"),
    ("idx", "int32"),
    ("kind", "string"),
    ("observed_at", "float64"),
    ("group", "string"),
    ("topic", "string"),
    ("partition", "int32"),
    ("offset", "int64"),
    ("log_start", "int64"),
    ("commit_time", "int64"),
    ("order", "int64"),
    ("source", "string"),
    ("error", "string"),
    ("payload", "string"),
)
NAMES = tuple(n for n, _ in COLUMNS)
LAST_IDX = 2**31 - 1  # a clock mark sorts after every row of its seq
_SPARK_TYPES = {"string": "string", "int64": "bigint", "int32": "int", "float64": "double"}
SPARK_DDL = ", ".join(f"`{n}` {_SPARK_TYPES[t]}" for n, t in COLUMNS)
"""The rows' schema as Spark DDL (the streaming source and the backtest use it)."""


def arrow_schema(with_cluster: bool = True) -> Any:
    import pyarrow as pa

    return pa.schema(
        [(n, getattr(pa, t)()) for n, t in COLUMNS if with_cluster or n != "cluster"]
    )


@dataclass(frozen=True, slots=True)
class CanarySnapshot:
    """A canary probe's figures at one moment (its ``snapshot()``), recorded as is."""

    cluster: str
    probe: str
    observed_at: float
    figures: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClockMark:
    """A replay clock mark: ``round`` (evaluate here; the service's reader was fresh up to
    ``fresh_at``) or ``fresh`` (everything up to ``at`` has been read)."""

    cluster: str
    kind: str
    at: float
    fresh_at: float | None = None


class RowBuilder:
    """Accumulates observations as columns (lists), then one Arrow table or pandas frame."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {n: [] for n in NAMES}

    def __len__(self) -> int:
        return len(self.cols["seq"])

    def _rows(self, cluster: str, run: int, seq: int, kind: str, at: float, n: int,
              **columns: list[Any] | Any) -> None:
        c = self.cols
        c["cluster"].extend([cluster] * n)
        c["run"].extend([run] * n)
        c["seq"].extend([seq] * n)
        c["idx"].extend(range(n) if kind not in ("round", "fresh") else [LAST_IDX] * n)
        c["kind"].extend([kind] * n)
        c["observed_at"].extend([at] * n)
        for name in NAMES[6:]:
            value = columns.get(name)
            if isinstance(value, list):
                c[name].extend(value)
            else:
                c[name].extend([value] * n)

    def add(self, run: int, seq: int, obs: object) -> None:
        """Append ``obs`` (any observation the store takes, or a canary snapshot / mark)."""
        if isinstance(obs, CommitBatch):
            self._rows(
                obs.cluster, run, seq, "commits", obs.observed_at, len(obs.offsets),
                group=obs.groups, topic=obs.topics, partition=obs.partitions,
                offset=obs.offsets, commit_time=obs.commit_times, order=obs.orders,
                source=obs.source,
            )
        elif isinstance(obs, BrokerOffsets):
            failed = list(obs.failed.items())
            n = len(obs.log_end) + len(failed)
            self._rows(
                obs.cluster, run, seq, "log_ends", obs.observed_at, n,
                topic=obs.topics + [tp[0] for tp, _ in failed],
                partition=obs.partitions + [tp[1] for tp, _ in failed],
                offset=obs.log_end + [None] * len(failed),
                log_start=obs.log_start + [None] * len(failed),
                error=[None] * len(obs.log_end) + [e for _, e in failed],
            )
        elif isinstance(obs, GroupMembership):
            payload: dict[str, Any] = {
                "state": obs.state, "protocol_type": obs.protocol_type, "protocol": obs.protocol,
                "generation": obs.generation,
                "members": [
                    [m.member_id, m.client_id, m.host, [list(a) for a in m.assignment],
                     m.instance_id]
                    for m in obs.members
                ],
            }
            self._rows(obs.cluster, run, seq, "membership", obs.observed_at, 1,
                       group=obs.group, source=obs.source,
                       payload=json.dumps(payload, separators=(",", ":")))
        elif isinstance(obs, ClusterMetadata):
            payload = {
                "brokers": obs.brokers, "controller": obs.controller_id,
                "topics": {t: len(parts) for t, parts in obs.topics.items()},
            }
            self._rows(obs.cluster, run, seq, "metadata", obs.observed_at, 1,
                       payload=json.dumps(payload, separators=(",", ":")))
        elif isinstance(obs, GroupDeleted):
            self._rows(obs.cluster, run, seq, "group_deleted", obs.observed_at, 1,
                       group=obs.group)
        elif isinstance(obs, OffsetsDeleted):
            self._rows(obs.cluster, run, seq, "offsets_deleted", obs.observed_at, 1,
                       group=obs.group, topic=obs.topic, partition=obs.partition)
        elif isinstance(obs, GroupFetchFailed):
            self._rows(obs.cluster, run, seq, "fetch_failed", obs.observed_at, 1,
                       group=obs.group, error=obs.error)
        elif isinstance(obs, GroupRemoved):
            # When an operator deleted it is not known here: at the next observation's time.
            self._rows(obs.cluster, run, seq, "group_removed", float("nan"), 1, group=obs.group)
        elif isinstance(obs, CanarySnapshot):
            self._rows(obs.cluster, run, seq, "canary", obs.observed_at, 1, group=obs.probe,
                       payload=json.dumps(obs.figures, separators=(",", ":"), default=str))
        elif isinstance(obs, ClockMark):
            mark = None if obs.fresh_at is None else json.dumps({"fresh_at": obs.fresh_at})
            self._rows(obs.cluster, run, seq, obs.kind, obs.at, 1, payload=mark)
        else:
            raise TypeError(f"not an observation: {type(obs).__name__}")

    def to_arrow(self, with_cluster: bool = True) -> Any:
        import pyarrow as pa

        schema = arrow_schema(with_cluster)
        return pa.table({n: self.cols[n] for n in schema.names}, schema=schema)

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()


def row_count(obs: object) -> int:
    """How many rows :meth:`RowBuilder.add` writes for ``obs`` (the recorder's buffer bound)."""
    if isinstance(obs, CommitBatch):
        return len(obs.offsets)
    if isinstance(obs, BrokerOffsets):
        return len(obs.log_end) + len(obs.failed)
    return 1


# ------------------------------------------------------------------------------- decoding


@dataclass(frozen=True, slots=True)
class Event:
    """One decoded observation (or clock mark) with its place in the order."""

    run: int
    seq: int
    at: float
    observation: object


def _opt(v: Any) -> Any:
    """A pandas/numpy null (None, NaN, pd.NA) as None."""
    if v is None:
        return None
    try:
        return None if v != v else v  # NaN
    except TypeError:  # pd.NA
        return None


def _ints(values: Any) -> list[Any]:
    return [None if (x := _opt(v)) is None else int(x) for v in values]


def events(frame: Any) -> Iterator[Event]:
    """The observations of a pandas frame of rows, in replay order (``run``, ``seq``,
    ``idx``). Vectorised per observation: one list per column slice, no object per row."""
    if len(frame) == 0:
        return
    frame = frame.sort_values(["run", "seq", "idx"], kind="stable")
    run = frame["run"].to_numpy(np.int64)
    seq = frame["seq"].to_numpy(np.int64)
    kind = frame["kind"].to_numpy(object)
    cluster = frame["cluster"].to_numpy(object)
    # An observation is a run of rows with one (run, seq, kind, cluster); a mark is alone.
    mark = (kind == "round") | (kind == "fresh")
    cut = np.flatnonzero(
        (run[1:] != run[:-1]) | (seq[1:] != seq[:-1]) | (kind[1:] != kind[:-1])
        | (cluster[1:] != cluster[:-1]) | mark[1:]
    ) + 1
    starts = np.concatenate(([0], cut)).tolist()
    ends = np.concatenate((cut, [len(frame)])).tolist()
    at = frame["observed_at"].to_numpy(np.float64)
    cols = {n: frame[n].to_numpy(object) for n in NAMES[6:]}
    for a, b in zip(starts, ends, strict=True):
        obs = _decode(str(kind[a]), str(cluster[a]), float(at[a]), cols, a, b)
        if obs is not None:
            yield Event(int(run[a]), int(seq[a]), float(at[a]), obs)


def _decode(kind: str, cluster: str, at: float, c: dict[str, Any], lo: int, hi: int) -> object:
    def col(name: str) -> list[Any]:
        return c[name][lo:hi].tolist()

    if kind == "commits":
        times = _ints(col("commit_time"))
        return CommitBatch(
            cluster, c["source"][lo], at, col("group"), col("topic"),
            [int(p) for p in col("partition")], [int(o) for o in col("offset")], times,
            [int(o) for o in col("order")],
        )
    if kind == "log_ends":
        err = [_opt(e) for e in col("error")]
        ok = [e is None for e in err]
        topics, parts = col("topic"), [int(p) for p in col("partition")]
        ends, starts = col("offset"), col("log_start")
        return BrokerOffsets(
            cluster, at,
            [t for t, k in zip(topics, ok, strict=True) if k],
            [p for p, k in zip(parts, ok, strict=True) if k],
            [int(s) for s, k in zip(starts, ok, strict=True) if k],
            [int(e) for e, k in zip(ends, ok, strict=True) if k],
            {(t, p): e for t, p, e in zip(topics, parts, err, strict=True) if e is not None},
        )
    if kind in ("round", "fresh"):
        payload = _opt(c["payload"][lo])
        fresh = json.loads(payload).get("fresh_at") if payload else None
        return ClockMark(cluster, kind, at, fresh)
    group = str(c["group"][lo])
    if kind == "membership":
        p = json.loads(c["payload"][lo])
        members = tuple(
            GroupMember(m[0], m[1], m[2], tuple((t, int(n)) for t, n in m[3]), m[4])
            for m in p["members"]
        )
        return GroupMembership(
            cluster, group, c["source"][lo], at, p["state"], p["protocol_type"],
            p["protocol"], p["generation"], members,
        )
    if kind == "metadata":
        p = json.loads(c["payload"][lo])
        layout = {
            t: tuple(PartitionMetadata(i, -1, (), ()) for i in range(n))
            for t, n in p["topics"].items()
        }
        brokers = {int(b): h for b, h in p["brokers"].items()}
        return ClusterMetadata(cluster, at, brokers, int(p["controller"]), layout)
    if kind == "group_deleted":
        return GroupDeleted(cluster, group, at)
    if kind == "offsets_deleted":
        return OffsetsDeleted(cluster, group, str(c["topic"][lo]), int(c["partition"][lo]), at)
    if kind == "fetch_failed":
        return GroupFetchFailed(cluster, group, str(c["error"][lo]), at)
    if kind == "group_removed":
        return GroupRemoved(cluster, group)
    return None  # canary snapshots and unknown kinds are not replayed


# --------------------------------------------------------------------------- verdicts

VERDICT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cluster", "string"),
    ("group", "string"),
    ("evaluated_at", "double"),
    ("status", "string"),
    ("lag_seconds", "double"),
    ("totallag", "bigint"),
    ("partitions", "bigint"),
)
VERDICT_DDL = ", ".join(f"`{n}` {t}" for n, t in VERDICT_COLUMNS)
Verdicts = dict[str, list[Any]]


def verdicts(ev: ClusterEvaluation) -> Verdicts:
    """Every group's status, lag in seconds (its worst partition's), total lag and partition
    count from one round's arrays (no per-group object). Groups known only by membership are
    OK with no partitions, as the API reports them. The recorder stores the service's
    verdicts with this, the replay its own: one definition of "the status"."""
    names: list[str] = []
    status: list[str] = []
    lag: list[float] = []
    total: list[int] = []
    parts: list[int] = []
    if ev.data is not None and ev.groups is not None and ev.group_lag_seconds is not None:
        names = list(ev.data.group_names)
        status = ev.groups.status_names()
        lag = np.round(ev.group_lag_seconds, 3).tolist()
        total = ev.groups.totallag.tolist()
        parts = ev.groups.partition_count.tolist()
    extra = sorted(set(ev.states).difference(names))
    names += extra
    status += ["OK"] * len(extra)
    lag += [0.0] * len(extra)
    total += [0] * len(extra)
    parts += [0] * len(extra)
    n = len(names)
    return {
        "cluster": [ev.cluster] * n, "group": names, "evaluated_at": [ev.evaluated_at] * n,
        "status": status, "lag_seconds": lag, "totallag": total, "partitions": parts,
    }


def empty_verdicts() -> Verdicts:
    return {n: [] for n, _ in VERDICT_COLUMNS}


def extend(into: Verdicts, more: Verdicts) -> None:
    for k, v in more.items():
        into[k].extend(v)

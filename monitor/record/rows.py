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
from collections.abc import Callable, Iterator
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
    RecordTimes,
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
        codec = _BY_TYPE.get(type(obs))
        if codec is None:
            raise TypeError(f"not an observation: {type(obs).__name__}")
        kind, cluster, at, n, columns = codec.encode(obs)
        self._rows(cluster, run, seq, kind, at, n, **columns)

    def to_arrow(self, with_cluster: bool = True) -> Any:
        import pyarrow as pa

        schema = arrow_schema(with_cluster)
        return pa.table({n: self.cols[n] for n in schema.names}, schema=schema)

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()


def row_count(obs: object) -> int:
    """How many rows :meth:`RowBuilder.add` writes for ``obs`` (the recorder's buffer bound),
    without encoding it."""
    codec = _BY_TYPE.get(type(obs))
    return 1 if codec is None or codec.rows is None else codec.rows(obs)


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
    codec = _BY_KIND.get(kind)
    if codec is None or codec.decode is None:
        return None  # canary snapshots and unknown kinds are not replayed
    return codec.decode(_Slice(kind, cluster, at, c, lo, hi))


@dataclass(frozen=True, slots=True)
class _Slice:
    """The rows of one observation, as its decoder reads them."""

    kind: str
    cluster: str
    at: float
    c: dict[str, Any]
    lo: int
    hi: int

    def col(self, name: str) -> list[Any]:
        return self.c[name][self.lo:self.hi].tolist()  # type: ignore[no-any-return]

    def first(self, name: str) -> Any:
        return self.c[name][self.lo]

    @property
    def group(self) -> str:
        return str(self.c["group"][self.lo])

    def payload(self) -> Any:
        return json.loads(self.c["payload"][self.lo])


# ------------------------------------------------------------------- one codec per type
# Each observation type's rows, written and read side by side: a new observation is one
# pair here and one line in CODECS.

Columns = dict[str, Any]
Encoded = tuple[str, str, float, int, Columns]  # kind, cluster, observed_at, rows, columns


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def _encode_commits(o: CommitBatch) -> Encoded:
    return "commits", o.cluster, o.observed_at, len(o.offsets), dict(
        group=o.groups, topic=o.topics, partition=o.partitions, offset=o.offsets,
        commit_time=o.commit_times, order=o.orders, source=o.source,
    )


def _decode_commits(r: _Slice) -> CommitBatch:
    return CommitBatch(
        r.cluster, r.first("source"), r.at, r.col("group"), r.col("topic"),
        [int(p) for p in r.col("partition")], [int(o) for o in r.col("offset")],
        _ints(r.col("commit_time")), [int(o) for o in r.col("order")],
    )


def _encode_log_ends(o: BrokerOffsets) -> Encoded:
    failed = list(o.failed.items())
    return "log_ends", o.cluster, o.observed_at, len(o.log_end) + len(failed), dict(
        topic=o.topics + [tp[0] for tp, _ in failed],
        partition=o.partitions + [tp[1] for tp, _ in failed],
        offset=o.log_end + [None] * len(failed),
        log_start=o.log_start + [None] * len(failed),
        error=[None] * len(o.log_end) + [e for _, e in failed],
    )


def _decode_log_ends(r: _Slice) -> BrokerOffsets:
    err = [_opt(e) for e in r.col("error")]
    ok = [e is None for e in err]
    topics, parts = r.col("topic"), [int(p) for p in r.col("partition")]
    ends, starts = r.col("offset"), r.col("log_start")
    return BrokerOffsets(
        r.cluster, r.at,
        [t for t, k in zip(topics, ok, strict=True) if k],
        [p for p, k in zip(parts, ok, strict=True) if k],
        [int(s) for s, k in zip(starts, ok, strict=True) if k],
        [int(e) for e, k in zip(ends, ok, strict=True) if k],
        {(t, p): e for t, p, e in zip(topics, parts, err, strict=True) if e is not None},
    )


def _encode_record_times(o: RecordTimes) -> Encoded:
    keys = list(o.timestamps_ms)
    return "record_times", o.cluster, o.observed_at, len(keys), dict(
        topic=[k[0] for k in keys], partition=[k[1] for k in keys],
        offset=[k[2] for k in keys],
        commit_time=[o.timestamps_ms[k] for k in keys],  # the record's timestamp (ms)
    )


def _decode_record_times(r: _Slice) -> RecordTimes:
    return RecordTimes(r.cluster, r.at, {
        (str(t), int(p), int(o)): int(ts)
        for t, p, o, ts in zip(r.col("topic"), r.col("partition"), r.col("offset"),
                               r.col("commit_time"), strict=True)
    })


def _encode_membership(o: GroupMembership) -> Encoded:
    payload = {
        "state": o.state, "protocol_type": o.protocol_type, "protocol": o.protocol,
        "generation": o.generation,
        "members": [[m.member_id, m.client_id, m.host, [list(a) for a in m.assignment],
                     m.instance_id] for m in o.members],
    }
    return "membership", o.cluster, o.observed_at, 1, dict(
        group=o.group, source=o.source, payload=_json(payload)
    )


def _decode_membership(r: _Slice) -> GroupMembership:
    p = r.payload()
    members = tuple(
        GroupMember(m[0], m[1], m[2], tuple((t, int(n)) for t, n in m[3]), m[4])
        for m in p["members"]
    )
    return GroupMembership(r.cluster, r.group, r.first("source"), r.at, p["state"],
                           p["protocol_type"], p["protocol"], p["generation"], members)


def _encode_metadata(o: ClusterMetadata) -> Encoded:
    payload = {"brokers": o.brokers, "controller": o.controller_id,
               "topics": {t: len(parts) for t, parts in o.topics.items()}}
    return "metadata", o.cluster, o.observed_at, 1, dict(payload=_json(payload))


def _decode_metadata(r: _Slice) -> ClusterMetadata:
    """Partition counts only: leaders and replicas are not recorded (the replay's rules do
    not read them)."""
    p = r.payload()
    layout = {t: tuple(PartitionMetadata(i, -1, (), ()) for i in range(n))
              for t, n in p["topics"].items()}
    brokers = {int(b): h for b, h in p["brokers"].items()}
    return ClusterMetadata(r.cluster, r.at, brokers, int(p["controller"]), layout)


def _encode_group_deleted(o: GroupDeleted) -> Encoded:
    return "group_deleted", o.cluster, o.observed_at, 1, dict(group=o.group)


def _decode_group_deleted(r: _Slice) -> GroupDeleted:
    return GroupDeleted(r.cluster, r.group, r.at)


def _encode_offsets_deleted(o: OffsetsDeleted) -> Encoded:
    return "offsets_deleted", o.cluster, o.observed_at, 1, dict(
        group=o.group, topic=o.topic, partition=o.partition
    )


def _decode_offsets_deleted(r: _Slice) -> OffsetsDeleted:
    return OffsetsDeleted(r.cluster, r.group, str(r.first("topic")), int(r.first("partition")),
                          r.at)


def _encode_fetch_failed(o: GroupFetchFailed) -> Encoded:
    return "fetch_failed", o.cluster, o.observed_at, 1, dict(group=o.group, error=o.error)


def _decode_fetch_failed(r: _Slice) -> GroupFetchFailed:
    return GroupFetchFailed(r.cluster, r.group, str(r.first("error")), r.at)


def _encode_group_removed(o: GroupRemoved) -> Encoded:
    # When an operator deleted it is not known here: at the next observation's time.
    return "group_removed", o.cluster, float("nan"), 1, dict(group=o.group)


def _decode_group_removed(r: _Slice) -> GroupRemoved:
    return GroupRemoved(r.cluster, r.group)


def _encode_canary(o: CanarySnapshot) -> Encoded:
    return "canary", o.cluster, o.observed_at, 1, dict(group=o.probe, payload=_json(o.figures))


def _encode_mark(o: ClockMark) -> Encoded:
    mark = None if o.fresh_at is None else json.dumps({"fresh_at": o.fresh_at})
    return o.kind, o.cluster, o.at, 1, dict(payload=mark)


def _decode_mark(r: _Slice) -> ClockMark:
    payload = _opt(r.first("payload"))
    fresh = json.loads(payload).get("fresh_at") if payload else None
    return ClockMark(r.cluster, r.kind, r.at, fresh)


@dataclass(frozen=True, slots=True)
class RowCodec:
    """How one observation type becomes rows (``encode``) and comes back (``decode``; None:
    recorded, not replayed)."""

    type: type
    kinds: tuple[str, ...]
    encode: Callable[[Any], Encoded]
    decode: Callable[[_Slice], object] | None
    rows: Callable[[Any], int] | None = None  # None: one row


CODECS: tuple[RowCodec, ...] = (
    RowCodec(CommitBatch, ("commits",), _encode_commits, _decode_commits,
             lambda o: len(o.offsets)),
    RowCodec(BrokerOffsets, ("log_ends",), _encode_log_ends, _decode_log_ends,
             lambda o: len(o.log_end) + len(o.failed)),
    RowCodec(GroupMembership, ("membership",), _encode_membership, _decode_membership),
    RowCodec(RecordTimes, ("record_times",), _encode_record_times, _decode_record_times,
             lambda o: len(o.timestamps_ms)),
    RowCodec(ClusterMetadata, ("metadata",), _encode_metadata, _decode_metadata),
    RowCodec(GroupDeleted, ("group_deleted",), _encode_group_deleted, _decode_group_deleted),
    RowCodec(OffsetsDeleted, ("offsets_deleted",), _encode_offsets_deleted,
             _decode_offsets_deleted),
    RowCodec(GroupFetchFailed, ("fetch_failed",), _encode_fetch_failed, _decode_fetch_failed),
    RowCodec(GroupRemoved, ("group_removed",), _encode_group_removed, _decode_group_removed),
    RowCodec(CanarySnapshot, ("canary",), _encode_canary, None),
    RowCodec(ClockMark, ("round", "fresh"), _encode_mark, _decode_mark),
)
_BY_TYPE = {codec.type: codec for codec in CODECS}
_BY_KIND = {kind: codec for codec in CODECS for kind in codec.kinds}


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
    count, from the round's summary (:meth:`ClusterEvaluation.summary`: no per-group object).
    Groups known only by membership are OK with no partitions, as the API reports them. The
    recorder stores the service's verdicts with this, the replay its own: one definition of
    "the status"."""
    s = ev.summary()
    n = len(s.group)
    return {
        "cluster": [ev.cluster] * n, "group": s.group, "evaluated_at": [ev.evaluated_at] * n,
        "status": s.status, "lag_seconds": s.lag_seconds, "totallag": s.totallag,
        "partitions": s.partitions,
    }


def empty_verdicts() -> Verdicts:
    return {n: [] for n, _ in VERDICT_COLUMNS}


def extend(into: Verdicts, more: Verdicts) -> None:
    for k, v in more.items():
        into[k].extend(v)

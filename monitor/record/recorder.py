"""The recorder: every observation the store applies, and every verdict the evaluator reaches,
written to Parquet so a backtest (``kafka-monitor pipeline backtest``) can replay history
under other evaluator settings and reproduce the service's own statuses.

Layout (hive-partitioned, what Spark and pyarrow read as columns ``cluster`` and ``date``)::

    <path>/observations/cluster=<c>/date=<YYYY-MM-DD>/part-<run>-<n>.parquet
    <path>/statuses/cluster=<c>/date=<YYYY-MM-DD>/part-<run>-<n>.parquet

Why a store listener: observations are recorded in the exact order the store applied them
(``seq``), and each evaluation round as a mark after the last observation its snapshot held,
so a replay feeds the same windows the same data in the same order and evaluates at the same
moments. Rows are in :mod:`monitor.record.rows`' format.

Cost on the hot path: the listener only appends a reference under a lock (observations are
immutable); rows are built and written by ``flush`` on the scheduler's thread. Bounded: at
most ``max_buffered_rows`` rows wait between flushes (beyond, observations are dropped and
counted); a file is closed and renamed into place when it reaches ``max_file_bytes`` or
``max_file_age`` (until then it is hidden, ``.``-prefixed, so readers never see a file
without its footer); files older than ``retention`` and the oldest beyond ``max_total_bytes``
are deleted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from monitor.config import MonitorConfig, RecorderConfig
from monitor.model.observations import ClusterMetadata
from monitor.record.rows import (
    CanarySnapshot,
    ClockMark,
    RowBuilder,
    Verdicts,
    arrow_schema,
    row_count,
    verdicts,
)
from monitor.store.store import Snapshot, Store

if TYPE_CHECKING:
    from monitor.evaluate.job import ClusterEvaluation
    from monitor.ingest.base import Collector

_log = logging.getLogger("monitor.recorder")

OBSERVATIONS = "observations"
STATUSES = "statuses"


class SnapshotSource(Protocol):
    """A canary probe: its figures at this moment."""

    cluster: str
    name: str

    def snapshot(self) -> dict[str, Any]: ...


def status_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("run", pa.int64()), ("seq", pa.int64()), ("evaluated_at", pa.float64()),
        ("fresh_at", pa.float64()), ("group", pa.string()), ("status", pa.string()),
        ("lag_seconds", pa.float64()), ("totallag", pa.int64()), ("partitions", pa.int64()),
    ])


@dataclass(slots=True)
class _File:
    final: Path
    hidden: Path
    writer: Any  # pyarrow.parquet.ParquetWriter
    opened_at: float
    date: str


def _dates(times: Sequence[float], default: float) -> list[str]:
    t = np.asarray(times, dtype=np.float64)
    t = np.where(np.isnan(t), default, t)
    return np.datetime_as_string(t.astype("datetime64[s]"), unit="D").tolist()


class Recorder:
    """Store listener and Parquet writer (see the module docstring)."""

    def __init__(
        self, config: RecorderConfig, canaries: Sequence[SnapshotSource] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError as exc:  # the spark extra carries it
            raise RuntimeError(
                "recorder.enabled needs pyarrow: pip install 'kafka-monitor[spark]'"
            ) from exc
        self.config = config
        self.root = Path(config.path)
        self.canaries = list(canaries)
        self.clock = clock
        self.run = int(clock() * 1000)  # one life of the service: a replay restarts there
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._seq = 0
        self._pending: list[tuple[int, object]] = []
        self._pending_rows = 0
        self._rounds: list[tuple[str, int, float | None, Verdicts]] = []
        self._snapshot_seq: dict[str, int] = {}
        self._topics: dict[str, dict[str, int]] = {}  # last recorded topic list per cluster
        self._files: dict[tuple[str, str, str], _File] = {}
        self._file_no = 0
        self.dropped = 0
        self.rows_written = 0
        self.files_deleted = 0

    # ------------------------------------------------------------------ capture

    def observe(self, obs: object) -> None:
        """The store's listener: called under the store's lock, so keep it to an append."""
        with self._lock:
            if isinstance(obs, Snapshot):
                self._snapshot_seq[obs.cluster] = self._seq
                return
            if isinstance(obs, ClusterMetadata):
                # Replays need the topic list (deleted topics); record it when it changes.
                topics = {t: len(p) for t, p in obs.topics.items()}
                if self._topics.get(obs.cluster) == topics:
                    return
                self._topics[obs.cluster] = topics
            n = row_count(obs)
            if self._pending_rows + n > self.config.max_buffered_rows:
                if not self.dropped:
                    _log.warning("recorder buffer full: dropping observations until a flush")
                self.dropped += 1
                return
            self._seq += 1
            self._pending.append((self._seq, obs))
            self._pending_rows += n

    def record_round(
        self, results: Mapping[str, ClusterEvaluation],
        freshness: Callable[[str], float | None],
    ) -> None:
        """One evaluation round's verdicts, placed after the observations its snapshot saw."""
        for cluster, ev in results.items():
            fresh = freshness(cluster)
            found = verdicts(ev)
            with self._lock:
                seq = self._snapshot_seq.get(cluster, self._seq)
                self._pending.append((seq, ClockMark(cluster, "round", ev.evaluated_at, fresh)))
                self._rounds.append((cluster, seq, fresh, found))

    # ------------------------------------------------------------------ writing

    def flush(self) -> int:
        """Write what is buffered (and the canaries' figures); rotate and expire files.
        Returns the rows written."""
        with self._flush_lock:
            now = self.clock()
            if self.config.canary:
                for probe in self.canaries:
                    try:
                        figures = probe.snapshot()
                    except Exception:
                        _log.exception("canary snapshot failed", extra={"probe": probe.name})
                        continue
                    self.observe(CanarySnapshot(probe.cluster, probe.name, now, figures))
            with self._lock:
                pending, self._pending, self._pending_rows = self._pending, [], 0
                rounds, self._rounds = self._rounds, []
            self._rotate(now, closing=False)  # files due are closed before more is added
            written = self._write_observations(pending, now) + self._write_statuses(rounds, now)
            self.rows_written += written
            self._rotate(now, closing=False)
            self._expire(now)
            return written

    def close(self) -> None:
        """Write the rest and close every file (the service's shutdown)."""
        self.flush()
        with self._flush_lock:
            self._rotate(self.clock(), closing=True)

    def _write_observations(self, pending: list[tuple[int, object]], now: float) -> int:
        if not pending:
            return 0
        rows = RowBuilder()
        for seq, obs in pending:
            rows.add(self.run, seq, obs)
        table = rows.to_arrow(with_cluster=False)
        return self._split_write(OBSERVATIONS, table, rows.cols["cluster"],
                                 _dates(rows.cols["observed_at"], now))

    def _write_statuses(self, rounds: list[tuple[str, int, float | None, Verdicts]],
                        now: float) -> int:
        if not rounds:
            return 0
        import pyarrow as pa

        cols: dict[str, list[Any]] = {n: [] for n in status_schema().names}
        clusters: list[str] = []
        for cluster, seq, fresh, v in rounds:
            n = len(v["group"])
            clusters += [cluster] * n
            cols["run"] += [self.run] * n
            cols["seq"] += [seq] * n
            cols["fresh_at"] += [fresh] * n
            for name in ("evaluated_at", "group", "status", "lag_seconds", "totallag",
                         "partitions"):
                cols[name] += v[name]
        table = pa.table(cols, schema=status_schema())
        return self._split_write(STATUSES, table, clusters, _dates(cols["evaluated_at"], now))

    def _split_write(self, dataset: str, table: Any, clusters: list[str],
                     dates: list[str]) -> int:
        import pyarrow as pa

        keys = np.array([f"{c}\0{d}" for c, d in zip(clusters, dates, strict=True)])
        for key in np.unique(keys).tolist():
            cluster, date = key.split("\0")
            part = table.filter(pa.array(keys == key))
            self._file(dataset, cluster, date).writer.write_table(part)
        return int(table.num_rows)

    def _file(self, dataset: str, cluster: str, date: str) -> _File:
        import pyarrow.parquet as pq

        key = (dataset, cluster, date)
        f = self._files.get(key)
        if f is None:
            folder = self.root / dataset / f"cluster={cluster}" / f"date={date}"
            folder.mkdir(parents=True, exist_ok=True)
            self._file_no += 1
            name = f"part-{self.run}-{self._file_no:06d}.parquet"
            schema = status_schema() if dataset == STATUSES else arrow_schema(False)
            hidden = folder / f".{name}.inprogress"
            f = self._files[key] = _File(
                folder / name, hidden, pq.ParquetWriter(hidden, schema, compression="zstd"),
                self.clock(), date,
            )
        return f

    def _rotate(self, now: float, closing: bool) -> None:
        today = _dates([now], now)[0]
        for key, f in list(self._files.items()):
            size = f.hidden.stat().st_size if f.hidden.exists() else 0
            if (closing or size >= self.config.max_file_bytes
                    or now - f.opened_at >= self.config.max_file_age or f.date != today):
                f.writer.close()
                os.replace(f.hidden, f.final)
                del self._files[key]

    def _expire(self, now: float) -> None:
        """Delete closed files older than ``retention``, then the oldest while the total is
        above ``max_total_bytes``; empty folders go with them."""
        if not self.root.exists():
            return
        files = []
        for path in self.root.rglob("*.parquet"):
            if path.name.startswith("."):
                continue
            st = path.stat()
            files.append((st.st_mtime, st.st_size, path))
        files.sort()
        total = sum(size for _, size, _ in files)
        for mtime, size, path in files:
            if mtime >= now - self.config.retention and total <= self.config.max_total_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            self.files_deleted += 1
            folder = path.parent
            for parent in (folder, folder.parent):
                try:
                    parent.rmdir()  # only when empty
                except OSError:
                    break


def build_recorder(
    config: MonitorConfig, store: Store, collectors: Sequence[Collector]
) -> Recorder | None:
    """The recorder the configuration asks for, listening to ``store`` (None when off)."""
    if not config.recorder.enabled:
        return None
    canaries = [c for c in collectors if callable(getattr(c, "snapshot", None))]
    recorder = Recorder(config.recorder, canaries)  # type: ignore[arg-type]
    store.listeners.append(recorder.observe)
    return recorder

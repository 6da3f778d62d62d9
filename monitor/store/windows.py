"""Burrow's sliding windows per group-partition and the log-end history per partition, as
numpy struct-of-arrays, and the adapter that hands them to the evaluator in one gather.

Layout (one :class:`Windows` per cluster):

* Commit windows: one row per (group, topic, partition), ``[R, 2W]`` int64 arrays ``offsets``,
  ``orders``, ``times_ms`` (commit time), ``observed_ms``, ``lags`` (lag at ingest, -1 when
  no log end was known), kept oldest first and left-aligned, with ``counts[R]``. The newest
  ``W`` slots are Burrow's window; the ``W`` before them are kept so that the lag trend can be
  judged on ``W`` commits whose log end is known (see "Lag at commit time" below). Per row:
  group id, topic id, partition, log-end row, source. Rows are recycled through a free list;
  arrays grow by doubling.
* Log ends: one row per (topic, partition): Burrow's ring of the last ``W`` refreshes
  (``recent_*``, what its STOP rule reads) and a longer history of ``H`` points with flat runs
  collapsed to their first and last point (what lag-in-seconds and the idle-aware rules read,
  spanning quiet periods in few slots); when full, old points are thinned rather than dropped,
  so it reaches back to the first observation with resolution proportional to age. Backward
  points (a stale leader) are rejected.
* Log starts, one row per (topic, partition) beside the log ends: the first observed log start
  and the last ``LOG_START_SAMPLES - 1`` changes of it (retention deletes whole segments, so it
  moves in steps), what the retention risk's advance rate is measured over. A log start that
  went backwards (the topic recreated) restarts the samples.

Storage rules (Burrow's ``inmemory.go``): a newer commit (higher order) is appended, the
oldest falling out of a full window; an older one is inserted in order, or dropped if it
would fall out; an order already stored is a duplicate and dropped; a newer commit closer than
``min_distance`` to the newest stored one replaces it but keeps its timestamp, so chatty
committers do not shrink the window's time span. Orders only compare within one source, so a
row keeps the source that created it and ignores commits from the other one.

Lag at commit time (what the trend rules read). The lag stored at ingest is the newest
log-end sample minus the committed offset, and log ends are sampled on their own clock (every
``broker_offsets_interval``): every commit between two samples is compared with the same old
log end, so a consumer falling steadily behind shows a lag that *falls* between samples and
jumps at each one, and Burrow's "lag never decreased" never holds. The adapter therefore gives
the rules, per commit, the log end interpolated at the commit's time in the observed log-end
history, and judges the trend on the last ``W`` commits at or before the newest sample (the
only ones whose log end is known on both sides); commits after it wait for the next sample.

Not thread-safe: the store calls it under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

import numpy as np
import numpy.typing as npt

from monitor.rules import LeoHistory, PartitionWindows

IntArray = npt.NDArray[np.int64]

UNKNOWN_LAG = -1
_SOURCES = {"admin": 0, "offsets_topic": 1}
_MIN = np.iinfo(np.int64).min
_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
LOG_START_SAMPLES = 8


@dataclass(frozen=True, slots=True)
class EvaluationInput:
    """All of a cluster's group-partitions, ready for :func:`monitor.rules.evaluate`,
    sorted by group (so :class:`~monitor.rules.GroupIndex` needs no sort). Row ``i`` is
    group ``group_names[group_ids[i]]``, partition
    ``(topic_names[topic_ids[i]], partitions[i])``."""

    windows: PartitionWindows
    history: LeoHistory
    group_ids: IntArray
    group_names: list[str]
    topic_ids: IntArray
    topic_names: list[str]
    partitions: IntArray
    first_observed_ms: IntArray  # when the window's oldest and newest commits were seen
    last_observed_ms: IntArray
    # The partition's log start: newest, and where its advance rate is measured from with
    # the time (-1: unknown): the first change kept once two are known (before the first,
    # whether retention was running is not known), else the first sample.
    log_start: IntArray | None = None
    log_start_first: IntArray | None = None
    log_start_first_ms: IntArray | None = None

    def topic_partition(self, i: int) -> tuple[str, int]:
        return self.topic_names[int(self.topic_ids[i])], int(self.partitions[i])


class Windows:
    """One cluster's commit windows and log-end history (see the module docstring)."""

    def __init__(
        self, window: int = 10, min_distance_ms: int = 1000, history: int = 60,
        capacity: int = 64,
    ) -> None:
        if window < 1 or history < 3:
            raise ValueError("window must be >= 1 and history >= 3")
        self.window = window
        self.slots = 2 * window  # Burrow's window and, before it, the trend's older commits
        self.min_distance_ms = int(min_distance_ms)
        self.history = history
        w = self.slots
        # Commit windows, [R, W].
        self.offsets = np.zeros((capacity, w), dtype=np.int64)
        self.orders = np.zeros((capacity, w), dtype=np.int64)
        self.times_ms = np.zeros((capacity, w), dtype=np.int64)
        self.observed_ms = np.zeros((capacity, w), dtype=np.int64)
        self.lags = np.zeros((capacity, w), dtype=np.int64)
        self.counts = np.zeros(capacity, dtype=np.int64)
        self.live = np.zeros(capacity, dtype=bool)
        self.row_group = np.full(capacity, -1, dtype=np.int64)
        self.row_topic = np.full(capacity, -1, dtype=np.int64)
        self.row_partition = np.zeros(capacity, dtype=np.int64)
        self.row_leo = np.zeros(capacity, dtype=np.int64)
        self.row_source = np.zeros(capacity, dtype=np.int8)
        self._free_rows: list[int] = []
        self._next_row = 0
        self._new_rows: list[int] = []  # allocated, not yet settled
        self._new_keys: list[tuple[int, tuple[str, int], str]] = []  # group id, (topic, p), source
        self._row_capacity = capacity
        # Groups and topics, interned.
        self._group_ids: dict[str, int] = {}
        self._group_names: list[str] = []
        self._free_groups: list[int] = []
        self.group_last_ms = np.full(capacity, _MIN, dtype=np.int64)  # newest commit time
        self._topic_ids: dict[str, int] = {}
        self._topic_names: list[str] = []
        # Log ends, one row per (topic, partition).
        self._leo_rows: dict[tuple[str, int], int] = {}
        self._free_leo: list[int] = []
        self._next_leo = 0
        self.recent = np.zeros((capacity, window), dtype=np.int64)
        self.recent_counts = np.zeros(capacity, dtype=np.int64)
        self.hist_offsets = np.zeros((capacity, history), dtype=np.int64)
        self.hist_times_ms = np.zeros((capacity, history), dtype=np.int64)
        self.hist_counts = np.zeros(capacity, dtype=np.int64)
        self.ls_offsets = np.zeros((capacity, LOG_START_SAMPLES), dtype=np.int64)
        self.ls_times_ms = np.zeros((capacity, LOG_START_SAMPLES), dtype=np.int64)
        self.ls_counts = np.zeros(capacity, dtype=np.int64)

    # ---------------------------------------------------------------- allocation

    @staticmethod
    def _grow(arr: npt.NDArray, size: int, fill: int = 0) -> npt.NDArray:
        # zeros (calloc) leaves untouched pages unmapped; only the tail needs a fill.
        new = np.zeros((size, *arr.shape[1:]), dtype=arr.dtype)
        new[: arr.shape[0]] = arr
        if fill:
            new[arr.shape[0] :] = fill
        return new

    def group_id(self, name: str) -> int:
        """The group's id, created on first use (ids are recycled after :meth:`drop_group`)."""
        gid = self._group_ids.get(name)
        if gid is not None:
            return gid
        if self._free_groups:
            gid = self._free_groups.pop()
            self._group_names[gid] = name
        else:
            gid = len(self._group_names)
            self._group_names.append(name)
            if gid >= self.group_last_ms.shape[0]:
                self.group_last_ms = self._grow(self.group_last_ms, 2 * (gid + 1), _MIN)
        self.group_last_ms[gid] = _MIN
        self._group_ids[name] = gid
        return gid

    def _topic_id(self, topic: str) -> int:
        tid = self._topic_ids.get(topic)
        if tid is None:
            tid = self._topic_ids[topic] = len(self._topic_names)
            self._topic_names.append(topic)
        return tid

    def leo_row(self, topic: str, partition: int) -> int:
        """The partition's log-end row, created on first use."""
        tp = (topic, partition)
        row = self._leo_rows.get(tp)
        if row is not None:
            return row
        if self._free_leo:
            row = self._free_leo.pop()
            self.recent_counts[row] = 0
            self.hist_counts[row] = 0
            self.ls_counts[row] = 0
        else:  # fresh rows past the high mark are zero: nothing to reset
            row = self._next_leo
            self._next_leo += 1
            if row >= self.recent.shape[0]:
                size = 2 * (row + 1)
                self.recent = self._grow(self.recent, size)
                self.recent_counts = self._grow(self.recent_counts, size)
                self.hist_offsets = self._grow(self.hist_offsets, size)
                self.hist_times_ms = self._grow(self.hist_times_ms, size)
                self.hist_counts = self._grow(self.hist_counts, size)
                self.ls_offsets = self._grow(self.ls_offsets, size)
                self.ls_times_ms = self._grow(self.ls_times_ms, size)
                self.ls_counts = self._grow(self.ls_counts, size)
        self._leo_rows[tp] = row
        return row

    def allocate(self, group_id: int, tp: tuple[str, int], source: str) -> int:
        """A new, empty window row for one group-partition; commits of ``source`` feed it.
        Hot path (every new group-partition): only the row number is decided here; the row's
        arrays are set for all new rows at once by :meth:`_settle`."""
        free = self._free_rows
        if free:
            row = free.pop()
        else:
            row = self._next_row
            self._next_row = row + 1
            if row >= self._row_capacity:
                self._grow_rows(2 * (row + 1))
        self._new_rows.append(row)
        self._new_keys.append((group_id, tp, source))
        return row

    def _grow_rows(self, size: int) -> None:
        for name in (
            "offsets", "orders", "times_ms", "observed_ms", "lags", "counts", "live",
            "row_partition", "row_leo", "row_source",
        ):
            setattr(self, name, self._grow(getattr(self, name), size))
        self.row_group = self._grow(self.row_group, size, -1)
        self.row_topic = self._grow(self.row_topic, size, -1)
        self._row_capacity = size

    def _settle(self) -> None:
        """Initialise the rows :meth:`allocate` handed out, vectorised: per row only C-level
        ``map`` lookups (no Python call per row unless its topic or log-end row is new)."""
        if not self._new_rows:
            return
        rows = np.array(self._new_rows, dtype=np.int64)
        keys = self._new_keys
        tps = list(map(_SECOND, keys))
        leo_rows = self._leo_rows
        for topic, partition in {tp for tp in tps if tp not in leo_rows}:
            self.leo_row(topic, partition)
        topics = list(map(_FIRST, tps))
        for topic in set(topics) - self._topic_ids.keys():
            self._topic_id(topic)
        self.counts[rows] = 0
        self.live[rows] = True
        self.row_group[rows] = list(map(_FIRST, keys))
        self.row_topic[rows] = list(map(self._topic_ids.__getitem__, topics))
        self.row_partition[rows] = list(map(_SECOND, tps))
        self.row_leo[rows] = list(map(leo_rows.__getitem__, tps))
        self.row_source[rows] = list(map(_SOURCES.__getitem__, map(_THIRD, keys)))
        self._new_rows = []
        self._new_keys = []

    def free_rows(self, rows: npt.ArrayLike) -> None:
        self._settle()
        r = np.asarray(rows, dtype=np.int64)
        r = r[self.live[r]]
        self.live[r] = False
        self.counts[r] = 0
        self.row_group[r] = -1
        self.row_topic[r] = -1
        self._free_rows.extend(r.tolist())

    def drop_group(self, name: str) -> None:
        """Forget a group: its rows and its id."""
        self._settle()
        gid = self._group_ids.pop(name, None)
        if gid is None:
            return
        self.free_rows(np.flatnonzero(self.row_group == gid))
        self._group_names[gid] = ""
        self._free_groups.append(gid)

    def drop_topics(self, topics: set[str]) -> None:
        """A deleted topic leaves every group and the log-end data."""
        self._settle()
        tids = [self._topic_ids[t] for t in topics if t in self._topic_ids]
        if tids:
            self.free_rows(np.flatnonzero(np.isin(self.row_topic, tids)))
        for tp in [tp for tp in self._leo_rows if tp[0] in topics]:
            self._free_leo.append(self._leo_rows.pop(tp))

    def expired_groups(self, now_ms: int, expire_ms: int) -> list[str]:
        """Groups whose newest commit is older than ``expire_ms`` (groups never committed to,
        with id but no commit, are not reported: membership decides their life)."""
        self._settle()
        n = len(self._group_names)
        last = self.group_last_ms[:n]
        old = np.flatnonzero((last != _MIN) & (last < now_ms - expire_ms))
        return [self._group_names[g] for g in old.tolist() if self._group_names[g]]

    # ---------------------------------------------------------------- ingest

    def put_log_ends(self, leo_rows: npt.ArrayLike, ends: npt.ArrayLike, t_ms: int) -> None:
        """One refresh round (one point per partition). A point below the newest stored one,
        or older in time, is rejected; a point extending a flat run moves the run's end."""
        r = np.asarray(leo_rows, dtype=np.int64)
        e = np.asarray(ends, dtype=np.int64)
        if r.size == 0:
            return
        cnt = self.hist_counts[r]
        last = np.maximum(cnt - 1, 0)
        newest = np.where(cnt > 0, self.hist_offsets[r, last], _MIN)
        newest_t = np.where(cnt > 0, self.hist_times_ms[r, last], _MIN)
        ok = (e >= newest) & (t_ms >= newest_t)
        r, e, cnt, last = r[ok], e[ok], cnt[ok], last[ok]
        # Burrow's ring of the last W refreshes.
        self._push(r, self.recent_counts, (self.recent,), (e,))
        # History: a flat run keeps its first and last point.
        prev = np.where(cnt >= 2, self.hist_offsets[r, np.maximum(cnt - 2, 0)], _MIN)
        flat = (cnt >= 2) & (e == self.hist_offsets[r, last]) & (e == prev)
        self.hist_times_ms[r[flat], last[flat]] = t_ms
        grow = ~flat
        rg = r[grow]
        full = rg[self.hist_counts[rg] >= self.history]
        if full.size:
            self._thin(full, t_ms)
        t = np.full(rg.size, t_ms, dtype=np.int64)
        self._push(rg, self.hist_counts, (self.hist_offsets, self.hist_times_ms), (e[grow], t))

    def put_log_starts(self, leo_rows: npt.ArrayLike, starts: npt.ArrayLike, t_ms: int) -> None:
        """One refresh round of log starts: a changed value is a new sample (the oldest
        falling out of a full row), an unchanged one adds nothing, a lower one restarts the
        row from it."""
        r = np.asarray(leo_rows, dtype=np.int64)
        v = np.asarray(starts, dtype=np.int64)
        if r.size == 0:
            return
        cnt = self.ls_counts[r]
        newest = self.ls_offsets[r, np.maximum(cnt - 1, 0)]
        back = (cnt > 0) & (v < newest)
        self.ls_counts[r[back]] = 0
        cnt = self.ls_counts[r]
        moved = (cnt == 0) | (v > newest)
        t = np.full(int(moved.sum()), t_ms, dtype=np.int64)
        self._push(r[moved], self.ls_counts, (self.ls_offsets, self.ls_times_ms), (v[moved], t))

    def _thin(self, rows: IntArray, now_ms: int) -> None:
        """Make room in full histories: remove the points whose removal widens the gap least
        relative to their age, so resolution stays proportional to age and the history
        reaches ever further back (lag in seconds for a group hours behind stays an estimate,
        not a lower bound). Endpoints of flat runs are kept (they stop the estimate from
        drifting on quiet topics); rows with too few removable points lose their oldest.
        An eighth of the slots is freed at a time, so a row is thinned every few refreshes,
        not at each one."""
        h = self.history
        m = max(1, h // 8)
        off = self.hist_offsets[rows]
        tim = self.hist_times_ms[rows]
        gap = (tim[:, 2:] - tim[:, :-2]).astype(np.float64)
        age = np.maximum(now_ms - tim[:, 1:-1], 1).astype(np.float64)
        score = gap / age
        inner = off[:, 1:-1]
        score[(inner == off[:, :-2]) | (inner == off[:, 2:])] = np.inf
        chosen = np.argpartition(score, m - 1, axis=1)[:, :m] + 1  # slots 1..h-2
        drop = np.zeros((rows.size, h), dtype=bool)
        ok = np.all(np.isfinite(np.take_along_axis(score, chosen - 1, axis=1)), axis=1)
        drop[np.flatnonzero(ok)[:, None], chosen[ok]] = True
        drop[~ok, :m] = True  # nothing (or too little) removable: the oldest go
        keep = ~drop
        self.hist_offsets[rows, : h - m] = off[keep].reshape(rows.size, h - m)
        self.hist_times_ms[rows, : h - m] = tim[keep].reshape(rows.size, h - m)
        self.hist_counts[rows] = h - m

    @staticmethod
    def _push(
        rows: IntArray, counts: IntArray, arrays: tuple[IntArray, ...], values: tuple[IntArray, ...]
    ) -> None:
        """Append one value per (unique) row, shifting full rows left."""
        width = arrays[0].shape[1]
        cnt = counts[rows]
        full = rows[cnt >= width]
        for arr in arrays:
            arr[full, :-1] = arr[full, 1:]
        pos = np.minimum(cnt, width - 1)
        for arr, val in zip(arrays, values, strict=True):
            arr[rows, pos] = val
        counts[rows] = np.minimum(cnt + 1, width)

    def lag_at_ingest(self, rows: IntArray, offsets: IntArray) -> IntArray:
        """Newest log end - offset, floored at 0; -1 where no log end is known yet."""
        leo = self.row_leo[rows]
        cnt = self.hist_counts[leo]
        newest = self.hist_offsets[leo, np.maximum(cnt - 1, 0)]
        return np.where(cnt > 0, np.maximum(newest - offsets, 0), UNKNOWN_LAG)

    def put_commits(
        self, rows: npt.ArrayLike, offsets: npt.ArrayLike, times_ms: npt.ArrayLike,
        orders: npt.ArrayLike, observed_ms: int, source: str,
    ) -> None:
        """Apply a batch of commits (in arrival order, rows may repeat) by the storage rules.
        Vectorised: the batch is split into generations in which each row occurs once (the
        k-th commit of every row), applied in order; a batch of distinct rows is one."""
        self._settle()
        r = np.asarray(rows, dtype=np.int64)
        n = r.size
        if n == 0:
            return
        off = np.asarray(offsets, dtype=np.int64)
        ts = np.asarray(times_ms, dtype=np.int64)
        order = np.asarray(orders, dtype=np.int64)
        keep = self.row_source[r] == _SOURCES[source]
        if not keep.all():
            r, off, ts, order = r[keep], off[keep], ts[keep], order[keep]
            n = r.size
            if n == 0:
                return
        np.maximum.at(self.group_last_ms, self.row_group[r], ts)
        lag = self.lag_at_ingest(r, off)  # log ends do not move during the batch
        if n == 1:
            self._apply_unique(r, off, ts, order, lag, observed_ms)
            return
        # Rows in order with arrival breaking ties, from one plain sort of row * n + arrival:
        # several times cheaper than a stable argsort.
        idx = np.arange(n, dtype=np.int64)
        key = np.sort(r * n + idx)
        sorted_rows = key // n
        starts = np.empty(n, dtype=bool)
        starts[0] = True
        np.not_equal(sorted_rows[1:], sorted_rows[:-1], out=starts[1:])
        if starts.all():  # every row once: one generation
            self._apply_unique(r, off, ts, order, lag, observed_ms)
            return
        occ = np.empty(n, dtype=np.int64)  # how many earlier commits of its row the batch has
        occ[key - sorted_rows * n] = idx - np.maximum.accumulate(np.where(starts, idx, 0))
        seq = np.sort(occ * n + idx) % n  # by generation, then arrival
        lo = 0
        for hi in np.cumsum(np.bincount(occ)).tolist():
            sel = seq[lo:hi]
            self._apply_unique(r[sel], off[sel], ts[sel], order[sel], lag[sel], observed_ms)
            lo = hi

    def _apply_unique(
        self, r: IntArray, off: IntArray, ts: IntArray, order: IntArray, lag: IntArray,
        observed_ms: int,
    ) -> None:
        """Apply commits to distinct rows. Reads only each row's newest entry (flat indices
        into the [R, W] arrays): a newer order cannot be a duplicate, so the full window is
        searched only for the rare older arrivals."""
        w = self.slots
        cnt = self.counts[r]
        has = cnt > 0
        newest = r * w + np.maximum(cnt - 1, 0)
        offsets_f, orders_f = self.offsets.reshape(-1), self.orders.reshape(-1)
        times_f, observed_f, lags_f = (
            self.times_ms.reshape(-1), self.observed_ms.reshape(-1), self.lags.reshape(-1)
        )
        newer = order > orders_f[newest]
        newer |= ~has
        if not newer.all():
            for i in np.flatnonzero(~newer).tolist():  # rare: out-of-order arrivals
                self._insert(int(r[i]), int(off[i]), int(ts[i]), int(order[i]), observed_ms,
                             int(lag[i]))
            r, off, ts, order, lag, cnt, newest = (
                a[newer] for a in (r, off, ts, order, lag, cnt, newest)
            )
            has = has[newer]
        # Closer than min_distance to the newest entry: replace it, keeping its timestamp.
        replace = has & (ts - times_f[newest] < self.min_distance_ms)
        if replace.any():
            at = newest[replace]
            offsets_f[at] = off[replace]
            orders_f[at] = order[replace]
            observed_f[at] = observed_ms
            lags_f[at] = lag[replace]
            append = ~replace
            r, off, ts, order, lag, cnt = (a[append] for a in (r, off, ts, order, lag, cnt))
            if r.size == 0:
                return
        # Append, shifting full windows left by one.
        full = cnt >= w
        if full.any():
            fr = r[full]
            for arr in (self.offsets, self.orders, self.times_ms, self.observed_ms, self.lags):
                arr[fr, :-1] = arr[fr, 1:]
        at = r * w + np.minimum(cnt, w - 1)
        offsets_f[at] = off
        orders_f[at] = order
        times_f[at] = ts
        observed_f[at] = observed_ms
        lags_f[at] = lag
        self.counts[r] = np.minimum(cnt + 1, w)

    def _insert(self, row: int, off: int, ts: int, order: int, obs: int, lag: int) -> None:
        """An older commit goes where its order puts it; if the window is full the oldest
        entry leaves, and a commit older than all of a full window, or whose order is already
        stored (a duplicate), is dropped."""
        w = self.slots
        cnt = int(self.counts[row])
        pos = int(np.searchsorted(self.orders[row, :cnt], order))
        if pos < cnt and int(self.orders[row, pos]) == order:
            return  # a duplicate
        arrays = (self.offsets, self.orders, self.times_ms, self.observed_ms, self.lags)
        values = (off, order, ts, obs, lag)
        if cnt < w:
            for arr, val in zip(arrays, values, strict=True):
                arr[row, pos + 1 : cnt + 1] = arr[row, pos:cnt].copy()
                arr[row, pos] = val
            self.counts[row] = cnt + 1
        elif pos > 0:
            for arr, val in zip(arrays, values, strict=True):
                arr[row, : pos - 1] = arr[row, 1:pos].copy()
                arr[row, pos - 1] = val

    # ---------------------------------------------------------------- read

    def row_window(self, row: int, *, stored: bool = False) -> dict[str, list[int]]:
        """One row's window as lists, oldest first (API, tests, diagnostics): Burrow's window
        (the newest ``window`` commits), or with ``stored`` every stored commit."""
        self._settle()
        n = int(self.counts[row])
        lo = 0 if stored else max(n - self.window, 0)
        return {
            "offsets": self.offsets[row, lo:n].tolist(),
            "orders": self.orders[row, lo:n].tolist(),
            "times_ms": self.times_ms[row, lo:n].tolist(),
            "observed_ms": self.observed_ms[row, lo:n].tolist(),
            "lags": self.lags[row, lo:n].tolist(),
        }

    def log_end_history(self, topic: str, partition: int) -> tuple[list[int], list[int]]:
        """A partition's (offsets, times_ms) history (tests, diagnostics)."""
        row = self._leo_rows.get((topic, partition))
        if row is None:
            return [], []
        n = int(self.hist_counts[row])
        return self.hist_offsets[row, :n].tolist(), self.hist_times_ms[row, :n].tolist()

    def _gather_f(self, arr: IntArray, flat_index: IntArray) -> IntArray:
        """``arr``'s slots at ``flat_index`` (``[W, P]`` indexes into the flattened
        ``[R, slots]`` array) in the evaluator's slot-major (Fortran) ``[P, W]`` layout."""
        return arr.reshape(-1)[flat_index].T

    def evaluation_input(self) -> EvaluationInput:
        """Every non-empty window with its log-end data, in one vectorised gather: Burrow's
        window (the newest ``window`` commits) and the trend window (the newest ``window``
        commits at or before the partition's newest log-end sample, with the log end
        interpolated at each commit's time; see the module docstring)."""
        self._settle()
        n = self._next_row
        rows = np.flatnonzero(self.live[:n] & (self.counts[:n] > 0))
        used, dense = np.unique(self.row_group[rows], return_inverse=True)
        names = [self._group_names[g] for g in used.tolist()]
        # Groups numbered by name, rows sorted by group: stable output, presorted GroupIndex.
        by_name = sorted(range(len(names)), key=names.__getitem__)
        rank = np.empty(len(names), dtype=np.int64)
        rank[by_name] = np.arange(len(names))
        names = [names[i] for i in by_name]
        gid = rank[dense.reshape(-1)]
        sort = np.argsort(gid, kind="stable")
        rows, gid = rows[sort], gid[sort]
        w, s = self.window, self.slots
        stored = self.counts[rows]
        cnt = np.minimum(stored, w)
        leo = self.row_leo[rows]
        hcnt = self.hist_counts[leo]
        history = LeoHistory(self.hist_offsets[leo], self.hist_times_ms[leo], hcnt)
        slot = np.arange(w)[:, None]
        base = rows * s

        # Burrow's window: the newest ``cnt`` stored slots.
        first = stored - cnt
        burrow = base + first + np.minimum(slot, np.maximum(cnt - 1, 0))
        offsets = self._gather_f(self.offsets, burrow)
        times = self._gather_f(self.times_ms, burrow)
        ingest_lags = self._gather_f(self.lags, burrow)
        last_off = offsets[np.arange(rows.size), np.maximum(cnt - 1, 0)]
        newest = history.newest()
        current = np.where(hcnt > 0, np.maximum(newest - last_off, 0), 0)
        # Lags at commit time where the log end is known on both sides of the commit; the
        # newest commits (after the newest sample) keep their lag at ingest, a lower bound.
        at_commit = _lags_at(history, offsets, times)
        lags = np.where(at_commit >= 0, at_commit, ingest_lags)

        # The trend window: the newest ``window`` stored commits at or before the newest
        # log-end sample.
        newest_t = np.where(hcnt > 0, history.times_ms[np.arange(rows.size), np.maximum(
            hcnt - 1, 0)], np.iinfo(np.int64).min)
        all_slots = base[:, None] + np.arange(s)
        known = (np.arange(s) < stored[:, None]) & (
            self.times_ms.reshape(-1)[all_slots] <= newest_t[:, None])
        end = np.sum(known, axis=1)
        tcnt = np.minimum(end, w)
        trend = base + (end - tcnt) + np.minimum(slot, np.maximum(tcnt - 1, 0))
        trend_offsets = self._gather_f(self.offsets, trend)
        trend_lags = _lags_at(history, trend_offsets, self._gather_f(self.times_ms, trend))

        args = (offsets, times, lags, cnt, current, self._gather_recent(leo),
                self.recent_counts[leo], self.window)
        trend_args = (trend_offsets, trend_lags, tcnt)
        # from_arrays cannot reshape an empty batch; its checks are moot there anyway.
        windows = (
            PartitionWindows.from_arrays(*args, trend=trend_args)
            if rows.size else PartitionWindows(*args, *trend_args)
        )
        observed_first = self.observed_ms.reshape(-1)[base + first]
        observed_last = self.observed_ms.reshape(-1)[base + np.maximum(stored - 1, 0)]
        lcnt = self.ls_counts[leo]
        known_start = lcnt > 0
        base = np.where(lcnt >= 3, 1, 0)
        return EvaluationInput(
            windows, history, gid, names,
            self.row_topic[rows], list(self._topic_names), self.row_partition[rows],
            observed_first, observed_last,
            log_start=np.where(known_start, self.ls_offsets[leo, np.maximum(lcnt - 1, 0)], -1),
            log_start_first=np.where(known_start, self.ls_offsets[leo, base], -1),
            log_start_first_ms=np.where(known_start, self.ls_times_ms[leo, base], -1),
        )

    def _gather_recent(self, leo: IntArray) -> IntArray:
        out = np.empty((leo.size, self.recent.shape[1]), dtype=np.int64, order="F")
        return np.take(self.recent, leo, axis=0, out=out)


def _lags_at(history: LeoHistory, offsets: IntArray, times_ms: IntArray) -> IntArray:
    """Per slot, the log end interpolated at the commit's time minus its offset (floored at
    0), or -1 where the time is outside the observed history (before its first point or
    after its last): only a log end known on both sides of a commit is trusted."""
    ends, ok = history.log_end_at(times_ms)
    lag = np.maximum(np.floor(ends).astype(np.int64) - offsets, 0)
    return np.where(ok, lag, UNKNOWN_LAG)

"""Where OK, WARN, STALL, STOP and REWIND are decided: Burrow's sliding-window rules, vectorised.

Pure functions over struct-of-arrays inputs (no I/O, no Kafka, no per-partition Python
objects), so the service and the Spark pipeline run the same code on batches of any size.

Partition rules, in Burrow's order (``burrow-reference.md``). Each is one function below named
after Burrow's (``is_lag_always_not_zero``, ``check_offsets_rewind``, ``check_offsets_stopped``,
``check_offsets_stalled``, ``check_lag_not_decreasing``, ``check_recent_lag_zero``), each option
one ``option_<letter>_...`` function, and :func:`evaluate_partitions` combines them, so a failing
case points at one rule:

1. ``current_lag <= allowed_lag`` -> OK.
2. stopped (``now - last ts > last ts - first ts``) and not ``recent_lag_zero`` (no stored log
   end <= last committed offset) -> STOP.
3. first offset lower than its predecessor, never climbed back to -> REWIND.
4. only if no stored lag <= allowed_lag: all offsets identical -> STALL; else lags never
   decreasing -> WARN.
5. otherwise OK; an empty window is OK with ``complete`` 0.

Improvements over Burrow, each an option in :class:`RuleOptions` (``RuleOptions.burrow()``
turns all of them off and reproduces Burrow exactly):

(a) ``idle_aware_stop`` (default on) -- no false STOP on idle or slow topics. Burrow starts the
    STOP clock at the last commit, so a consumer that idled, caught up, for hours is STOP the
    moment new data arrives unless the log end it was caught up with is still among the last
    ``intervals`` broker offsets (~100 s). With a log-end history (:class:`LeoHistory`, which
    spans quiet periods), the clock starts instead at the last time the log end was *seen*
    within ``allowed_lag`` of the committed offset (or at the marker-sized gap its last
    commit already saw): a consumer only
    has to react once there is data, and a consumer idle after its last commit (the log end
    stayed at its offset for longer than its usual gap between commits: it commits only on
    progress, so its window span tells nothing of its pace) gets at least ``idle_grace_ms``
    to react. Its clock never starts before Burrow's; with a history it replaces Burrow's
    "recently caught up" exception (see below), so a consumer that died caught up while data
    keeps coming is STOP after its allowance rather than ten log-end refreshes. Deliberately
    *not* "lag at the last commit was 0 -> never STOP": that is the rule Burrow's maintainers
    rejected (PR #94) and fixed (#290, case 9) because a consumer that dies caught up would be
    OK forever while data piles up; here it is STOP once new data has waited past its
    allowance.
(b) ``marker_tolerance`` (default 1; 0 disables) -- transactional producers' commit markers
    leave a permanent lag of 1 that Burrow reports as STOP or STALL (#570, #651). A
    ``current_lag`` <= tolerance counts as caught up (rule 1) unless the log end is known to
    have moved after the last commit (a history observation later than the commit below the
    current log end; without a history: the lag stored with the last commit is smaller than
    the current lag). A read-committed consumer only sees a transaction after its marker is
    written, so a gap that was already there when it committed is markers, not data.
(c) ``burrow_err`` (default off) -- report group status with Burrow's codes, STOP/STALL/REWIND
    mapped to ERR (:func:`to_burrow`).
(d) ``live_member_stall`` (default on) -- a partition that would be STOP while a live group
    member is there (``alive``, from the group's membership) is STALL: the consumer exists
    but does not move. It separates "stuck" from "gone" when commits are not seen one by one
    (the Admin API reports only the current offset), and never turns OK into an alarm.
(e) ``young_window_stop_ms`` (default 60 s; 0 disables) -- Burrow calls a group STOP as soon as
    the silence exceeds its window's span, so a new group (one commit: span 0; two commits:
    one gap, i.e. any jitter) or a monitor that just started reading the Admin API is STOP
    within seconds whenever it has lag; a lone commit with lag is even STALL at once (all its
    offsets are "equal"). Here the silence must exceed at least three of the window's commit
    gaps, a lone commit waits at least this long for STOP, and STALL and WARN need a trend,
    i.e. two commits.
(f) ``warn_lag_gaps`` (default 2; 0 disables) -- Burrow's WARN ("lag never decreased across
    the window") fires on healthy consumers: the lag stored with a commit is the newest log
    end minus the committed offset, sampled at times (the consumer's commit, our read of it,
    our log-end refresh) whose phases drift against each other, so a consumer that keeps up
    shows a lag of up to about one commit gap of production that creeps up or stays flat for
    many commits in a row (seen on the real broker: WARN most of the time for a consumer a
    few records, under 2 s, behind). Here WARN also needs the lag to have grown across the
    window (a flat lag is a consumer keeping pace) and the last two lags to exceed this many
    commit gaps' worth of production (the log end's advance over the window per gap): more
    than sampling can explain, and not a single step (a burst read just before the commit
    that absorbed it). A consumer that really falls behind passes that bound as its lag
    keeps growing.

(g) ``gone_stop_ms`` (default 10 s; 0 disables) -- a group whose consumers all left (it was
    seen with live members, and now has none) while it has lag is STOP once its silence
    exceeds this short grace (or its window's allowance, if that is shorter). Burrow waits for
    the window's span whatever it knows, and a window read through the Admin API (one entry
    per read, so its span is ``intervals`` reads) or of a slow committer spans minutes. A
    consumer that never had members (``assign()``) is judged by the window alone.

With (a) on, Burrow's exception to STOP (rule 2: "some recent log end <= the committed
offset") is left to (a), which asks the same question precisely: kept, it held a consumer that
died caught up for ``intervals`` log-end refreshes (100 s by default).

The lag trend (rule 4's WARN, and (f)) is read from the trend window when the caller gives
one: lags at each commit's time rather than at ingest (see :mod:`monitor.store.windows` for why).

Group status is the worst partition status by :class:`Status` value:
OK < WARN < REWIND < STALL < STOP. REWIND ranks above WARN (offsets went backwards: data is
being re-processed, which someone should know about, and Burrow calls it an error) and below
STALL and STOP (the consumer is alive and making progress, and the state clears itself once
it passes its old position; a group that is also stalled or stopped somewhere needs that
reported first).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from monitor.rules.lag_seconds import LeoHistory

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
StatusArray = npt.NDArray[np.int8]

__all__ = [
    "BurrowStatus",
    "GroupIndex",
    "GroupResults",
    "PartitionResults",
    "PartitionWindows",
    "RuleOptions",
    "Status",
    "evaluate",
    "evaluate_groups",
    "evaluate_partitions",
    "to_burrow",
]


class Status(IntEnum):
    """Partition and group status; the value is the severity rank (higher = worse)."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    REWIND = 3
    STALL = 4
    STOP = 5


class BurrowStatus(IntEnum):
    """Burrow's own codes (its API and notifiers); ERR exists only at group level."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


# Lookup tables indexed by Status value.
_YOUNG_GAPS = 3  # (e): commit gaps of silence a young window is allowed
_BURROW_PARTITION = np.array([0, 1, 2, 6, 5, 4], dtype=np.int8)
_BURROW_GROUP = np.array([0, 1, 2, 3, 3, 3], dtype=np.int8)


def to_burrow(status: npt.ArrayLike, *, group: bool) -> StatusArray:
    """Map :class:`Status` codes to :class:`BurrowStatus` codes; ``group=True`` maps
    STOP/STALL/REWIND to ERR as Burrow's group status does."""
    table = _BURROW_GROUP if group else _BURROW_PARTITION
    return table[np.asarray(status, dtype=np.intp)]


@dataclass(frozen=True, slots=True)
class RuleOptions:
    """Rule parameters. Defaults are this project's; :meth:`burrow` is Burrow exactly."""

    allowed_lag: int = 0
    idle_aware_stop: bool = True  # (a) see the module docstring
    idle_grace_ms: float = 60_000.0  # (a) least time an idle, caught-up consumer gets to react
    marker_tolerance: int = 1  # (b) 0 disables
    burrow_err: bool = False  # (c) group status in Burrow's codes (ERR)
    live_member_stall: bool = True  # (d) STOP with a live member -> STALL
    young_window_stop_ms: float = 60_000.0  # (e) 0 disables; see the module docstring
    warn_lag_gaps: float = 2.0  # (f) 0 disables; see the module docstring
    gone_stop_ms: float = 10_000.0  # (g) 0 disables; see the module docstring

    def __post_init__(self) -> None:
        if min(self.allowed_lag, self.marker_tolerance, self.idle_grace_ms,
               self.young_window_stop_ms, self.warn_lag_gaps, self.gone_stop_ms) < 0:
            raise ValueError(
                "allowed_lag, marker_tolerance, idle_grace_ms, young_window_stop_ms, "
                "warn_lag_gaps and gone_stop_ms must be >= 0"
            )

    @classmethod
    def burrow(cls, allowed_lag: int = 0) -> RuleOptions:
        return cls(
            allowed_lag,
            idle_aware_stop=False,
            marker_tolerance=0,
            burrow_err=True,
            live_member_stall=False,
            young_window_stop_ms=0.0,
            warn_lag_gaps=0.0,
            gone_stop_ms=0.0,
        )


@dataclass(frozen=True, slots=True)
class PartitionWindows:
    """What the rules read for P partitions (struct of arrays, windows oldest first and
    left-aligned: slots ``>= counts`` are ignored whatever they hold).

    * ``offsets``, ``timestamps_ms`` (unix ms), ``lags``: ``[P, W]`` int64, one slot per stored
      commit; a lag < 0 means unknown (Burrow's nil ``*Lag``).
    * ``counts[P]``: filled slots; ``window_size``: Burrow's ``intervals`` (``complete`` =
      counts / window_size), defaults to W.
    * ``current_lag[P]``: newest log end - last committed offset, floored at 0.
    * ``broker_offsets[P, B]`` with ``broker_counts[P]``: the partition's recent log ends
      (Burrow's ring of the last ``intervals`` refreshes), any order.
    * ``trend_offsets``, ``trend_lags`` (``[P, W]``) and ``trend_counts[P]`` (optional): the
      commits the lag trend is judged on (WARN), when they differ from the window: the store
      passes the newest commits whose log end is known on both sides, with the lag at each
      commit's time (see :mod:`monitor.store.windows`). Without them the window's own lags are
      used, as Burrow does.

    Memory layout: the ``[P, W]`` and ``[P, B]`` arrays are Fortran-ordered (slot-major: slot
    ``j`` of every partition is contiguous), which makes the per-window reductions several
    times faster. :meth:`from_arrays` converts; the store hands them over in that layout.
    """

    offsets: IntArray
    timestamps_ms: IntArray
    lags: IntArray
    counts: IntArray
    current_lag: IntArray
    broker_offsets: IntArray
    broker_counts: IntArray
    window_size: int
    trend_offsets: IntArray | None = None
    trend_lags: IntArray | None = None
    trend_counts: IntArray | None = None

    @classmethod
    def from_arrays(
        cls,
        offsets: npt.ArrayLike,
        timestamps_ms: npt.ArrayLike,
        lags: npt.ArrayLike,
        counts: npt.ArrayLike,
        current_lag: npt.ArrayLike,
        broker_offsets: npt.ArrayLike,
        broker_counts: npt.ArrayLike | None = None,
        window_size: int | None = None,
        trend: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike] | None = None,
    ) -> PartitionWindows:
        """Coerce to int64 and check shapes once, so the rules need no checks."""
        # Fortran order (slot-major memory): see the class docstring.
        off = np.asfortranarray(np.atleast_2d(np.asarray(offsets, dtype=np.int64)))
        ts = np.asfortranarray(np.atleast_2d(np.asarray(timestamps_ms, dtype=np.int64)))
        lag = np.asfortranarray(np.atleast_2d(np.asarray(lags, dtype=np.int64)))
        if not off.shape == ts.shape == lag.shape:
            raise ValueError(f"window shapes differ: {off.shape} {ts.shape} {lag.shape}")
        p, w = off.shape
        cnt = np.asarray(counts, dtype=np.int64).reshape(p)
        cur = np.asarray(current_lag, dtype=np.int64).reshape(p)
        bro = np.asfortranarray(np.asarray(broker_offsets, dtype=np.int64).reshape(p, -1))
        bcnt = (
            np.full(p, bro.shape[1], dtype=np.int64)
            if broker_counts is None
            else np.asarray(broker_counts, dtype=np.int64).reshape(p)
        )
        size = w if window_size is None else int(window_size)
        if w == 0:
            raise ValueError("the window needs at least one slot")
        if np.any((cnt < 0) | (cnt > w)) or np.any((bcnt < 0) | (bcnt > bro.shape[1])):
            raise ValueError("counts must lie within the window / broker ring sizes")
        if size < 1 or size < w:
            raise ValueError(f"window_size {size} must be >= 1 and >= the window width {w}")
        if np.any(cur < 0):
            raise ValueError("current_lag must be >= 0")
        if trend is None:
            return cls(off, ts, lag, cnt, cur, bro, bcnt, size)
        t_off = np.asfortranarray(np.asarray(trend[0], dtype=np.int64).reshape(p, -1))
        t_lag = np.asfortranarray(np.asarray(trend[1], dtype=np.int64).reshape(p, -1))
        t_cnt = np.asarray(trend[2], dtype=np.int64).reshape(p)
        if t_off.shape != t_lag.shape or np.any((t_cnt < 0) | (t_cnt > t_off.shape[1])):
            raise ValueError("trend offsets, lags and counts do not agree")
        return cls(off, ts, lag, cnt, cur, bro, bcnt, size, t_off, t_lag, t_cnt)

    @property
    def size(self) -> int:
        return int(self.offsets.shape[0])


@dataclass(frozen=True, slots=True)
class PartitionResults:
    """Each rule's result per partition (for diagnostics and tests), and the status.

    Burrow's rule results are raw (as Burrow computes them, whatever the options);
    ``caught_up``, ``markers_only`` and ``stop_clock_ms`` show what the options changed.
    """

    status: StatusArray
    complete: FloatArray
    lag_always_not_zero: BoolArray  # Burrow isLagAlwaysNotZero
    rewind_index: IntArray  # Burrow checkIfOffsetsRewind (-1: none)
    rewind_recovered: BoolArray  # Burrow checkIfRewindRecovered
    stopped: BoolArray  # Burrow checkIfOffsetsStopped
    stalled: BoolArray  # Burrow checkIfOffsetsStalled
    lag_not_decreasing: BoolArray  # Burrow checkIfLagNotDecreasing
    recent_lag_zero: BoolArray  # Burrow checkIfRecentLagZero
    caught_up: BoolArray  # rule 1 after option (b)
    markers_only: BoolArray  # option (b) made rule 1 true
    stop_clock_ms: FloatArray  # when the STOP clock started (last commit, or later with (a))


@dataclass(frozen=True, slots=True)
class _Views:
    """What every rule reads, built once per batch: slot-major ``[W, P]`` views (C-contiguous:
    each rule is a reduction over a few rows of P values, many times faster than reducing the
    short axis of ``[P, W]``) and each partition's first and last commit."""

    off: IntArray
    ts: IntArray
    lags: IntArray
    valid: BoolArray  # [W, P]: slot filled
    pair: BoolArray  # [W-1, P]: slot j+1 (and so slot j) filled
    cnt: IntArray
    filled: BoolArray  # [P]: any commit
    lag_known: BoolArray  # [W, P]: filled with a known lag
    first_ts: FloatArray
    last_off: IntArray
    last_ts: FloatArray
    last_lag: IntArray

    @classmethod
    def of(cls, w: PartitionWindows) -> _Views:
        p, width = w.offsets.shape
        off, ts, lags = w.offsets.T, w.timestamps_ms.T, w.lags.T
        valid = np.arange(width)[:, None] < w.counts
        last_i = np.maximum(w.counts - 1, 0) * p + np.arange(p, dtype=np.int64)  # flat [W, P]
        return cls(
            off, ts, lags, valid, valid[1:], w.counts, w.counts > 0, valid & (lags >= 0),
            ts[0].astype(np.float64), off.reshape(-1)[last_i],
            ts.reshape(-1)[last_i].astype(np.float64), lags.reshape(-1)[last_i],
        )


# --- Burrow's rules, one function each, named after Burrow's ----------------------------------


def is_lag_always_not_zero(v: _Views, allowed: IntArray) -> BoolArray:
    """isLagAlwaysNotZero: no known lag in the window is within ``allowed``."""
    return v.filled & ~np.any(v.lag_known & (v.lags <= allowed), axis=0)


def check_offsets_rewind(v: _Views) -> tuple[BoolArray, IntArray, BoolArray]:
    """checkIfOffsetsRewind: (any offset lower than its predecessor, the first such slot or -1,
    checkIfRewindRecovered: a later offset reached the one before the drop again). The last
    two are computed only where some offset went down (few partitions)."""
    p = v.cnt.shape[0]
    down = (v.off[1:] < v.off[:-1]) & v.pair
    has_rewind = np.any(down, axis=0)
    index = np.full(p, -1, dtype=np.int64)
    recovered = np.zeros(p, dtype=bool)
    rw = np.flatnonzero(has_rewind)
    if rw.size:
        ri = np.argmax(down[:, rw], axis=0).astype(np.int64) + 1
        index[rw] = ri
        before = v.off.reshape(-1)[(ri - 1) * p + rw]
        slot = np.arange(v.off.shape[0])[:, None]
        recovered[rw] = np.any(v.valid[:, rw] & (slot >= ri) & (v.off[:, rw] >= before), axis=0)
    return has_rewind, index, recovered


def check_offsets_stopped(v: _Views, now: FloatArray) -> BoolArray:
    """checkIfOffsetsStopped: the time since the last commit exceeds (strictly) the window's
    span."""
    return v.filled & ((now - v.last_ts) > (v.last_ts - v.first_ts))


def check_offsets_stalled(v: _Views) -> BoolArray:
    """checkIfOffsetsStalled: every offset equals the one before it."""
    return v.filled & ~np.any((v.off[1:] != v.off[:-1]) & v.pair, axis=0)


def trend_views(v: _Views, w: PartitionWindows) -> tuple[IntArray, IntArray, BoolArray, bool]:
    """The commits the lag trend is judged on: the trend window when the caller gives one
    (lags at each commit's time; see :class:`PartitionWindows`), else the window itself.
    Returns slot-major offsets, lags, which lags are known, and whether it is a trend window."""
    if w.trend_counts is None or w.trend_offsets is None or w.trend_lags is None:
        return v.off, v.lags, v.lag_known, False
    t_off, t_lags = w.trend_offsets.T, w.trend_lags.T
    t_known = (np.arange(t_off.shape[0])[:, None] < w.trend_counts) & (t_lags >= 0)
    return t_off, t_lags, t_known, True


def check_lag_not_decreasing(
    v: _Views, t_lags: IntArray, t_known: BoolArray, trend_window: bool
) -> BoolArray:
    """checkIfLagNotDecreasing: known lags never decrease (unknown ones are skipped; known lags
    are >= 0, so the -1 start never counts as a decrease). A trend window with no known lag
    shows no trend."""
    p = v.cnt.shape[0]
    prev = np.full(p, -1, dtype=np.int64)
    decrease = np.zeros(p, dtype=bool)
    for j in range(t_lags.shape[0]):
        decrease |= t_known[j] & (t_lags[j] < prev)
        np.copyto(prev, t_lags[j], where=t_known[j])
    out = v.filled & ~decrease
    return out & np.any(t_known, axis=0) if trend_window else out


def check_recent_lag_zero(v: _Views, w: PartitionWindows) -> BoolArray:
    """checkIfRecentLagZero: some stored log end is at or below the last committed offset."""
    ring = w.broker_offsets.T
    bvalid = np.arange(ring.shape[0])[:, None] < w.broker_counts
    return np.any(bvalid & (ring <= v.last_off), axis=0)


# --- this project's options, one function each (see the module docstring) --------------------


def option_b_markers_only(
    v: _Views, w: PartitionWindows, opt: RuleOptions, allowed: IntArray,
    history: LeoHistory | None,
) -> BoolArray:
    """(b): a lag within ``marker_tolerance`` that was already there at the last commit (the
    log end has not moved since) is transaction markers: caught up."""
    cur = w.current_lag
    if opt.marker_tolerance <= 0:
        return np.zeros(cur.shape[0], dtype=bool)
    not_moved = (v.last_lag >= 0) & (v.last_lag >= cur)
    if history is not None:
        not_moved |= ~history.moved_after(v.last_off + cur, v.last_ts)
    return v.filled & (cur > allowed) & (cur <= opt.marker_tolerance) & not_moved


def option_e_young_window_allowance(
    v: _Views, opt: RuleOptions, allowance: FloatArray
) -> FloatArray:
    """(e): the silence must exceed at least ``_YOUNG_GAPS`` of the window's commit gaps
    (Burrow: one gap when it holds two commits); a lone commit (no cadence) waits
    ``young_window_stop_ms``."""
    if opt.young_window_stop_ms <= 0:
        return allowance
    span = v.last_ts - v.first_ts
    least = np.where(
        v.cnt >= 2, span / np.maximum(v.cnt - 1, 1) * _YOUNG_GAPS, opt.young_window_stop_ms
    )
    return np.maximum(allowance, least)


def option_a_idle_aware_stop_clock(
    v: _Views, opt: RuleOptions, allowed: IntArray, history: LeoHistory | None,
    allowance: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """(a): STOP's clock starts when the consumer last had nothing to read (the log end seen
    within ``allowed``, or at the marker-sized gap its last commit already saw), not at its
    last commit; a consumer that went idle caught up gets ``idle_grace_ms``. Returns the
    clock's start and the allowance."""
    if not opt.idle_aware_stop or history is None:
        return v.last_ts, allowance
    at_commit = np.where((v.last_lag >= 0) & (v.last_lag <= opt.marker_tolerance), v.last_lag, 0)
    seen = history.last_time_at_or_below(v.last_off + np.maximum(allowed, at_commit))
    clock = np.maximum(v.last_ts, seen.astype(np.float64))
    if opt.idle_grace_ms > 0:
        # Idle: the log end stayed at its committed offset for longer than its usual gap
        # between commits after the last one (a consumer that died mid-stream sees the log end
        # move on within one gap). It commits only on progress, so its window span says
        # nothing of how fast it reacts to new data: give it the grace.
        usual_gap = (v.last_ts - v.first_ts) / np.maximum(v.cnt - 1, 1)
        idled = (seen - v.last_ts) > usual_gap
        allowance = np.where(idled, np.maximum(allowance, opt.idle_grace_ms), allowance)
    return clock, allowance


def option_f_lag_beyond_sampling(
    off: IntArray, lags: IntArray, lag_known: BoolArray, gaps: float
) -> BoolArray:
    """(f): between the first and the last known lag of each window (``[W, P]`` slot-major
    inputs), the lag grew and its last two known values are above ``gaps`` commit gaps' worth
    of production (the log end, offset + lag, advanced this much per gap on average).

    Two in a row, because one is a step, not a trend: a burst the consumer absorbs before its
    next commit shows one lag far above the others (read between the burst and the commit
    that covers it), then none (seen on the real broker: WARN for one read after every burst
    of a consumer committing every 5 s). A consumer falling behind passes the bound at every
    commit from then on, so it waits one commit gap more."""
    width, p = off.shape
    col = np.arange(p, dtype=np.int64)
    first_j = np.argmax(lag_known, axis=0).astype(np.int64)
    last_j = (width - 1 - np.argmax(lag_known[::-1], axis=0)).astype(np.int64)
    # The known lag before the last: the second known slot counted from the end.
    from_end = np.cumsum(lag_known[::-1], axis=0)
    prev_j = (width - 1 - np.argmax(lag_known[::-1] & (from_end == 2), axis=0)).astype(np.int64)
    first_i, last_i = first_j * p + col, last_j * p + col
    flat = lags.reshape(-1)
    first_lag, last_lag, prev_lag = flat[first_i], flat[last_i], flat[prev_j * p + col]
    produced = (off.reshape(-1)[last_i] + last_lag) - (off.reshape(-1)[first_i] + first_lag)
    per_gap = produced / np.maximum(last_j - first_j, 1)
    grew = np.any(lag_known, axis=0) & (last_j > first_j) & (last_lag > first_lag)
    bound = gaps * per_gap
    return grew & (last_lag > bound) & (prev_lag > bound)


def option_g_consumers_gone(
    v: _Views, opt: RuleOptions, now: FloatArray, stop_clock: FloatArray,
    allowance: FloatArray, left_ms: npt.ArrayLike | None,
) -> BoolArray:
    """(g): the group's consumers left (``left_ms``, NaN where not): nobody will read the
    waiting data, so the silence only has to outlast a short grace (a restart), not the
    window's span."""
    p = v.cnt.shape[0]
    if opt.gone_stop_ms <= 0 or left_ms is None:
        return np.zeros(p, dtype=bool)
    left = np.broadcast_to(np.asarray(left_ms, dtype=np.float64), (p,))
    gone = ~np.isnan(left)
    since = np.maximum(stop_clock, np.where(gone, left, -np.inf))
    return v.filled & gone & ((now - since) > np.minimum(allowance, opt.gone_stop_ms))


# --- the combiner ------------------------------------------------------------------------------


def evaluate_partitions(
    w: PartitionWindows,
    now_ms: float | npt.ArrayLike,
    options: RuleOptions | None = None,
    history: LeoHistory | None = None,
    allowed_lag: npt.ArrayLike | None = None,
    alive: npt.ArrayLike | None = None,
    left_ms: npt.ArrayLike | None = None,
) -> PartitionResults:
    """Status of P partitions in one vectorised pass. ``now_ms``: scalar or ``[P]`` (a
    per-partition "now" lets the caller stop the clocks of partitions whose data is not fresh,
    e.g. during a broker outage: silence that is ours is not the consumer's).
    ``history`` (optional, same P): the log-end history options (a) and (b) use.
    ``allowed_lag`` (optional, scalar or ``[P]``) overrides ``options.allowed_lag``, for
    per-group allowances in one batch. ``alive`` (optional, bool scalar or ``[P]``): a live
    member of the group is there, for option (d). ``left_ms`` (optional, scalar or ``[P]``,
    NaN where not): when the group's consumers were seen to have left (it had live members,
    now none), for option (g)."""
    opt = options or RuleOptions()
    p = w.offsets.shape[0]
    allowed = np.broadcast_to(
        np.asarray(opt.allowed_lag if allowed_lag is None else allowed_lag, dtype=np.int64), (p,)
    )
    if np.any(allowed < 0):
        raise ValueError("allowed_lag must be >= 0")
    if history is not None and history.size != p:
        raise ValueError(f"history has {history.size} partitions, windows {p}")
    now = np.broadcast_to(np.asarray(now_ms, dtype=np.float64), (p,))
    v = _Views.of(w)

    # Burrow's rule results, raw.
    lag_always_not_zero = is_lag_always_not_zero(v, allowed)
    has_rewind, rewind_index, rewind_recovered = check_offsets_rewind(v)
    stopped = check_offsets_stopped(v, now)
    stalled = check_offsets_stalled(v)
    t_off, t_lags, t_known, trend_window = trend_views(v, w)
    lag_not_decreasing = check_lag_not_decreasing(v, t_lags, t_known, trend_window)
    recent_lag_zero = check_recent_lag_zero(v, w)

    # Rule 1, with (b).
    markers_only = option_b_markers_only(v, w, opt, allowed, history)
    caught_up = (w.current_lag <= allowed) | markers_only
    # Rule 2, with (e), (a) and (g). Burrow's exception "some recent log end <= the committed
    # offset: a quiet topic" is what (a) does precisely (its clock starts when the log end was
    # last seen there); kept as such it would hold a consumer that died caught up for
    # ``intervals`` log-end refreshes.
    allowance = option_e_young_window_allowance(v, opt, v.last_ts - v.first_ts)
    stop_clock, allowance = option_a_idle_aware_stop_clock(v, opt, allowed, history, allowance)
    stop_due = v.filled & ((now - stop_clock) > allowance)
    stop_due |= option_g_consumers_gone(v, opt, now, stop_clock, allowance, left_ms)
    exempt = recent_lag_zero
    if opt.idle_aware_stop and history is not None:
        exempt = np.zeros(p, dtype=bool)
    # Rule 4's WARN, with (f) and (e): a trend, grown beyond what sampling explains.
    warn_trend = lag_not_decreasing
    if opt.warn_lag_gaps > 0:
        warn_trend = warn_trend & option_f_lag_beyond_sampling(
            t_off, t_lags, t_known, opt.warn_lag_gaps
        )
    if opt.young_window_stop_ms > 0:
        warn_trend = warn_trend & (np.sum(t_known, axis=0) >= 2)

    status = np.full(p, Status.OK, dtype=np.int8)
    judged = v.filled & ~caught_up
    is_stop = judged & stop_due & ~exempt
    held = np.zeros(p, dtype=bool)  # (d): would be STOP, but a consumer is there: STALL
    if opt.live_member_stall and alive is not None:
        held = is_stop & np.broadcast_to(np.asarray(alive, dtype=bool), (p,))
        is_stop &= ~held
    is_rewind = judged & ~is_stop & has_rewind & ~rewind_recovered
    rest = judged & ~is_stop & ~is_rewind & lag_always_not_zero
    if opt.young_window_stop_ms > 0:
        rest &= v.cnt >= 2  # (e): one commit shows no trend (Burrow: STALL, as all "equal")
    status[rest & warn_trend] = Status.WARN
    status[rest & stalled] = Status.STALL  # STALL is checked before WARN in Burrow
    status[held & ~is_rewind] = Status.STALL
    status[is_rewind] = Status.REWIND
    status[is_stop] = Status.STOP

    return PartitionResults(
        status=status,
        complete=v.cnt.astype(np.float64) / float(w.window_size),
        lag_always_not_zero=lag_always_not_zero,
        rewind_index=rewind_index,
        rewind_recovered=rewind_recovered,
        stopped=stopped,
        stalled=stalled,
        lag_not_decreasing=lag_not_decreasing,
        recent_lag_zero=recent_lag_zero,
        caught_up=caught_up,
        markers_only=markers_only,
        stop_clock_ms=np.asarray(stop_clock, dtype=np.float64),
    )


class GroupIndex:
    """Which group each partition belongs to, sorted once; every group reduction (status,
    lag, lag seconds) reuses the order as segment reductions (``ufunc.reduceat``).

    ``group_ids[P]`` in ``[0, n_groups)``, any order. Groups with no partitions are allowed.
    """

    __slots__ = ("n_groups", "order", "counts", "starts", "nonempty", "_starts_ne", "_size")

    def __init__(self, group_ids: npt.ArrayLike, n_groups: int | None = None) -> None:
        gid = np.asarray(group_ids, dtype=np.int64).ravel()
        g = int(gid.max()) + 1 if n_groups is None and gid.size else int(n_groups or 0)
        if gid.size and (gid.min() < 0 or gid.max() >= g):
            raise ValueError(f"group ids must lie in [0, {g})")
        self.n_groups = g
        self._size = int(gid.size)
        presorted = gid.size < 2 or bool(np.all(gid[1:] >= gid[:-1]))
        self.order: IntArray | None = None if presorted else np.argsort(gid, kind="stable")
        self.counts: IntArray = np.bincount(gid, minlength=g).astype(np.int64)
        self.starts: IntArray = np.concatenate(([0], np.cumsum(self.counts)[:-1])).astype(np.int64)[
            :g
        ]
        self.nonempty: BoolArray = self.counts > 0
        self._starts_ne = self.starts[self.nonempty]

    def _sorted(self, values: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
        if values.shape[0] != self._size:
            raise ValueError(f"{values.shape[0]} values for {self._size} partitions")
        return values if self.order is None else values[self.order]

    def _reduce(self, ufunc: np.ufunc, values: npt.ArrayLike, empty: float) -> npt.NDArray:
        v = self._sorted(np.asarray(values))
        out = np.full(self.n_groups, empty, dtype=v.dtype)
        if self._starts_ne.size:
            out[self.nonempty] = ufunc.reduceat(v, self._starts_ne)
        return out

    def max(self, values: npt.ArrayLike, empty: float = 0) -> npt.NDArray:
        return self._reduce(np.maximum, values, empty)

    def sum(self, values: npt.ArrayLike) -> npt.NDArray:
        return self._reduce(np.add, values, 0)

    def argmax(self, values: npt.ArrayLike) -> IntArray:
        """Index (into the input partition arrays) of each group's largest value, the first in
        input order among ties as Burrow's loop picks it; -1 for an empty group."""
        v = self._sorted(np.asarray(values))
        out = np.full(self.n_groups, -1, dtype=np.int64)
        if not self._starts_ne.size:
            return out
        top = np.maximum.reduceat(v, self._starts_ne)
        pos = np.arange(v.shape[0], dtype=np.int64)
        hit = v == np.repeat(top, self.counts[self.nonempty])
        first = np.minimum.reduceat(np.where(hit, pos, v.shape[0]), self._starts_ne)
        out[self.nonempty] = first if self.order is None else self.order[first]
        return out


@dataclass(frozen=True, slots=True)
class GroupResults:
    """Per-group results, ``[G]`` arrays. ``status`` holds :class:`Status` codes, or
    :class:`BurrowStatus` codes when ``burrow`` is True (option (c)). ``maxlag``: index of the
    partition with the largest current lag (-1: no partitions). An empty group is OK with
    ``complete`` 0, as in Burrow (a group whose topics were all deleted)."""

    status: StatusArray
    burrow: bool
    maxlag: IntArray
    totallag: IntArray
    complete: FloatArray
    partition_count: IntArray

    def status_names(self) -> list[str]:
        enum: type[IntEnum] = BurrowStatus if self.burrow else Status
        names = [m.name for m in sorted(enum, key=int)]
        return [names[s] for s in self.status.tolist()]


def evaluate_groups(
    partitions: PartitionResults,
    current_lag: npt.ArrayLike,
    groups: GroupIndex,
    options: RuleOptions | None = None,
) -> GroupResults:
    """Group status = worst partition status (see the ranking above), plus Burrow's
    maxlag, totallag, complete (share of partitions with complete 1) and partition_count."""
    opt = options or RuleOptions()
    lag = np.asarray(current_lag, dtype=np.int64)
    status = groups.max(partitions.status, empty=Status.OK).astype(np.int8)
    if opt.burrow_err:
        status = to_burrow(status, group=True)
    full = groups.sum((partitions.complete >= 1.0).astype(np.int64))
    count = groups.counts
    complete = np.divide(full, count, out=np.zeros(groups.n_groups), where=count > 0)
    return GroupResults(
        status=status,
        burrow=opt.burrow_err,
        maxlag=groups.argmax(lag),
        totallag=groups.sum(lag).astype(np.int64),
        complete=complete,
        partition_count=count.copy(),
    )


def evaluate(
    w: PartitionWindows,
    groups: GroupIndex,
    now_ms: float | npt.ArrayLike,
    options: RuleOptions | None = None,
    history: LeoHistory | None = None,
    allowed_lag: npt.ArrayLike | None = None,
    alive: npt.ArrayLike | None = None,
    left_ms: npt.ArrayLike | None = None,
) -> tuple[PartitionResults, GroupResults]:
    """Partitions and their groups in one call (the service's and the pipeline's entry)."""
    parts = evaluate_partitions(w, now_ms, options, history, allowed_lag, alive, left_ms)
    return parts, evaluate_groups(parts, w.current_lag, groups, options)

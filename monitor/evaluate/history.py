"""Each group's lag in seconds over the last hour, for the status page's sparklines and charts.

Fed by every evaluation round (:meth:`LagHistory.add`), bounded by construction: per cluster,
one ``float32`` per group and time bucket (``step``, 30 s by default; 120 buckets = one hour,
480 bytes per group), the worst lag seen in the bucket. Buckets are a ring: entering a new one
clears it, and a group with no value left in any bucket is dropped then, so a group that is gone
costs nothing an hour later. Kept across restarts with the state snapshot (as plain lists, see
:meth:`LagHistory.saved_state`), so a restart does not blank the charts.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.evaluate.job import ClusterEvaluation

SPAN = 3600.0
STEP = 30.0
NAME = "lag-history"
"""The name the history is saved under in the state snapshot (one entry per cluster)."""


@dataclass
class _Ring:
    slots: int
    rows: dict[str, int] = field(default_factory=dict)
    values: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32)
    )
    buckets: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if self.values.shape[1] != self.slots:
            self.values = np.full((0, self.slots), np.nan, dtype=np.float32)
            self.buckets = np.full(self.slots, -1, dtype=np.int64)

    def enter(self, bucket: int) -> int:
        """The slot of ``bucket``, cleared when the ring moves on to it; groups left with no
        value are dropped."""
        slot = bucket % self.slots
        if self.buckets[slot] != bucket:
            # This slot's old bucket, and any bucket older than the span (no round for a
            # while): their values are past.
            past = (self.buckets >= 0) & (self.buckets <= bucket - self.slots)
            past[slot] = True
            self.values[:, past] = np.nan
            self.buckets[past] = -1
            self.buckets[slot] = bucket
            self._compact()
        return slot

    def _compact(self) -> None:
        empty = np.isnan(self.values).all(axis=1)
        if not empty.any():
            return
        keep = ~empty
        names = sorted(self.rows, key=self.rows.__getitem__)
        self.values = self.values[keep]
        kept = [names[i] for i in np.flatnonzero(keep).tolist()]
        self.rows = {n: i for i, n in enumerate(kept)}

    def row_ids(self, names: list[str]) -> npt.NDArray[np.intp]:
        """Rows for ``names``, appended for new groups."""
        rows = self.rows
        new = [n for n in names if n not in rows]
        if new:
            start = len(rows)
            for i, n in enumerate(new):
                rows[n] = start + i
            grown = np.full((len(rows), self.slots), np.nan, dtype=np.float32)
            grown[: self.values.shape[0]] = self.values
            self.values = grown
        return np.fromiter((rows[n] for n in names), dtype=np.intp, count=len(names))


class LagHistory:
    """Worst lag in seconds per group and time bucket, per cluster (module docstring)."""

    def __init__(self, span: float = SPAN, step: float = STEP) -> None:
        self.step = step
        self.slots = max(1, math.ceil(span / step))
        self._rings: dict[str, _Ring] = {}
        self._lock = threading.Lock()

    def add(self, ev: ClusterEvaluation) -> None:
        """Record one round's group lag in seconds at its evaluation time."""
        summary = ev.summary()
        values = np.asarray(summary.lag_seconds, dtype=np.float32)
        with self._lock:
            ring = self._rings.get(ev.cluster)
            if ring is None:
                ring = self._rings[ev.cluster] = _Ring(self.slots)
            slot = ring.enter(int(ev.evaluated_at // self.step))
            rows = ring.row_ids(summary.group)
            ring.values[rows, slot] = np.fmax(ring.values[rows, slot], values)

    def matrix(
        self, cluster: str, groups: list[str]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float32]]:
        """Bucket start times (oldest first, the buckets of the last span) and one row of
        values per group in that order (NaN: no value in that bucket, or unknown group)."""
        with self._lock:
            ring = self._rings.get(cluster)
            if ring is None or not (ring.buckets >= 0).any():
                return np.zeros(0), np.zeros((len(groups), 0), dtype=np.float32)
            order = np.argsort(ring.buckets, kind="stable")
            latest = int(ring.buckets.max())
            b = ring.buckets[order]
            order = order[(b >= 0) & (b > latest - self.slots)]
            times = ring.buckets[order] * self.step
            rows = np.fromiter((ring.rows.get(g, -1) for g in groups), dtype=np.intp,
                               count=len(groups))
            out = np.full((len(groups), order.size), np.nan, dtype=np.float32)
            known = rows >= 0
            out[known] = ring.values[np.ix_(rows[known], order)]
            return times.astype(np.float64), out

    def series(self, cluster: str, groups: list[str]) -> tuple[list[float], list[list[float]]]:
        """:meth:`matrix` as lists."""
        times, values = self.matrix(cluster, groups)
        return times.tolist(), values.astype(np.float64).tolist()

    def nbytes(self) -> int:
        """Memory held by the value arrays (the bulk; the name index is the store's names)."""
        with self._lock:
            return sum(r.values.nbytes + r.buckets.nbytes for r in self._rings.values())

    # ------------------------------------------------------------------ state snapshot

    def saved_state(self, cluster: str) -> dict[str, object] | None:
        """Plain lists for the state snapshot (the loader accepts no numpy objects)."""
        with self._lock:
            ring = self._rings.get(cluster)
            if ring is None:
                return None
            return {
                "step": self.step,
                "buckets": ring.buckets.tolist(),
                "groups": sorted(ring.rows, key=ring.rows.__getitem__),
                "values": ring.values.tolist(),
            }

    def resume(self, cluster: str, state: object) -> None:
        """Continue from :meth:`saved_state` of a previous process; anything else, or a
        history taken with another bucket layout, is ignored."""
        if not isinstance(state, dict) or state.get("step") != self.step:
            return
        buckets, groups, values = state.get("buckets"), state.get("groups"), state.get("values")
        if not (isinstance(buckets, list) and isinstance(groups, list)
                and isinstance(values, list) and len(buckets) == self.slots
                and len(values) == len(groups)):
            return
        try:
            array = np.asarray(values, dtype=np.float32).reshape(len(groups), self.slots)
        except ValueError:
            return
        ring = _Ring(self.slots)
        ring.buckets = np.asarray(buckets, dtype=np.int64)
        ring.values = array
        ring.rows = {str(g): i for i, g in enumerate(groups)}
        with self._lock:
            self._rings[cluster] = ring

    def resumables(self, clusters: list[str]) -> list[SavedHistory]:
        """One entry per cluster for the state snapshot's collector states."""
        return [SavedHistory(self, c) for c in clusters]


@dataclass(frozen=True, slots=True)
class SavedHistory:
    """A cluster's history as the state snapshot saves a collector's state (``Resumable``)."""

    history: LagHistory
    cluster: str

    @property
    def name(self) -> str:
        return f"{NAME}/{self.cluster}"

    def saved_state(self) -> object | None:
        return self.history.saved_state(self.cluster)

"""Mirror checks: is a MirrorMaker pipeline (source cluster -> destination cluster) keeping up,
and is it losing or duplicating records?

Four views of one mirror, each catching what the others miss:

* canary across the mirror (:class:`~monitor.ingest.canary.CanaryProbe`, produce at the source,
  consume at the destination): replication latency, loss, duplicates;
* mirror lag per partition of the mirrored topics = source log-end offset - destination log-end
  offset, from both clusters' broker offsets in the store (meaningful when partitions map one
  to one and both logs started together; per-topic sums otherwise);
* the mirroring consumer group's status, from the evaluator's latest round on the source;
* records written per window at the source and at the destination (log-end deltas, the
  destination's window shifted by ``count_delay``): a window where fewer records reached the
  destination is loss, more is duplication, even when lag is zero (the mirror skipped ahead)
  or cancels out (losses and duplicates), which offset lag cannot tell. Their running sum
  (``window_difference_sum``) starts at 0 at an anchor where neither end moved for
  ``count_delay`` (nothing in flight), so it reads as records lost since the monitor started
  rather than as a change from an arbitrary start (see :meth:`MirrorCollector._anchor`).

The collector only reads the store (no Kafka client): it runs on the broker offsets' schedule.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.config import MirrorConfig
from monitor.ingest.base import Collector
from monitor.store.store import Store

if TYPE_CHECKING:
    from monitor.ingest.canary.probe import CanaryProbe

_HISTORY = 4096  # log-end samples kept per side and topic
_WINDOWS_KEPT = 60
_ANCHOR_TRIES = 10  # window boundaries tried for a quiet anchor before anchoring regardless


@dataclass(frozen=True, slots=True)
class WindowCount:
    """Records written to one mirrored topic in one window, at each end."""

    topic: str
    start: float
    end: float
    source_records: int
    destination_records: int

    @property
    def difference(self) -> int:
        """Positive: records that did not reach the destination; negative: duplicates."""
        return self.source_records - self.destination_records

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "start": self.start, "end": self.end,
                "source_records": self.source_records,
                "destination_records": self.destination_records,
                "difference": self.difference}


class _Series:
    """(observed time, summed log-end offset) samples of one topic at one end."""

    def __init__(self) -> None:
        self.points: deque[tuple[float, int]] = deque(maxlen=_HISTORY)

    def add(self, t: float, value: int) -> None:
        if not self.points or t > self.points[-1][0]:
            self.points.append((t, value))

    def covers(self, start: float, end: float) -> bool:
        return bool(self.points) and self.points[0][0] <= start and self.points[-1][0] >= end

    def at(self, t: float) -> int:
        """The log end at ``t``, interpolated and rounded, so that consecutive windows add up
        exactly (their sum is the change between the first start and the last end)."""
        ts, vs = zip(*self.points, strict=True)
        return round(float(np.interp(t, ts, vs)))


class MirrorCollector(Collector):
    kind = "mirror"

    def __init__(
        self, mirror: MirrorConfig, interval: float, store: Store,
        canary: CanaryProbe | None = None,
    ) -> None:
        super().__init__(mirror.name, interval)
        self.mirror = mirror
        self.store = store
        self.canary = canary
        self._series: dict[tuple[str, str], _Series] = {}
        self._windows: dict[str, deque[WindowCount]] = {t: deque(maxlen=_WINDOWS_KEPT)
                                                         for t in mirror.topics}
        self._next_window: dict[str, float] = {}
        self._anchored: set[str] = set()
        self._anchor_tries: dict[str, int] = dict.fromkeys(mirror.topics, 0)
        self._net: dict[str, int] = dict.fromkeys(mirror.topics, 0)
        self._snapshot: dict[str, Any] = {"lag": [], "topics": [], "windows": [],
                                          "updated_at": None}

    def collect(self) -> None:
        now = time.time()
        m = self.mirror
        src = self.store.broker_offsets(m.source)
        dst = self.store.broker_offsets(m.destination)
        lag_rows: list[dict[str, Any]] = []
        topic_rows: list[dict[str, Any]] = []
        for topic in m.topics:
            s_parts = {p: o for (t, p), o in src.items() if t == topic}
            d_parts = {p: o for (t, p), o in dst.items() if t == topic}
            for p in sorted(s_parts.keys() & d_parts.keys()):
                lag_rows.append({
                    "topic": topic, "partition": p,
                    "source_log_end": s_parts[p].log_end,
                    "destination_log_end": d_parts[p].log_end,
                    "lag": s_parts[p].log_end - d_parts[p].log_end,
                    "stale": s_parts[p].stale or d_parts[p].stale,
                })
            s_sum = sum(o.log_end for o in s_parts.values()) if s_parts else None
            d_sum = sum(o.log_end for o in d_parts.values()) if d_parts else None
            if s_parts:
                self._side(topic, "source").add(max(o.observed_at for o in s_parts.values()),
                                                 int(s_sum or 0))
            if d_parts:
                self._side(topic, "destination").add(
                    max(o.observed_at for o in d_parts.values()), int(d_sum or 0)
                )
            self._close_windows(topic)
            topic_rows.append({
                "topic": topic,
                "source_partitions": len(s_parts), "destination_partitions": len(d_parts),
                "partition_counts_differ": len(s_parts) != len(d_parts),
                "source_log_end_sum": s_sum, "destination_log_end_sum": d_sum,
                "lag": s_sum - d_sum if s_sum is not None and d_sum is not None else None,
                "window_difference_sum": self._net[topic],
            })
        windows = sorted(
            (w for q in self._windows.values() for w in q), key=lambda w: (w.start, w.topic)
        )
        self._snapshot = {
            "lag": lag_rows, "topics": topic_rows,
            "windows": [w.as_dict() for w in windows],
            "updated_at": round(now, 3),
        }

    def _side(self, topic: str, side: str) -> _Series:
        return self._series.setdefault((topic, side), _Series())

    def _close_windows(self, topic: str) -> None:
        """Count every window that both ends have now observed past (aligned to multiples of
        ``count_window``; the destination's shifted by ``count_delay``)."""
        src = self._side(topic, "source")
        dst = self._side(topic, "destination")
        if not src.points or not dst.points:
            return
        width, delay = self.mirror.count_window, self.mirror.count_delay
        if topic not in self._next_window:
            first = max(src.points[0][0], dst.points[0][0])
            self._next_window[topic] = (first // width + 1) * width
        if topic not in self._anchored and not self._anchor(topic, src, dst):
            return
        start = self._next_window[topic]
        while src.covers(start, start + width) and dst.covers(start + delay,
                                                               start + width + delay):
            end = start + width
            window = WindowCount(
                topic, start, end,
                src.at(end) - src.at(start),
                dst.at(end + delay) - dst.at(start + delay),
            )
            self._windows[topic].append(window)
            self._net[topic] += window.difference
            start = end
        self._next_window[topic] = start

    def _anchor(self, topic: str, src: _Series, dst: _Series) -> bool:
        """Pick the first window's start; True once picked.

        Windows pair the source's records in [start, end) with the destination's in
        [start + delay, end + delay). At the first start, that pairing is cut: records written
        at the source just after it that reach the destination before ``start + delay`` count
        at the source only, and records written before it still in flight count at the
        destination only, so the running sum would carry that cut for ever (a healthy mirror
        reading as losing records). A boundary where neither end's log end moves over
        [start, start + delay] cuts nothing: the first such boundary is the anchor. A topic
        never quiet for ``count_delay`` is anchored after ``_ANCHOR_TRIES`` boundaries anyway
        (steady traffic cuts about as many records at the start as in the latest window, so
        the sum is then right as a change). Records stuck in a stopped mirror across a quiet
        anchor cannot be seen by log ends: they show as duplicates when they arrive."""
        width, delay = self.mirror.count_window, self.mirror.count_delay
        start = self._next_window[topic]
        while src.covers(start, start + delay) and dst.covers(start, start + delay):
            quiet = (src.at(start) == src.at(start + delay)
                     and dst.at(start) == dst.at(start + delay))
            if quiet or self._anchor_tries[topic] >= _ANCHOR_TRIES:
                self._next_window[topic] = start
                self._anchored.add(topic)
                return True
            self._anchor_tries[topic] += 1
            start += width
        self._next_window[topic] = start
        return False

    def snapshot(self) -> dict[str, Any]:
        return self._snapshot

    def last_windows(self) -> dict[str, WindowCount]:
        return {t: q[-1] for t, q in self._windows.items() if q}

    def net_difference(self) -> dict[str, int]:
        return dict(self._net)

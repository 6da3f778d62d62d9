"""Replay observation rows through the service's own store, windows and rules.

Why not rules in Spark SQL: the statuses must be the service's statuses. A :class:`Replayer`
holds a real :class:`~monitor.store.store.Store` (Burrow's window storage rules in
:mod:`monitor.store.windows`) and runs the real :class:`~monitor.evaluate.job.Evaluator` (the pure
vectorised rules of :mod:`monitor.rules`) over all of its groups at once. Spark only
splits the groups into buckets and runs one replayer per bucket: a group's verdict depends
only on its own windows and the log ends of its partitions, so every bucket gets its groups'
rows and every log-end row.

When to evaluate: at the service's recorded rounds (``round`` marks: same moment, same reader
freshness, after exactly the observations that round saw), and/or every ``step`` seconds of
observation time (tuning: "what would these settings have said at any moment").
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Iterator
from typing import Any

from monitor.config import CollectorsConfig, EvaluatorConfig
from monitor.evaluate.job import ClusterEvaluation, Evaluator
from monitor.model.status_json import status_json
from monitor.record.rows import ClockMark, Event, Verdicts, empty_verdicts, events, extend, verdicts
from monitor.store.store import Store

DETAIL_LIMIT = 512 * 1024
"""A status object larger than this (a group of thousands of partitions) is published with
its non-OK partitions only, as Burrow's ``/status`` lists them, to stay under Kafka's default
1 MB record limit."""


def status_detail(ev: ClusterEvaluation, group: str) -> str:
    g = ev.group(group)
    assert g is not None, group
    text = json.dumps(status_json(g, only_non_ok=False))
    if len(text) > DETAIL_LIMIT:
        text = json.dumps(status_json(g, only_non_ok=True))
    return text


class Replayer:
    """A store and an evaluator fed by observation rows (see the module docstring).
    Picklable, so a streaming job keeps one per bucket in Spark state between batches."""

    def __init__(
        self, config: EvaluatorConfig,
        read_interval: float = CollectorsConfig().group_offsets_interval,
    ) -> None:
        self.config = config
        # How often the recorded service read groups through the Admin API: its evaluator
        # holds such a read current that long (groups fed by __consumer_offsets: no effect).
        self.read_interval = read_interval
        self.run: int | None = None
        self.next_step: float | None = None  # step mode: the next evaluation time
        self.observations = 0
        self.published: set[str] = set()  # groups the stream last published (tombstones)
        self._reset()

    def _reset(self) -> None:
        self.store = Store(self.config)
        # cluster -> (fresh_at, at): at time ``at`` the offsets reader was fresh up to
        # ``fresh_at`` (None: not known fresh, e.g. an Admin-API-only cluster).
        self._fresh: dict[str, tuple[float | None, float]] = {}
        self._now = 0.0

    def to_bytes(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def from_bytes(blob: bytes) -> Replayer:
        replayer = pickle.loads(blob)
        if not isinstance(replayer, Replayer):
            raise TypeError("not a replayer state")
        return replayer

    # ------------------------------------------------------------------ freshness and rounds

    def _freshness(self, cluster: str) -> float | None:
        """The offsets reader's freshness as the service's evaluator saw it: the recorded
        value at a recorded round, carried forward with time between marks; with no mark at
        all, fresh (a stream, or a recording of other origin)."""
        mark = self._fresh.get(cluster)
        if mark is None:
            return self._now
        fresh_at, at = mark
        return None if fresh_at is None else fresh_at + max(0.0, self._now - at)

    def seen_until(self, cluster: str) -> float | None:
        """The time of the latest clock mark of ``cluster``: what was read up to then."""
        mark = self._fresh.get(cluster)
        return mark[1] if mark is not None else None

    def evaluate(self, cluster: str, now: float, *, detail: bool = False) -> Verdicts:
        """Evaluate one cluster now, as the service's evaluation round does (expiry first).
        ``detail``: also each group's whole status object as JSON (column ``detail``), as the
        API would answer it, for the stream's statuses topic."""
        self._now = now
        self.store.expire_groups(now)
        evaluator = Evaluator(self.store, self.config, freshness=self._freshness,
                              read_interval={cluster: self.read_interval})
        ev = evaluator.evaluate_cluster(cluster, now)
        out = verdicts(ev)
        if detail:
            out["detail"] = [status_detail(ev, name) for name in out["group"]]
        return out

    def evaluate_all(self, now: float) -> Verdicts:
        out = empty_verdicts()
        for cluster in self.store.clusters():
            extend(out, self.evaluate(cluster, now))
        return out

    # ------------------------------------------------------------------ applying rows

    def apply(self, event: Event) -> ClockMark | None:
        """Apply one observation to the store; a clock mark is returned, not applied."""
        if event.run != self.run:
            if self.run is not None:  # the service restarted: it started from an empty store
                self._reset()
            self.run = event.run
        obs = event.observation
        if isinstance(obs, ClockMark):
            if obs.kind == "fresh":
                self._fresh[obs.cluster] = (obs.at, obs.at)
            else:
                self._fresh[obs.cluster] = (obs.fresh_at, obs.at)
            return obs
        self.observations += 1
        self.store.apply(obs)
        return None

    def replay(
        self, frame: Any, *, rounds: bool = True, step: float | None = None,
        until: float | None = None,
    ) -> Iterator[Verdicts]:
        """Apply a frame of rows in order, yielding verdicts at every ``round`` mark (if
        ``rounds``) and every ``step`` seconds of observation time (if given), the last step
        at or before ``until`` (default: the last observation)."""
        last = -math.inf
        for event in events(frame):
            at = event.at
            if step is not None and not math.isnan(at):
                if self.next_step is None:
                    self.next_step = math.ceil(at / step) * step
                while at > self.next_step:
                    yield self.evaluate_all(self.next_step)
                    self.next_step += step
                last = max(last, at)
            mark = self.apply(event)
            if mark is not None and mark.kind == "round" and rounds:
                yield self.evaluate(mark.cluster, mark.at)
        if step is not None and self.next_step is not None:
            end = last if until is None else until
            while self.next_step <= end:
                yield self.evaluate_all(self.next_step)
                self.next_step += step

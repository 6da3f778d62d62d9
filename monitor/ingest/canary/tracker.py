"""Sequence tracking of one probe's own records, and the windowed figures the API shows.

The producer and the consumer of a probe live in the same process, so the tracker knows which
records Kafka acknowledged and need not guess from sequence gaps alone: a record acknowledged
and not consumed within ``loss_sla`` is *lost* (this covers gaps in the middle and a missing
tail, which gap detection cannot see). A record consumed twice is *duplicated*; one consumed
after a higher sequence of the same partition is *out of order*; one consumed after it was
declared lost is *late* (lost stays counted: Prometheus counters never go down).

Only records of this run are tracked (the caller filters by instance, stream and run epoch),
so a restart never reports the previous run's records as duplicates or losses.

Memory is bounded: per partition, settled sequences are compacted into a watermark
(``_Stream.contig``), and the windowed samples (``window`` seconds) sit in deques whose length is
capped by ``max_samples``. Percentiles (p50, p99, p99.9) are exact over the window's samples
(``numpy.percentile``, linear interpolation), not estimated from histogram buckets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

QUANTILES = (("p50", 50.0), ("p99", 99.0), ("p99_9", 99.9))
_GIVEN_UP_KEPT = 4096  # sequences remembered after loss, to tell late arrivals from duplicates


class Outcome(Enum):
    RECEIVED = "received"
    OUT_OF_ORDER = "out_of_order"  # received, after a higher sequence
    DUPLICATE = "duplicate"
    LATE = "late"  # received after being counted lost


@dataclass(slots=True)
class _Stream:
    """Sequences of one source partition in this run."""

    contig: int = 0  # every sequence below is settled (received or given up)
    above: set[int] = field(default_factory=set)  # settled sequences >= contig
    pending: dict[int, tuple[float, int]] = field(default_factory=dict)  # acked: (time, broker)
    failed: dict[int, float] = field(default_factory=dict)  # produce failed, not seen
    given_up: OrderedDict[int, None] = field(default_factory=OrderedDict)
    max_seen: int = -1

    def settle(self, seq: int) -> None:
        self.above.add(seq)
        while self.contig in self.above:
            self.above.remove(self.contig)
            self.contig += 1

    def seen(self, seq: int) -> bool:
        return seq < self.contig or seq in self.above

    def give_up(self, seq: int) -> None:
        self.settle(seq)
        self.given_up[seq] = None
        if len(self.given_up) > _GIVEN_UP_KEPT:
            self.given_up.popitem(last=False)


class _Samples:
    """(time, value, broker) samples of the last ``window`` seconds, at most ``cap``."""

    __slots__ = ("items",)

    def __init__(self, cap: int) -> None:
        self.items: deque[tuple[float, float, int]] = deque(maxlen=cap)

    def add(self, t: float, value: float, broker: int) -> None:
        self.items.append((t, value, broker))

    def prune(self, oldest: float) -> None:
        items = self.items
        while items and items[0][0] < oldest:
            items.popleft()


_KINDS = ("acked", "failed", "received", "lost", "duplicated", "out_of_order", "late")


@dataclass(slots=True)
class _Partition:
    stream: _Stream
    produce_latency: _Samples
    e2e_latency: _Samples
    events: dict[str, _Samples]  # kind -> samples (value = count)


def quantiles(values: list[float]) -> dict[str, float | None]:
    """p50, p99, p99.9 of ``values`` (None when there are none)."""
    if not values:
        return {name: None for name, _ in QUANTILES}
    arr = np.asarray(values, dtype=np.float64)
    qs = np.percentile(arr, [q for _, q in QUANTILES])
    return {name: round(float(v), 6) for (name, _), v in zip(QUANTILES, qs, strict=True)}


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 6) if den > 0 else None


class SequenceTracker:
    """Thread-safe: the producer's delivery callbacks, the consumer thread and the collector
    round all call in."""

    def __init__(self, loss_sla: float, window: float, max_samples: int = 100_000) -> None:
        self.loss_sla = loss_sla
        self.window = window
        self.max_samples = max_samples
        self._lock = threading.Lock()
        self._parts: dict[int, _Partition] = {}
        self.leaders: dict[int, int] = {}  # partition -> broker now (set by the probe)

    def _part(self, partition: int) -> _Partition:
        part = self._parts.get(partition)
        if part is None:
            cap = self.max_samples
            part = _Partition(
                _Stream(), _Samples(cap), _Samples(cap), {k: _Samples(cap) for k in _KINDS}
            )
            self._parts[partition] = part
        return part

    # ------------------------------------------------------------------ events

    def acked(self, partition: int, seq: int, broker: int, send_t: float, ack_t: float) -> None:
        with self._lock:
            part = self._part(partition)
            part.produce_latency.add(ack_t, ack_t - send_t, broker)
            part.events["acked"].add(ack_t, 1, broker)
            if not part.stream.seen(seq):  # the consumer may have seen it before the callback
                part.stream.pending[seq] = (ack_t, broker)

    def failed(self, partition: int, seq: int, broker: int, t: float) -> None:
        with self._lock:
            part = self._part(partition)
            part.events["failed"].add(t, 1, broker)
            if not part.stream.seen(seq):
                part.stream.failed[seq] = t

    def received(self, partition: int, seq: int, send_t: float, recv_t: float) -> tuple[
        Outcome, int
    ]:
        """Classify one consumed record of this run; returns the outcome and the broker it is
        attributed to (its leader when it was acknowledged, else the current leader)."""
        with self._lock:
            part = self._part(partition)
            stream = part.stream
            ack = stream.pending.pop(seq, None)
            broker = ack[1] if ack is not None else self.leaders.get(partition, -1)
            if seq in stream.given_up:
                del stream.given_up[seq]
                outcome = Outcome.LATE
                part.events["late"].add(recv_t, 1, broker)
            elif stream.seen(seq):
                part.events["duplicated"].add(recv_t, 1, broker)
                return Outcome.DUPLICATE, broker
            else:
                stream.failed.pop(seq, None)
                stream.settle(seq)
                outcome = Outcome.OUT_OF_ORDER if seq < stream.max_seen else Outcome.RECEIVED
                part.events["received"].add(recv_t, 1, broker)
                if outcome is Outcome.OUT_OF_ORDER:
                    part.events["out_of_order"].add(recv_t, 1, broker)
            stream.max_seen = max(stream.max_seen, seq)
            part.e2e_latency.add(recv_t, recv_t - send_t, broker)
            return outcome, broker

    def expire(self, now: float) -> list[tuple[int, int, int]]:
        """Declare lost every acknowledged record not consumed within ``loss_sla``; forget
        failed sends as old. Returns (partition, broker, count) of new losses."""
        lost: list[tuple[int, int, int]] = []
        deadline = now - self.loss_sla
        with self._lock:
            for partition, part in self._parts.items():
                stream = part.stream
                by_broker: dict[int, int] = {}
                for seq, (ack_t, broker) in list(stream.pending.items()):
                    if ack_t < deadline:
                        del stream.pending[seq]
                        stream.give_up(seq)
                        by_broker[broker] = by_broker.get(broker, 0) + 1
                for seq, t in list(stream.failed.items()):
                    if t < deadline:
                        del stream.failed[seq]
                        stream.give_up(seq)
                for broker, count in by_broker.items():
                    part.events["lost"].add(now, count, broker)
                    lost.append((partition, broker, count))
                oldest = now - self.window
                part.produce_latency.prune(oldest)
                part.e2e_latency.prune(oldest)
                for samples in part.events.values():
                    samples.prune(oldest)
        return lost

    # ------------------------------------------------------------------ views

    def window_stats(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        """Per partition, per broker and overall figures over the window (call ``expire``
        first to prune): counts, availabilities and latency quantiles in seconds."""
        with self._lock:
            rows = [
                (
                    p,
                    [(t, v, b) for t, v, b in part.produce_latency.items],
                    [(t, v, b) for t, v, b in part.e2e_latency.items],
                    {k: list(s.items) for k, s in part.events.items()},
                )
                for p, part in sorted(self._parts.items())
            ]
            leaders = dict(self.leaders)
        partitions = []
        per_broker: dict[int, dict[str, Any]] = {}
        overall = _Acc()
        for p, produce, e2e, events in rows:
            acc = _Acc()
            acc.add(produce, e2e, events)
            overall.add(produce, e2e, events)
            partitions.append({"partition": p, "leader": leaders.get(p, -1), **acc.figures()})
            brokers = {b for _, _, b in produce} | {b for _, _, b in e2e}
            brokers |= {b for samples in events.values() for _, _, b in samples}
            for b in brokers:
                entry = per_broker.setdefault(b, {"acc": _Acc(), "partitions": set()})
                entry["acc"].add(
                    [s for s in produce if s[2] == b], [s for s in e2e if s[2] == b],
                    {k: [s for s in v if s[2] == b] for k, v in events.items()},
                )
                entry["partitions"].add(p)
        brokers_out = [
            {"broker": b, "partitions": sorted(e["partitions"]), **e["acc"].figures()}
            for b, e in sorted(per_broker.items())
        ]
        return partitions, brokers_out, overall.figures()


class _Acc:
    """Accumulates samples of one scope (a partition, a broker, everything)."""

    def __init__(self) -> None:
        self.produce: list[float] = []
        self.e2e: list[float] = []
        self.counts = dict.fromkeys(_KINDS, 0)

    def add(
        self,
        produce: list[tuple[float, float, int]],
        e2e: list[tuple[float, float, int]],
        events: dict[str, list[tuple[float, float, int]]],
    ) -> None:
        self.produce.extend(v for _, v, _ in produce)
        self.e2e.extend(v for _, v, _ in e2e)
        for kind, samples in events.items():
            self.counts[kind] += int(sum(v for _, v, _ in samples))

    def figures(self) -> dict[str, Any]:
        c = self.counts
        return {
            "produce_availability": _ratio(c["acked"], c["acked"] + c["failed"]),
            "consume_availability": _ratio(c["received"], c["received"] + c["lost"]),
            "produce_latency_seconds": quantiles(self.produce),
            "end_to_end_latency_seconds": quantiles(self.e2e),
            "counts": dict(c),
        }

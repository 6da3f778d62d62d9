"""Reading single records at given offsets, for the record-timestamp reader (the exact lag in
seconds) and the failover translation (the records that anchor a group's position).

One consumer, assigned and never joined nor committing, fetches in waves of one offset per
partition (two positions on one partition take two waves) within a deadline. Each position
gets its record or the reason there is none: ``log_end`` (nothing there yet), ``deleted``
(retention removed it), ``compacted`` (the fetch started past it), ``denied``, ``timeout``,
``error``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

_log = logging.getLogger("monitor.collector.record_fetch")

Position = tuple[str, int, int]  # topic, partition, offset
LASTING = frozenset({"no_timestamp", "deleted", "compacted", "denied"})
"""Answers that asking again would not change (cached like a record); ``log_end``,
``timeout`` and ``error`` are asked again."""
_POLL = 0.2

#: Settings for a consumer that reads one record per partition: small fetches, no read-ahead;
#: a deleted offset is reported, not skipped.
ONE_RECORD = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "fetch.max.bytes": 1_048_576,
    "max.partition.fetch.bytes": 65_536,
    "queued.min.messages": 1,
    "queued.max.messages.kbytes": 1024,
}


def fetch_records(
    consumer: Consumer, todo: Sequence[Position], timeout: float,
) -> dict[Position, Message | str]:
    """The record at each position, or why there is none, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    out: dict[Position, Message | str] = {}
    left = list(todo)
    while left and time.monotonic() < deadline:
        wave: dict[tuple[str, int], int] = {}
        rest: list[Position] = []
        for topic, partition, offset in left:
            if (topic, partition) in wave:
                rest.append((topic, partition, offset))
            else:
                wave[(topic, partition)] = offset
        left = rest
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in wave.items()])
        try:
            while wave and time.monotonic() < deadline:
                for m in consumer.consume(len(wave), _POLL):
                    tp = (m.topic() or "", m.partition() or 0)
                    at = wave.get(tp)
                    if at is None:
                        continue
                    result = _at(m, at)
                    if result is not None:
                        out[(tp[0], tp[1], at)] = result
                        del wave[tp]
        finally:
            consumer.unassign()
        for (t, p), o in wave.items():
            out[(t, p, o)] = "timeout"
    for position in left:
        out[position] = "timeout"
    return out


def _at(m: Message, offset: int) -> Message | str | None:
    """The message if it is the one at ``offset``, the reason there is none, or None: not
    this partition's answer yet (an older record of an earlier fetch)."""
    err = m.error()
    if err is not None:
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return "log_end"
        if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            return "deleted"
        if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    KafkaError.GROUP_AUTHORIZATION_FAILED):
            return "denied"
        _log.warning("record fetch failed", extra={"topic": m.topic(), "error": str(err)})
        return "error"
    at = m.offset()
    if at is None or at < offset:
        return None
    if at > offset:
        return "compacted"
    return m

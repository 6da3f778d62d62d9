"""The canary's record format and sequence tracking, as pure functions (no Kafka: the
real-broker behaviour is in ``test_canary_kafka.py`` and ``test_mirror_kafka.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.ingest.canary.record import HEADER_SIZE, CanaryRecord, decode, encode
from monitor.ingest.canary.tracker import Outcome, SequenceTracker, quantiles


@given(
    st.text(min_size=1, max_size=60), st.text(max_size=60), st.integers(0, 2**31 - 1),
    st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**62),
    st.integers(0, 300),
)
def test_records_round_trip_at_any_size(
    instance: str, stream: str, partition: int, seq: int, epoch: int, send_ns: int, size: int
) -> None:
    record = CanaryRecord(instance, epoch, stream, partition, seq, send_ns)
    raw = encode(record, size)
    assert len(raw) >= max(size, HEADER_SIZE)
    assert decode(raw) == record


@pytest.mark.parametrize("raw", [None, b"", b"KM", b"xx" + bytes(60), b"KM\x02" + bytes(60)])
def test_foreign_bytes_are_not_records(raw: bytes | None) -> None:
    assert decode(raw) is None


def test_truncated_record_is_not_a_record() -> None:
    raw = encode(CanaryRecord("instance-a", 1, "cluster/x", 0, 1, 2))
    assert decode(raw[:-3]) is None


def feed(t: SequenceTracker, partition: int, seqs: range, at: float, broker: int = 7) -> None:
    for seq in seqs:
        t.acked(partition, seq, broker, at, at + 0.01)


def test_in_order_delivery_counts_everything_received() -> None:
    t = SequenceTracker(loss_sla=5, window=60)
    feed(t, 0, range(10), 100.0)
    outcomes = [t.received(0, s, 100.0, 100.05)[0] for s in range(10)]
    assert outcomes == [Outcome.RECEIVED] * 10
    assert t.expire(120.0) == []
    parts, brokers, overall = t.window_stats()
    assert overall["counts"]["received"] == 10 and overall["counts"]["lost"] == 0
    assert overall["produce_availability"] == 1.0 and overall["consume_availability"] == 1.0
    assert brokers[0]["broker"] == 7 and brokers[0]["partitions"] == [0]


def test_gap_not_filled_within_sla_is_lost_and_a_later_arrival_is_late() -> None:
    t = SequenceTracker(loss_sla=5, window=60)
    feed(t, 0, range(5), 100.0)
    for s in (0, 1, 3, 4):
        t.received(0, s, 100.0, 100.1)
    assert t.expire(104.0) == []  # within the SLA: not lost yet
    assert t.expire(106.0) == [(0, 7, 1)]
    assert t.expire(107.0) == []  # counted once
    assert t.received(0, 2, 100.0, 108.0)[0] is Outcome.LATE
    assert t.received(0, 2, 100.0, 108.5)[0] is Outcome.DUPLICATE


def test_missing_tail_is_lost_too() -> None:
    """No higher sequence ever arrives: gap detection alone would never see this loss."""
    t = SequenceTracker(loss_sla=2, window=60)
    feed(t, 3, range(3), 100.0)
    t.received(3, 0, 100.0, 100.1)
    assert t.expire(103.0) == [(3, 7, 2)]


def test_duplicates_and_out_of_order() -> None:
    t = SequenceTracker(loss_sla=5, window=60)
    feed(t, 0, range(4), 100.0)
    got = [t.received(0, s, 100.0, 100.2)[0] for s in (0, 2, 1, 2, 0, 3)]
    assert got == [Outcome.RECEIVED, Outcome.RECEIVED, Outcome.OUT_OF_ORDER,
                   Outcome.DUPLICATE, Outcome.DUPLICATE, Outcome.RECEIVED]
    assert t.expire(120.0) == []
    _, _, overall = t.window_stats()
    counts = overall["counts"]
    assert (counts["duplicated"], counts["out_of_order"], counts["received"]) == (2, 1, 4)


def test_failed_sends_are_not_losses_and_lower_produce_availability() -> None:
    t = SequenceTracker(loss_sla=1, window=60)
    feed(t, 0, range(3), 100.0)
    t.failed(0, 3, 7, 100.5)
    for s in range(3):
        t.received(0, s, 100.0, 100.1)
    assert t.expire(110.0) == []
    _, _, overall = t.window_stats()
    assert overall["produce_availability"] == pytest.approx(0.75)


def test_record_consumed_before_its_acknowledgement_is_not_lost() -> None:
    t = SequenceTracker(loss_sla=1, window=60)
    assert t.received(0, 0, 100.0, 100.01)[0] is Outcome.RECEIVED
    t.acked(0, 0, 7, 100.0, 100.02)
    assert t.expire(200.0) == []


def test_windows_forget_old_samples_and_state_stays_bounded() -> None:
    t = SequenceTracker(loss_sla=1, window=10)
    for i in range(10_000):
        t.acked(0, i, 1, float(i), i + 0.001)
        t.received(0, i, float(i), i + 0.002)
    t.expire(10_000.0)
    parts, _, _ = t.window_stats()
    assert parts[0]["counts"]["received"] == 10  # only the last 10 s
    stream = t._parts[0].stream
    assert stream.contig == 10_000 and not stream.above and not stream.pending


def test_quantiles_match_numpy() -> None:
    values = list(np.random.default_rng(1).exponential(0.01, 5000))
    q = quantiles(values)
    assert q["p50"] == pytest.approx(float(np.percentile(values, 50)), abs=1e-6)
    assert q["p99_9"] == pytest.approx(float(np.percentile(values, 99.9)), abs=1e-6)
    assert quantiles([]) == {"p50": None, "p99": None, "p99_9": None}

"""Robustness of the ``__consumer_offsets`` decoder: whatever the bytes, it never raises, every
record is accounted for exactly once, and the fast path agrees with the slow path.

Inputs are random bytes and valid records (from the schema-based encoder of the decoder tests)
that are truncated, bit-flipped, have length fields overwritten, or carry trailing garbage.
"""

from __future__ import annotations

import dataclasses
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.ingest.consumer_offsets import (
    SKIP_REASONS,
    ConsumerOffsetsDecoder,
    DecodedBatch,
    OffsetCommit,
    Skipped,
    decode_compact_string,
    decode_consumer_assignment,
    decode_group_member,
    decode_group_metadata_header,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_key,
    decode_offset_commit_value,
    decode_record,
    decode_string,
)
from tests.harness.offsets_records import (
    Member,
    cg_current_value,
    cg_member_value,
    cg_metadata_value,
    cg_target_value,
    commit_key,
    consumer_assignment,
    group_key,
    group_value,
    i16,
    kip848_key,
    offset_value,
)

TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"


def _members(version: int) -> list[Member]:
    return [
        Member("member-1", "client-1", "/10.0.0.1", 10_000, b"\x00\x01sub",
               consumer_assignment(1, {"orders": [0, 1, 2], "payments": [7]}, b"ud"),
               group_instance_id="static-1" if version >= 3 else None, rebalance_timeout=30_000),
        Member("member-2", "client-2", "/10.0.0.2", 10_000, b"",
               consumer_assignment(0, {"orders": [3]}, None)),
    ]  # fmt: skip


VALID: list[tuple[bytes, bytes | None]] = [
    *((commit_key("group-a", "orders", 3, kt), offset_value(v, 42, "meta", 1_700_000_000_000,
       expire_ts=1_800_000_000_000, leader_epoch=5, topic_id=TOPIC_ID if v == 4 else None))
      for v in range(5) for kt in (0, 1)),
    (commit_key("group-a", "orders", 3), offset_value(4, 43, "", 1, extra_tags={9: b"xyz"})),
    (commit_key("group-a", "orders", 3), None),
    *((group_key("group-a"), group_value(v, "consumer", 7, "range", "member-1", 123,
       _members(v))) for v in range(5)),
    (group_key("group-a"), group_value(2, "connect", 1, None, None, -1, _members(2))),
    (group_key("group-a"), None),
    (kip848_key(3, "group-b"), cg_metadata_value(12, 0x1234)),
    (kip848_key(5, "group-b", "m-1"), cg_member_value("i", None, "c", "h", ["orders", "x"],
     None, 45_000, "uniform", (10_000, [("range", b"\x00\x01")]))),
    (kip848_key(7, "group-b", "m-1"), cg_target_value({TOPIC_ID: [0, 1, 2]})),
    (kip848_key(8, "group-b", "m-1"), cg_current_value(12, 11, 0, {TOPIC_ID: [0, 1]},
     {TOPIC_ID: [2]}, {TOPIC_ID: [12, 12]})),
    (kip848_key(8, "group-b", "m-1"), None),
    (i16(15) + b"\x00\x01s", b"\x00\x00whatever"),
]  # fmt: skip


def check(b: DecodedBatch, n: int) -> None:
    """Every record is a commit, an event or a skip, and no skip is a decoder bug."""
    assert b.total == n
    assert b.commit_count + len(b.events) + b.skipped_total == n
    assert "internal_error" not in b.skipped, b.skip_samples
    assert set(b.skipped) <= set(SKIP_REASONS)
    assert sum(b.record_types.values()) <= n
    lengths = {
        len(c)
        for c in (
            b.commit_keys,
            b.commit_offsets,
            b.commit_timestamps,
            b.commit_orders,
            b.commit_source_partitions,
        )
    }
    assert lengths == {b.commit_count}
    indexes = [e.commit_index for e in b.events]
    assert indexes == sorted(indexes) and all(0 <= i <= b.commit_count for i in indexes)


def outcome(result: object) -> object:
    """A comparable summary of a single-record result."""
    if isinstance(result, Skipped):
        return ("skip", result.reason)
    if isinstance(result, OffsetCommit):
        return ("commit", result.key, result.value.offset, result.value.commit_timestamp)
    return ("event", dataclasses.replace(result, commit_index=0))  # type: ignore[type-var]


def run_both_paths(records: list[tuple[object, object]]) -> None:
    """Batch twice through one decoder (cold, then warm caches) and compare with the
    single-record decoder, record by record."""
    keys = [k for k, _ in records]
    values = [v for _, v in records]
    orders = list(range(len(records)))
    singles = [
        outcome(decode_record(k, v, 0, o)) for (k, v), o in zip(records, orders, strict=True)
    ]  # type: ignore[arg-type]
    decoder = ConsumerOffsetsDecoder()
    for _ in range(2):
        b = decoder.decode_batch(keys, values, 0, orders)  # type: ignore[arg-type]
        check(b, len(records))
        commits = [("commit", k, o, t) for k, o, t, _, _ in b.iter_commits()]
        assert commits == [s for s in singles if s[0] == "commit"]  # type: ignore[index]
        events = [("event", dataclasses.replace(e, commit_index=0)) for e in b.events]
        assert events == [s for s in singles if s[0] == "event"]  # type: ignore[index]
        skipped: dict[str, int] = {}
        for s in singles:
            if s[0] == "skip":  # type: ignore[index]
                skipped[s[1]] = skipped.get(s[1], 0) + 1  # type: ignore[index]
        assert b.skipped == skipped


def test_valid_records_decode() -> None:
    b = ConsumerOffsetsDecoder().decode_batch(
        [k for k, _ in VALID], [v for _, v in VALID], 0, list(range(len(VALID)))
    )
    check(b, len(VALID))
    assert b.skipped == {"ignored_record_type": 1}
    assert b.commit_count == 11


def test_every_truncation_and_byte_replacement() -> None:
    """Exhaustive over small corruptions of every valid record: keys and values alike."""
    corrupted: list[tuple[object, object]] = []
    for key, value in VALID:
        for target in ("key", "value"):
            data = key if target == "key" else value
            if data is None:
                continue
            variants = [data[:i] for i in range(len(data))]
            for i in range(len(data)):
                variants += [
                    data[:i] + bytes([b]) + data[i + 1 :] for b in (0x00, 0x7F, 0x80, 0xFF)
                ]
            variants.append(data + b"\x00")
            for v in variants:
                corrupted.append((v, value) if target == "key" else (key, v))
    run_both_paths(corrupted)


nasty_ints = st.sampled_from([-(2**31), -2, -1, 0, 1, 2, 0x7F, 0x80, 0x7FFF, 2**31 - 1])


@st.composite
def mutated(draw: st.DrawFn) -> tuple[object, object]:
    key, value = draw(st.sampled_from(VALID))
    target = draw(st.sampled_from(["key", "value", "value", "value"]))
    data = bytearray(key if target == "key" or value is None else value)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "truncate", "length16", "length32", "varint", "append"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[pos:]
        elif op == "length16":  # overwrite what may be a string length
            data[pos : pos + 2] = struct.pack(">h", max(-(2**15), min(2**15 - 1, draw(nasty_ints))))
        elif op == "length32":  # ... or an array count / bytes length
            data[pos : pos + 4] = struct.pack(">i", draw(nasty_ints))
        elif op == "varint":  # ... or a compact length / tag count
            data[pos : pos + 1] = draw(
                st.sampled_from([b"\x00", b"\x7f", b"\xff\xff\xff\xff\xff\x0f", b"\x80", b"\xff"])
            )
        else:
            data += draw(st.binary(min_size=1, max_size=8))
    if target == "key" or value is None:
        return bytes(data), value
    return key, bytes(data)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated(), min_size=1, max_size=20))
def test_mutated_records(records: list[tuple[object, object]]) -> None:
    run_both_paths(records)


byte_or_none = st.none() | st.binary(max_size=64)


@settings(max_examples=300)
@given(st.lists(st.tuples(byte_or_none, byte_or_none), min_size=1, max_size=30))
def test_random_bytes(records: list[tuple[object, object]]) -> None:
    run_both_paths(records)


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([i16(t) for t in range(-1, 26)]).flatmap(
                lambda p: st.binary(max_size=40).map(lambda b: p + b)
            ),
            st.sampled_from([i16(v) for v in range(-1, 6)]).flatmap(
                lambda p: st.binary(max_size=60).map(lambda b: p + b)
            ),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_random_bodies_behind_real_prefixes(records: list[tuple[object, object]]) -> None:
    """Random bytes behind every record type and value version reach the deep decoders."""
    run_both_paths(records)


@settings(max_examples=300)
@given(st.binary(max_size=80), st.integers(-2, 6))
def test_fragment_entry_points_never_raise(data: bytes, version: int) -> None:
    results = [
        decode_string(data),
        decode_compact_string(data),
        decode_key(data),
        decode_offset_commit_key(data),
        decode_offset_commit_value(data),
        decode_offset_commit_value(data, version),
        decode_group_metadata_value(data),
        decode_group_metadata_value(data, version),
        decode_group_metadata_header(data, version),
        decode_group_member(data, version),
        decode_consumer_assignment(data),
        decode_consumer_assignment(data, version),
    ]
    for r in results:
        assert not (isinstance(r, Skipped) and r.reason == "internal_error"), r

"""Tests of the ``__consumer_offsets`` decoder: Burrow's 69 vectors, round trips, batch API.

The encoder (tests/harness/offsets_records.py) is written from Kafka's schemas
(reference/kafka-coordinator-schemas), not from the decoder, so a round trip checks the decoder
against an independent reading of them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.ingest.consumer_offsets import (
    SKIP_REASONS,
    CommitKey,
    ConsumerAssignment,
    ConsumerGroupCurrentAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupRecordTombstone,
    ConsumerGroupTargetAssignment,
    ConsumerOffsetsDecoder,
    DecodedBatch,
    GroupMember,
    GroupMetadata,
    GroupMetadataHeader,
    GroupMetadataValue,
    GroupTombstone,
    OffsetCommit,
    OffsetCommitValue,
    OffsetTombstone,
    PartitionOwner,
    Skipped,
    SkipReason,
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
    array,
    blob,
    cg_current_value,
    cg_member_value,
    cg_metadata_value,
    cg_target_value,
    commit_key,
    consumer_assignment,
    group_key,
    group_value,
    i16,
    i32,
    i64,
    kip848_key,
    offset_value,
    string,
    tags,
    uuid_str,
    uvarint,
)
from tests.harness.reference import REFERENCE_DIR


def batch_of(
    records: list[tuple[bytes | None, bytes | None]], decoder: ConsumerOffsetsDecoder | None = None
) -> DecodedBatch:
    d = decoder or ConsumerOffsetsDecoder()
    keys = [k for k, _ in records]
    values = [v for _, v in records]
    return d.decode_batch(keys, values, [7] * len(records), list(range(1000, 1000 + len(records))))


def assert_counts_add_up(b: DecodedBatch) -> None:
    assert b.commit_count + len(b.events) + b.skipped_total == b.total
    assert b.decoded + b.skipped_total == b.total
    cols = (b.commit_keys, b.commit_timestamps, b.commit_orders, b.commit_source_partitions)
    assert all(len(c) == b.commit_count for c in cols)


# --- Burrow's vectors ---------------------------------------------------------------------

VECTORS_FILE = REFERENCE_DIR / "burrow-offsets-topic-vectors.json"
VECTORS: dict[str, dict[str, Any]] = (
    {v["name"]: v for v in json.loads(VECTORS_FILE.read_text())} if VECTORS_FILE.exists() else {}
)


def test_vector_file_is_present_and_complete() -> None:
    """Fails (rather than silently skipping 69 checks) when the reference data is missing."""
    assert VECTORS, f"{VECTORS_FILE} not found: set KAFKA_MONITOR_REFERENCE_DIR"
    assert len(VECTORS) == 69
    assert set(VECTORS) == set(OUTCOMES), "every vector needs a decided outcome below"


# Our outcome for every vector: "ok" (decodes to `expected`, or `kafka_schema_decode` where
# present), ("ok_schema", ...) where we follow the schema against Burrow, or (reason, field)
# for a skip. Field paths are ours (schema field names); for whole records they are prefixed
# with "key." / "value.". Differences from Burrow are commented.
T, TB, NUL = SkipReason.TRUNCATED, SkipReason.TRAILING_BYTES, SkipReason.INVALID_NULL
IA = SkipReason.INVALID_ASSIGNMENT
OUTCOMES: dict[str, Any] = {
    "readString": "ok",
    "readString_Underflow": (T, "string"),
    "readCompactString": "ok",
    "readCompactString_Empty": "ok",
    "readCompactString_Null": "null",  # schema: compact length 0 is null -> None (Burrow: "")
    "readCompactString_Underflow": (T, "string"),
    "group_metadata_value_header_v0_v1": "ok",
    "group_metadata_value_v2_whole": "ok",
    "group_metadata_value_v3_whole": "ok",
    "group_metadata_value_header_error_0_protocol_type": (T, "protocolType"),
    "group_metadata_value_header_error_1_generation": (T, "generation"),
    "group_metadata_value_header_error_2_protocol": (T, "protocol"),
    "group_metadata_value_header_error_3_leader": (T, "leader"),
    "group_member_v1": "ok",
    "group_member_v3": "ok",
    "group_member_v1_error_0_member_id": (T, "memberId"),
    "group_member_v1_error_1_client_id": (T, "clientId"),
    "group_member_v1_error_2_client_host": (T, "clientHost"),
    "group_member_v1_error_3_rebalance_timeout": (T, "rebalanceTimeout"),
    "group_member_v1_error_4_session_timeout": (T, "sessionTimeout"),
    "group_member_v1_error_5_subscription_bytes": (T, "subscription"),
    "group_member_v1_error_6_assignment_bytes": (T, "assignment"),
    "group_member_v1_error_7_consumer_protocol_version": (IA, "assignment.version"),
    "group_member_v1_error_8_assignment": (IA, "assignment.assignedPartitions[0].partitions"),
    "member_assignment_v0_body": "ok",
    "member_assignment_v0_error_0_assignment_topic_count": (T, "assignedPartitions"),
    "member_assignment_v0_error_1_topic_name": (T, "assignedPartitions[0].topic"),
    "member_assignment_v0_error_2_assignment_partition_count": (
        T,
        "assignedPartitions[0].partitions",
    ),
    "member_assignment_v0_error_3_assignment_partition_id": (
        T,
        "assignedPartitions[0].partitions",
    ),
    "offset_commit_key_body": "ok",
    "offset_commit_key_body_error_0_group": (T, "group"),
    "offset_commit_key_body_error_1_topic": (T, "topic"),
    "offset_commit_key_body_error_2_partition": (T, "partition"),
    "offset_commit_value_v0_body": "ok",
    "offset_commit_value_v0_body_error_0_offset": (T, "offset"),
    "offset_commit_value_v0_body_error_1_metadata": (T, "metadata"),
    "offset_commit_value_v0_body_error_2_timestamp": (T, "commitTimestamp"),
    "offset_commit_value_v3_body": "ok",
    "offset_commit_value_v3_body_error_0_offset": (T, "offset"),
    "offset_commit_value_v3_body_error_1_leaderEpoch": (T, "leaderEpoch"),
    "offset_commit_value_v3_body_error_2_metadata": (T, "metadata"),
    "offset_commit_value_v3_body_error_3_timestamp": (T, "commitTimestamp"),
    # Schema: v4 is flexible and ends with a tagged-field count that this vector lacks.
    "offset_commit_value_v4_body": (T, "taggedFields"),
    "offset_commit_value_v4_body_error_0_offset": (T, "offset"),
    "offset_commit_value_v4_body_error_1_leaderEpoch": (T, "leaderEpoch"),
    "offset_commit_value_v4_body_error_2_metadata": (T, "metadata"),
    "offset_commit_value_v4_body_error_3_metadata": (T, "metadata"),
    "offset_commit_value_v4_body_error_4_timestamp": (T, "commitTimestamp"),
    "key_body_and_offset_value_v0": "ok",
    "key_body_and_offset_value_v4": (T, "value.taggedFields"),  # as offset_commit_value_v4_body
    "key_body_and_offset_value_error_0": (T, "key.topic"),
    "key_body_and_offset_value_error_1": (T, "value.version"),
    "key_body_and_offset_value_error_2": "ok_schema",  # v2 is valid in the schema; Burrow drops it
    "key_body_and_offset_value_v0_group_not_allowlisted": "ok",  # allowlists are not decoding
    "offset_commit_value_v0_body_error_metadata_length": (T, "metadata"),
    "group_key_body_and_group_metadata_value_v1": "ok",
    "group_key_body_and_group_metadata_value_error_0": (T, "key.group"),
    "group_key_body_and_group_metadata_value_error_1": (T, "value.version"),
    # Burrow skips protocol type "testtype" before the members; we decode them, and the member
    # count (0x73746d65, read from misaligned bytes) cannot fit in the remaining 74 bytes.
    "group_key_body_and_group_metadata_value_error_2": (T, "value.members"),
    "group_key_body_and_group_metadata_value_error_3": (T, "value.protocolType"),
    "group_key_body_and_group_metadata_value_error_4": (T, "value.members"),  # Burrow: skip
    "group_metadata_value_v1_body_error_0": (T, "protocolType"),
    "group_metadata_value_v1_body_error_1": (T, "members"),  # Burrow: skip (protocol type)
    "group_metadata_value_v1_body_error_2": (T, "members[0].clientHost"),  # Burrow: skip
    "message_group_metadata_key2_value_v1": "ok",
    "message_group_metadata_key2_value_v1_bad_protocol_type_length": (T, "value.leader"),
    "message_offset_commit_key1_value_v0": "ok",
    "message_error_0": (T, "key.type"),
    # apiKey 3 is ConsumerGroupMetadataKey (GroupId only): the offset-key-shaped body leaves
    # 15 bytes after GroupId. Burrow: "unsupported key version 3".
    "message_error_1": (TB, "key.groupId"),
}


def commit_dict(v: OffsetCommitValue) -> dict[str, Any]:
    d: dict[str, Any] = {"offset": v.offset, "metadata": v.metadata}
    if v.version >= 3:
        d["leaderEpoch"] = v.leader_epoch
    d["commitTimestamp"] = v.commit_timestamp
    return d


def assignment_dict(a: ConsumerAssignment) -> dict[str, Any]:
    return {
        "version": a.version,
        "assignedPartitions": {t: list(ps) for t, ps in a.partitions.items()},
        "userDataHex": (a.user_data or b"").hex(),
    }


def member_dict(m: GroupMember, version: int) -> dict[str, Any]:
    d: dict[str, Any] = {"memberId": m.member_id}
    if version >= 3:
        d["groupInstanceId"] = m.group_instance_id
    d.update(clientId=m.client_id, clientHost=m.client_host)
    if version >= 1:
        d["rebalanceTimeout"] = m.rebalance_timeout
    d.update(
        sessionTimeout=m.session_timeout,
        subscriptionHex=m.subscription.hex(),
        assignmentHex=m.assignment_bytes.hex(),
    )
    if m.assignment is not None:
        d["assignment"] = assignment_dict(m.assignment)
    return d


def header_dict(h: GroupMetadataHeader | GroupMetadataValue, version: int) -> dict[str, Any]:
    d: dict[str, Any] = {
        "protocolType": h.protocol_type,
        "generation": h.generation,
        "protocol": h.protocol,
        "leader": h.leader,
    }
    if version >= 2:
        d["currentStateTimestamp"] = h.current_state_timestamp
    return d


def group_dict(g: GroupMetadataValue) -> dict[str, Any]:
    d = header_dict(g, g.version)
    d["members"] = [member_dict(m, g.version) for m in g.members]
    return d


def value_bytes(vec: dict[str, Any]) -> bytes:
    return bytes.fromhex(vec["value_hex"])


def key_bytes(vec: dict[str, Any]) -> bytes:
    return bytes.fromhex(vec["key_hex"])


TEST_COMMIT_KEY = {"group": "testgroup", "topic": "testtopic", "partition": 11}
TEST_V1_VALUE = {"offset": 5, "metadata": "", "commitTimestamp": 0}


def whole_records(vec: dict[str, Any]) -> list[tuple[bytes, bytes | None, dict[str, Any]]]:
    """The vector as complete __consumer_offsets records, adding the int16 prefixes it lacks
    (offset-commit key bodies get both key types 0 and 1, same layout) and the key or value
    it lacks; with each, the {"key", "value"} a successful decode must give."""
    fn = vec["burrow_function"]
    value = bytes.fromhex(vec["value_hex"]) if vec["value_hex"] else None
    want = expected_of(vec)
    if vec["what"] == "full-message":
        if vec["key_has_version_prefix"]:
            if want:
                want = {**want, "key": {k: v for k, v in want["key"].items() if k != "recordType"}}
            return [(key_bytes(vec), value, want)]
        types = [2] if fn.startswith("decodeGroupMetadata") else [0, 1]
        return [(i16(t) + key_bytes(vec), value, want) for t in types]
    if vec["what"] == "offset-value":
        value = i16(vec["value_version"]) + value_bytes(vec)
        want = {"key": TEST_COMMIT_KEY, "value": want}
        return [(commit_key("testgroup", "testtopic", 11, t), value, want) for t in (0, 1)]
    if vec["what"] == "key":
        want = {"key": want, "value": TEST_V1_VALUE}
        return [(i16(t) + key_bytes(vec), offset_value(1, 5), want) for t in (0, 1)]
    if fn.startswith("decodeAndSendGroupMetadata") or fn.startswith("decodeMetadataValueHeaderV2"):
        prefix = b"" if vec["value_has_version_prefix"] else i16(vec["value_version"])
        want = {"key": {"group": "testgroup"}, "value": want}
        return [(group_key("testgroup"), prefix + value_bytes(vec), want)]
    return []  # fragments that are not a whole value (a header, a member, an assignment)


def fragment_result(vec: dict[str, Any]) -> list[Any]:
    """Run the sub-decoder entry point(s) matching the vector's ``burrow_function``."""
    fn = vec["burrow_function"]
    data = value_bytes(vec) if vec["value_hex"] else key_bytes(vec)
    if fn == "readString":
        return [decode_string(data)]
    if fn == "readCompactString":
        return [decode_compact_string(data)]
    if fn == "decodeMetadataValueHeader":
        return [decode_group_metadata_header(data, v) for v in (0, 1)]
    if fn.startswith("decodeMetadataValueHeaderV2"):
        return [decode_group_metadata_value(data)]
    if fn.startswith("decodeMetadataMember("):
        return [decode_group_member(data, int(fn[-2]))]
    if fn == "decodeMemberAssignmentV0":
        return [decode_consumer_assignment(data, version=0)]
    if fn == "decodeOffsetKeyV0":
        return [decode_offset_commit_key(data)] + [decode_key(i16(t) + data) for t in (0, 1)]
    if fn.startswith("decodeOffsetValueV") or fn.startswith("decodeAndSendOffset"):
        return [decode_offset_commit_value(data, vec["value_version"])]
    if fn.startswith("decodeAndSendGroupMetadata"):
        return [decode_group_metadata_value(data, vec["value_version"])]
    return []  # full messages: checked through whole_records


def expected_of(vec: dict[str, Any]) -> Any:
    """What a successful decode must equal, in the vector's field names ({} if it fails)."""
    schema = vec.get("kafka_schema_decode")
    if schema:
        return schema["result"] if schema["ok"] else {}
    return vec.get("expected", {})


def as_dict(result: Any, vec: dict[str, Any]) -> Any:
    """Our typed result in the vector's shape, for comparison with ``expected``."""
    if isinstance(result, str) or result is None:
        return {"string": result}
    if isinstance(result, CommitKey):
        return {"group": result.group, "topic": result.topic, "partition": result.partition}
    if isinstance(result, OffsetCommitValue):
        return commit_dict(result)
    if isinstance(result, GroupMetadataHeader):
        return header_dict(result, 0)
    if isinstance(result, GroupMetadataValue):
        return group_dict(result)
    if isinstance(result, GroupMember):
        return member_dict(result, int(vec["burrow_function"][-2]))
    if isinstance(result, ConsumerAssignment):
        d = assignment_dict(result)
        del d["version"]  # these vectors are the body after the version
        return d
    raise AssertionError(f"unexpected result {result!r}")


def record_dict(result: Any) -> dict[str, Any]:
    if isinstance(result, OffsetCommit):
        key = {"group": result.key.group, "topic": result.key.topic}
        key["partition"] = result.key.partition
        return {"key": key, "value": commit_dict(result.value)}
    assert isinstance(result, GroupMetadata), result
    return {"key": {"group": result.group}, "value": group_dict(result.value)}


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_burrow_vector(name: str) -> None:
    """Every vector through its fragment entry point and, as a whole record, decode_batch."""
    vec = VECTORS.get(name)
    if vec is None:
        pytest.fail(f"vector {name} missing from {VECTORS_FILE}")
    outcome = OUTCOMES[name]
    fragments = fragment_result(vec)
    records = whole_records(vec)
    assert fragments or records, "every vector must reach at least one decoder entry point"

    for result in fragments:
        if outcome in ("ok", "ok_schema"):
            assert not isinstance(result, Skipped), result
            assert as_dict(result, vec) == expected_of(vec)
        elif outcome == "null":
            assert result is None
        else:
            assert result == Skipped(outcome[0], outcome[1], result.detail)

    for key, value, want in records:
        result = decode_record(key, value, partition=3, offset=8232)
        b = batch_of([(key, value)])
        assert_counts_add_up(b)
        assert b.skipped.get(SkipReason.INTERNAL_ERROR) is None
        if outcome in ("ok", "ok_schema"):
            assert record_dict(result) == {"key": want["key"], "value": want["value"]}
            assert b.decoded == 1 and b.skipped_total == 0
            if isinstance(result, OffsetCommit):
                assert (result.order, result.source_partition) == (8232, 3)
                assert list(b.iter_commits()) == [
                    (result.key, result.value.offset, result.value.commit_timestamp, 1000, 7)
                ]
            else:
                assert b.events == [dataclasses.replace(result, order=1000, source_partition=7)]
        else:
            reason, field = outcome
            if not field.startswith(("key.", "value.")):
                field = ("key." if vec["what"] == "key" else "value.") + field
            assert result == Skipped(reason, field, result.detail)
            assert b.skipped == {reason: 1} and b.decoded == 0
            sample = b.skip_samples[reason]
            assert (sample.field, sample.order, sample.source_partition) == (field, 1000, 7)


def test_v4_vector_decodes_once_it_has_its_tagged_field_section() -> None:
    """Appending the 00 tagged-field count Burrow's v4 vector lacks gives Burrow's values."""
    vec = VECTORS["offset_commit_value_v4_body"]
    result = decode_offset_commit_value(value_bytes(vec) + b"\x00", 4)
    assert isinstance(result, OffsetCommitValue)
    assert commit_dict(result) == vec["expected"]
    full = VECTORS["key_body_and_offset_value_v4"]
    record = decode_record(i16(1) + key_bytes(full), value_bytes(full) + b"\x00")
    assert isinstance(record, OffsetCommit)
    assert record_dict(record) == full["expected"] | {"key": full["expected"]["key"]}


def test_burrow_header_agrees_where_burrow_skips_on_protocol_type() -> None:
    """Where Burrow skips a non-consumer group, its header decode matches ours."""
    for name in (
        "group_key_body_and_group_metadata_value_error_2",
        "group_key_body_and_group_metadata_value_error_4",
        "group_metadata_value_v1_body_error_1",
        "group_metadata_value_v1_body_error_2",
    ):
        vec = VECTORS[name]
        data = value_bytes(vec)
        version = vec["value_version"]
        if vec["value_has_version_prefix"]:
            data = data[2:]
        header = decode_group_metadata_header(data, version)
        assert isinstance(header, GroupMetadataHeader)
        assert header_dict(header, version) == vec["expected"]["value_header"]


def test_burrow_owner_requests_match_partition_owners() -> None:
    """Owners from decoded assignments equal Burrow's StorageSetConsumerOwner requests."""
    for name in ("message_group_metadata_key2_value_v1", "group_metadata_value_v2_whole"):
        vec = VECTORS[name]
        requests = (
            vec.get("burrow_storage_requests")
            or vec["burrow_outcome_if_fed_to_decodeAndSendGroupMetadata"]["storage_requests"]
        )
        key, value, _ = whole_records(vec)[0]
        event = decode_record(key, value)
        assert isinstance(event, GroupMetadata)
        owners = [
            (o.topic, o.partition, o.client_host, o.client_id) for o in event.partition_owners()
        ]
        assert owners == [(r["Topic"], r["Partition"], r["Owner"], r["ClientID"]) for r in requests]


def test_burrow_offset_request_matches_commit_columns() -> None:
    vec = VECTORS["message_offset_commit_key1_value_v0"]
    (req,) = vec["burrow_storage_requests"]
    d = ConsumerOffsetsDecoder()
    b = d.decode_batch([key_bytes(vec)], [value_bytes(vec)], 0, [req["Order"]])
    assert list(b.iter_commits()) == [
        (
            CommitKey(req["Group"], req["Topic"], req["Partition"]),
            req["Offset"],
            req["Timestamp"],
            req["Order"],
            0,
        )
    ]


# --- round trips through the encoder, every key and value version ---------------------------

names = st.text(min_size=0, max_size=12)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)
topic_ids = st.binary(min_size=16, max_size=16).map(uuid_str)
part_lists = st.lists(st.integers(0, 2**31 - 1), max_size=5)


@given(
    key_type=st.sampled_from([0, 1]),
    version=st.integers(0, 4),
    group=names,
    topic=names,
    partition=ints32,
    offset=ints64,
    metadata=st.text(max_size=200),
    commit_ts=ints64,
    expire_ts=ints64,
    leader_epoch=ints32,
    topic_id=st.none() | topic_ids,
    unknown_tag=st.none() | st.tuples(st.integers(1, 2**20), st.binary(max_size=20)),
)
def test_offset_commit_round_trip(
    key_type: int,
    version: int,
    group: str,
    topic: str,
    partition: int,
    offset: int,
    metadata: str,
    commit_ts: int,
    expire_ts: int,
    leader_epoch: int,
    topic_id: str | None,
    unknown_tag: tuple[int, bytes] | None,
) -> None:
    key = commit_key(group, topic, partition, key_type)
    value = offset_value(
        version,
        offset,
        metadata,
        commit_ts,
        expire_ts=expire_ts,
        leader_epoch=leader_epoch,
        topic_id=topic_id,
        extra_tags=dict([unknown_tag]) if unknown_tag else None,
    )
    want = OffsetCommitValue(
        version,
        offset,
        leader_epoch if version >= 3 else None,
        metadata,
        commit_ts,
        expire_ts if version == 1 else None,
        topic_id if version >= 4 else None,
    )
    assert decode_record(key, value, 4, 99) == OffsetCommit(
        CommitKey(group, topic, partition), want, 99, 4
    )
    # Twice through one decoder: the second pass takes the fast path (cached key and layout).
    d = ConsumerOffsetsDecoder()
    first, second = batch_of([(key, value)], d), batch_of([(key, value)], d)
    for b in (first, second):
        assert list(b.iter_commits()) == [
            (CommitKey(group, topic, partition), offset, commit_ts, 1000, 7)
        ]
        assert b.record_types == {"offset_commit": 1}


def members_strategy(version: int) -> st.SearchStrategy[list[Member]]:
    assignment = st.builds(
        consumer_assignment,
        st.integers(0, 3),
        st.dictionaries(names, part_lists, max_size=3),
        st.none() | st.binary(max_size=8),
    )
    member = st.builds(
        Member,
        member_id=names,
        client_id=names,
        client_host=names,
        session_timeout=ints32,
        subscription=st.binary(max_size=10),
        assignment=st.just(b"") | assignment,
        group_instance_id=(st.none() | names) if version >= 3 else st.none(),
        rebalance_timeout=ints32 if version >= 1 else st.just(-1),
    )
    return st.lists(member, max_size=4)


@st.composite
def group_records(draw: st.DrawFn) -> tuple[int, str, str, int, str | None, str | None, int, list]:
    version = draw(st.integers(0, 4))
    return (
        version,
        draw(names),
        draw(st.sampled_from(["consumer", "connect", ""])),
        draw(ints32),
        draw(st.none() | names),
        draw(st.none() | names),
        draw(ints64) if version >= 2 else -1,
        draw(members_strategy(version)),
    )


@given(group_records())
def test_group_metadata_round_trip(record: tuple) -> None:
    version, group, ptype, generation, protocol, leader, state_ts, members = record
    value = group_value(version, ptype, generation, protocol, leader, state_ts, members)
    event = decode_record(group_key(group), value, 2, 17)
    assert isinstance(event, GroupMetadata), event
    assert (event.group, event.order, event.source_partition) == (group, 17, 2)
    g = event.value
    assert (g.version, g.protocol_type, g.generation, g.protocol, g.leader) == (
        version,
        ptype,
        generation,
        protocol,
        leader,
    )
    assert g.current_state_timestamp == (state_ts if version >= 2 else None)
    assert len(g.members) == len(members)
    owners = []
    for got, m in zip(g.members, members, strict=True):
        assert (got.member_id, got.client_id, got.client_host) == (
            m.member_id,
            m.client_id,
            m.client_host,
        )
        assert got.group_instance_id == m.group_instance_id
        assert got.rebalance_timeout == (m.rebalance_timeout if version >= 1 else None)
        assert (got.session_timeout, got.subscription) == (m.session_timeout, m.subscription)
        assert got.assignment_bytes == m.assignment
        if ptype == "consumer" and m.assignment:
            assert got.assignment is not None
            assert (
                consumer_assignment(
                    got.assignment.version,
                    {t: list(p) for t, p in got.assignment.partitions.items()},
                    got.assignment.user_data,
                )
                == m.assignment
            )
            owners += [
                PartitionOwner(t, p, m.member_id, m.client_id, m.client_host)
                for t, ps in got.assignment.partitions.items()
                for p in ps
            ]
        else:
            assert got.assignment is None
    assert event.partition_owners() == owners
    assert decode_group_metadata_value(value) == g


@given(
    group=names,
    member=names,
    epoch=ints32,
    metadata_hash=st.none() | ints64,
    instance=st.none() | names,
    rack=st.none() | names,
    topics=st.lists(names, max_size=3),
    regex=st.none() | names,
    assignor=st.none() | names,
    classic=st.none()
    | st.tuples(ints32, st.lists(st.tuples(names, st.binary(max_size=6)), max_size=2)),
    assigned=st.dictionaries(topic_ids, part_lists, max_size=3),
    pending=st.dictionaries(topic_ids, part_lists, max_size=2),
    state=st.integers(-128, 127),
)
def test_kip848_round_trip(
    group: str,
    member: str,
    epoch: int,
    metadata_hash: int | None,
    instance: str | None,
    rack: str | None,
    topics: list[str],
    regex: str | None,
    assignor: str | None,
    classic: tuple[int, list[tuple[str, bytes]]] | None,
    assigned: dict[str, list[int]],
    pending: dict[str, list[int]],
    state: int,
) -> None:
    pos = {"order": 5, "source_partition": 1}
    got = decode_record(kip848_key(3, group), cg_metadata_value(epoch, metadata_hash), 1, 5)
    assert got == ConsumerGroupMetadata(
        group=group, epoch=epoch, metadata_hash=metadata_hash or 0, **pos
    )
    value = cg_member_value(instance, rack, "cid", "host", topics, regex, 300, assignor, classic)
    got = decode_record(kip848_key(5, group, member), value, 1, 5)
    assert isinstance(got, ConsumerGroupMemberMetadata), got
    assert (got.group, got.member_id, got.instance_id, got.rack_id) == (
        group,
        member,
        instance,
        rack,
    )
    assert (got.client_id, got.client_host, got.subscribed_topic_names) == (
        "cid",
        "host",
        tuple(topics),
    )
    assert (got.subscribed_topic_regex, got.rebalance_timeout_ms, got.server_assignor) == (
        regex,
        300,
        assignor,
    )
    if classic is None:
        assert got.classic_session_timeout_ms is None and got.classic_protocols is None
    else:
        assert got.classic_session_timeout_ms == classic[0]
        assert got.classic_protocols is not None
        assert [(p.name, p.metadata) for p in got.classic_protocols] == classic[1]
    got = decode_record(kip848_key(7, group, member), cg_target_value(assigned), 1, 5)
    assert got == ConsumerGroupTargetAssignment(
        group=group, member_id=member, partitions={t: tuple(p) for t, p in assigned.items()}, **pos
    )
    epochs: dict[str, list[int] | None] = {t: [epoch] * len(p) for t, p in assigned.items()}
    value = cg_current_value(epoch, epoch // 2, state, assigned, pending, epochs)
    got = decode_record(kip848_key(8, group, member), value, 1, 5)
    assert got == ConsumerGroupCurrentAssignment(
        group=group,
        member_id=member,
        member_epoch=epoch,
        previous_member_epoch=epoch // 2,
        state=state,
        partitions={t: tuple(p) for t, p in assigned.items()},
        pending_revocation={t: tuple(p) for t, p in pending.items()},
        assignment_epochs={
            t: tuple(e) for t, e in epochs.items() if t in assigned and e is not None
        },
        pending_revocation_epochs={
            t: tuple(e) for t, e in epochs.items() if t in pending and e is not None
        },
        **pos,
    )


def test_tombstones_become_events() -> None:
    records: list[tuple[bytes | None, bytes | None]] = [
        (commit_key("g", "t", 3), offset_value(3, 10, commit_ts=111)),
        (commit_key("g", "t", 3), None),  # offset deleted
        (commit_key("g", "t", 4, key_type=0), b""),  # empty value is a tombstone too
        (group_key("g"), None),  # group deleted
        (kip848_key(3, "g"), None),
        (kip848_key(8, "g", "m-1"), None),
        (commit_key("g", "t", 3), offset_value(1, 11, commit_ts=112)),
    ]
    b = batch_of(records)
    assert_counts_add_up(b)
    assert b.commit_offsets == [10, 11] and b.commit_orders == [1000, 1006]
    assert b.events == [
        OffsetTombstone(key=CommitKey("g", "t", 3), order=1001, source_partition=7, commit_index=1),
        OffsetTombstone(key=CommitKey("g", "t", 4), order=1002, source_partition=7, commit_index=1),
        GroupTombstone(group="g", order=1003, source_partition=7, commit_index=1),
        ConsumerGroupRecordTombstone(
            record_type="consumer_group_metadata",
            group="g",
            member_id=None,
            order=1004,
            source_partition=7,
            commit_index=1,
        ),
        ConsumerGroupRecordTombstone(
            record_type="consumer_group_current_member_assignment",
            group="g",
            member_id="m-1",
            order=1005,
            source_partition=7,
            commit_index=1,
        ),
    ]
    assert b.record_types == {
        "offset_commit": 4,
        "group_metadata": 1,
        "consumer_group_metadata": 1,
        "consumer_group_current_member_assignment": 1,
    }


def test_other_record_types_are_counted_not_decoded() -> None:
    records: list[tuple[bytes | None, bytes | None]] = [
        (kip848_key(4, "g"), b"\x00\x00anything"),  # ConsumerGroupPartitionMetadata
        (kip848_key(6, "g"), b"\x00\x00\x00"),  # ConsumerGroupTargetAssignmentMetadata
        (i16(11) + string("share"), b"\x00\x00"),  # ShareGroupMetadata
        (i16(23) + string("streams"), None),  # StreamsGroupTopology tombstone
        (i16(9) + string("g"), b"\x00\x00"),  # no schema uses apiKey 9
        (i16(24) + string("g"), b"\x00\x00"),
        (i16(-1) + string("g"), b"\x00\x00"),
        (None, offset_value(1, 1)),
        (b"", offset_value(1, 1)),
        (b"\x00", offset_value(1, 1)),
    ]
    b = batch_of(records)
    assert_counts_add_up(b)
    assert b.skipped == {
        "ignored_record_type": 4,
        "unknown_key_version": 3,
        "missing_key": 2,
        "truncated": 1,
    }
    assert b.record_types == {
        "consumer_group_partition_metadata": 1,
        "consumer_group_target_assignment_metadata": 1,
        "share_group_metadata": 1,
        "streams_group_topology": 1,
        "unknown": 3,
    }
    assert set(b.skipped) <= set(SKIP_REASONS)


def test_value_versions_outside_the_schema_are_unknown() -> None:
    v1_body = offset_value(1, 1)[2:]
    for key, value in (
        (commit_key("g", "t", 0), i16(5) + v1_body),
        (commit_key("g", "t", 0), i16(-1) + v1_body),
        (commit_key("g", "t", 0), i16(256 + 1) + v1_body),  # same low byte as v1
        (group_key("g"), i16(5) + group_value(4, "consumer", 1, None, None, 0, [])[2:]),
        (kip848_key(3, "g"), i16(1) + cg_metadata_value(1)[2:]),
    ):
        result = decode_record(key, value)
        assert isinstance(result, Skipped) and result.reason == SkipReason.UNKNOWN_VALUE_VERSION
        # Also with the key cached and the v1 layout learned (the fast path's state).
        d = ConsumerOffsetsDecoder()
        d.decode_batch([key], [offset_value(1, 1) if key[1] in (0, 1) else None], 0, [0])
        assert batch_of([(key, value)], d).skipped == {"unknown_value_version": 1}


def test_schema_strictness() -> None:
    """Malformations a Kafka writer never produces are skipped with a precise reason."""
    k = commit_key("g", "t", 0)
    cases = [
        ((k + b"x", offset_value(1, 1)), SkipReason.TRAILING_BYTES, "key.partition"),
        ((k, offset_value(1, 1) + b"x"), SkipReason.TRAILING_BYTES, "value.expireTimestamp"),
        ((k, offset_value(4, 1) + b"x"), SkipReason.TRAILING_BYTES, "value.taggedFields"),
        ((k, i16(0) + i64(1) + i16(-1) + i64(2)), SkipReason.INVALID_NULL, "value.metadata"),
        ((k, i16(0) + i64(1) + i16(-2) + i64(2)), SkipReason.INVALID_LENGTH, "value.metadata"),
        ((k, i16(4) + i64(1) + i32(0) + b"\x00" + i64(2) + b"\x00"), NUL, "value.metadata"),
        (
            (k, i16(4) + i64(1) + i32(0) + b"\x81\x80\x80\x80\x80\x00" + i64(2) + b"\x00"),
            SkipReason.INVALID_LENGTH,
            "value.metadata",
        ),
        (
            (k, offset_value(4, 1, extra_tags={0: b"\x00" * 15})),  # topicId must be 16 bytes
            SkipReason.INVALID_TAGGED_FIELD,
            "value.taggedFields[0].topicId",
        ),
        (
            (k, offset_value(4, 1, extra_tags={0: b"\x00" * 17})),
            SkipReason.INVALID_TAGGED_FIELD,
            "value.taggedFields[0]",
        ),
        (
            (i16(1) + b"\x00\x01\xff" + string("t") + i32(0), offset_value(1, 1)),
            SkipReason.INVALID_UTF8,
            "key.group",
        ),
        (
            (group_key("g"), group_value(1, "consumer", 1, None, None, 0, [])[:-4] + i32(-1)),
            NUL,
            "value.members",
        ),
        (
            (group_key("g"), group_value(4, "consumer", 1, None, None, 0, []) + b"\x00"),
            SkipReason.TRAILING_BYTES,
            "value.taggedFields",
        ),
        (
            (
                group_key("g"),
                group_value(
                    1,
                    "consumer",
                    1,
                    "range",
                    "m",
                    0,
                    [Member("m", "c", "h", 1, b"", consumer_assignment(0, {"t": [0]}) + b"z")],
                ),
            ),
            IA,
            "value.members[0].assignment.userData",
        ),
        (
            (
                kip848_key(5, "g", "m"),
                cg_member_value(None, None, "c", "h", [], None, 1, None)[:-1]
                + tags({0: uvarint(2)}),
            ),
            SkipReason.INVALID_TAGGED_FIELD,
            "value.taggedFields[0].present",
        ),
        ((kip848_key(7, "g", "m"), cg_target_value({}) + b"\x00"), TB, "value.taggedFields"),
    ]
    for (key, value), reason, field in cases:
        result = decode_record(key, value)
        assert isinstance(result, Skipped), (key, value, result)
        assert (result.reason, result.field) == (reason, field), result
        b = batch_of([(key, value)])
        assert b.skipped == {reason: 1}


def test_lenient_where_kafka_is() -> None:
    """Consumer-protocol versions above 3 may carry extra fields; metadata is free text; a
    non-consumer group's assignment bytes are opaque; an empty assignment has no owners."""
    future = consumer_assignment(7, {"t": [1, 2]}, None) + b"new field"
    assert decode_consumer_assignment(future) == ConsumerAssignment(7, {"t": (1, 2)}, None)
    bad_text = i16(0) + i64(1) + i16(2) + b"\xff\xfe" + i64(2)
    result = decode_record(commit_key("g", "t", 0), bad_text)
    assert isinstance(result, OffsetCommit) and result.value.metadata == "\ufffd\ufffd"
    members = [
        Member("m", "c", "h", 1, b"", b"not a consumer assignment"),
        Member("n", "c", "h", 1, b"", b""),
    ]
    event = decode_record(group_key("g"), group_value(3, "connect", 1, "p", "m", 0, members))
    assert isinstance(event, GroupMetadata)
    assert [m.assignment for m in event.value.members] == [None, None]
    assert event.partition_owners() == []
    # A topic listed twice: its partitions are concatenated.
    dup = (
        i16(0) + i32(2) + string("t") + array([i32(1)]) + string("t") + array([i32(2)]) + blob(b"")
    )
    assert decode_consumer_assignment(dup) == ConsumerAssignment(0, {"t": (1, 2)}, b"")


# --- the batch API ------------------------------------------------------------------------


def test_batch_keeps_order_partition_and_interleaving() -> None:
    gm = group_value(
        3,
        "consumer",
        5,
        "range",
        "m",
        42,
        [Member("m", "c", "/10.0.0.1", 10, b"", consumer_assignment(1, {"t": [0, 1]}))],
    )
    records: list[tuple[bytes | None, bytes | None]] = [
        (commit_key("g", "t", 0), offset_value(1, 100, "", 1000, expire_ts=5)),
        (commit_key("g", "t", 1), offset_value(3, 200, "meta", 2000, leader_epoch=4)),
        (group_key("g"), gm),
        (commit_key("g", "t", 0), offset_value(2, 101, "x", 1001)),
        (commit_key("g", "t", 0), offset_value(0, 102, "", 1002)),
        (b"\x00\x01garbage", offset_value(1, 1)),
        (
            commit_key("g", "t", 1),
            offset_value(4, 201, "m", 2001, topic_id="AAAAAAAAAAAAAAAAAAAAAA"),
        ),
    ]
    d = ConsumerOffsetsDecoder()
    parts = [5, 5, 6, 5, 5, 9, 5]
    offsets = [10, 11, 3, 12, 13, 1, 14]
    for _ in range(2):  # cold (slow path) then warm (fast path): same answer
        b = d.decode_batch([k for k, _ in records], [v for _, v in records], parts, offsets)
        assert_counts_add_up(b)
        assert b.commit_groups == ["g"] * 5
        assert b.commit_topics == ["t"] * 5
        assert b.commit_partitions == [0, 1, 0, 0, 1]
        assert b.commit_offsets == [100, 200, 101, 102, 201]
        assert b.commit_timestamps == [1000, 2000, 1001, 1002, 2001]
        assert b.commit_orders == [10, 11, 12, 13, 14]
        assert b.commit_source_partitions == [5, 5, 5, 5, 5]
        (event,) = b.events
        assert isinstance(event, GroupMetadata)
        assert (event.order, event.source_partition, event.commit_index) == (3, 6, 2)
        assert event.partition_owners() == [
            PartitionOwner("t", 0, "m", "c", "/10.0.0.1"),
            PartitionOwner("t", 1, "m", "c", "/10.0.0.1"),
        ]
        assert b.skipped == {"truncated": 1}
        assert b.skip_samples["truncated"].order == 1
        assert b.record_types == {"offset_commit": 6, "group_metadata": 1}
    stats = d.stats
    assert (stats.batches, stats.records, stats.commits) == (2, 14, 10)
    assert stats.records_by_type == {"offset_commit": 12, "group_metadata": 2}
    assert stats.skipped_by_reason == {"truncated": 2}
    assert stats.events_by_kind == {"group_metadata": 2}
    assert stats.key_cache_size == 2
    assert stats.layout_cache_size == 5


def test_commit_keys_are_shared_objects() -> None:
    """One CommitKey object per distinct raw key, and group/topic strings are interned."""
    d = ConsumerOffsetsDecoder()
    keys = [bytes(commit_key("grp", "top", p % 3)) for p in range(9)]
    b = d.decode_batch(keys, [offset_value(3, p) for p in range(9)], 0, list(range(9)))
    assert len({id(k) for k in b.commit_keys}) == 3
    assert len({id(k.group) for k in b.commit_keys}) == 1


def test_key_cache_is_bounded() -> None:
    d = ConsumerOffsetsDecoder(max_cached_keys=10)
    keys = [commit_key("g", "t", p) for p in range(25)]
    b = d.decode_batch(keys, [offset_value(1, p) for p in range(25)], 0, list(range(25)))
    assert b.commit_partitions == list(range(25))
    assert d.stats.key_cache_size <= 10
    assert d.stats.key_cache_resets == 2


def test_fast_path_rejects_what_the_slow_path_rejects() -> None:
    """A value with a learned length but a wrong structural field goes to the slow path."""
    d = ConsumerOffsetsDecoder()
    k = commit_key("g", "t", 0)
    good = offset_value(1, 1, "ab", 2)
    v4 = offset_value(4, 1, "abc", 2)
    v4_tag = offset_value(4, 1, "abc", 2, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    d.decode_batch([k, k, k], [good, v4, v4_tag], 0, [0, 1, 2])  # learn three layouts
    assert d.stats.layout_cache_size == 3
    tag_at = len(v4_tag) - 19  # tagged fields: count 01, tag 00, size 10, 16 bytes of uuid
    cases = [
        (good[:10] + i16(3) + good[12:], "truncated"),  # metadata length 3: misaligned
        (i16(0x0101) + good[2:], "unknown_value_version"),  # version 257, same low byte
        (v4[:-1] + b"\x01", "truncated"),  # one tagged field announced, none there
        (v4_tag, None),
        (v4_tag[:tag_at] + b"\x01\x05\x10" + v4_tag[-16:], None),  # tag 5: unknown, fine
        (v4_tag[:tag_at] + b"\x01\x00\x11" + v4_tag[-16:], "truncated"),  # size 17 > 16
        (v4_tag[:tag_at] + b"\x01\x00\x0f" + v4_tag[-16:], "invalid_tagged_field"),
        (v4_tag[:tag_at] + b"\x02\x00\x10" + v4_tag[-16:], "truncated"),  # 2 fields announced
    ]
    b = d.decode_batch([k] * len(cases), [v for v, _ in cases], 0, list(range(len(cases))))
    assert b.commit_orders == [i for i, (_, reason) in enumerate(cases) if reason is None]
    want: dict[str, int] = {}
    for value, reason in cases:
        result = decode_record(k, value)
        assert getattr(result, "reason", None) == reason
        if reason:
            want[reason] = want.get(reason, 0) + 1
    assert b.skipped == want


def test_batch_input_validation_and_odd_inputs() -> None:
    d = ConsumerOffsetsDecoder()
    with pytest.raises(ValueError):
        d.decode_batch([b""], [], 0, [0])
    with pytest.raises(ValueError):
        d.decode_batch([b""], [b""], [0, 1], [0])
    k = commit_key("g", "t", 0)
    v = offset_value(3, 9)
    b = d.decode_batch(
        [bytearray(k), memoryview(k), k], [v, bytearray(v), memoryview(v)], 0, [0, 1, 2]
    )
    assert_counts_add_up(b)
    assert b.commit_offsets == [9, 9, 9]
    assert d.decode_batch([], [], 0, []).total == 0


def test_decoder_decode_record_uses_its_cache() -> None:
    d = ConsumerOffsetsDecoder()
    k = commit_key("g", "t", 1)
    first = d.decode_record(k, offset_value(3, 1), 0, 5)
    second = d.decode_record(k, offset_value(3, 2), 0, 6)
    assert isinstance(first, OffsetCommit) and isinstance(second, OffsetCommit)
    assert first.key is second.key
    assert d.stats.key_cache_size == 1


@settings(max_examples=50)
@given(st.lists(st.sampled_from(range(6)), min_size=1, max_size=30))
def test_batch_equals_single_record_decoding(kinds: list[int]) -> None:
    """decode_batch == decode_record applied to each record, whatever the mix."""
    gen = [
        lambda i: (commit_key("g", "t", i % 3), offset_value(i % 5, i, "m" * (i % 4), i * 10)),
        lambda i: (commit_key("g", "t", i % 3), None),
        lambda i: (group_key("g"), group_value(i % 5, "consumer", i, None, "l", 1, [])),
        lambda i: (kip848_key(7, "g", "m"), cg_target_value({"AAAAAAAAAAAAAAAAAAAAAA": [i]})),
        lambda i: (commit_key("g", "t", 0), offset_value(3, i)[: i % 20]),
        lambda i: (i16(12) + string("s"), b"\x00\x00"),
    ]
    records = [gen[kind](i) for i, kind in enumerate(kinds)]
    d = ConsumerOffsetsDecoder()
    for _ in range(2):
        b = batch_of(records, d)
        assert_counts_add_up(b)
        commits, events, skipped = [], [], {}
        for i, (k, v) in enumerate(records):
            r = decode_record(k, v, 7, 1000 + i)
            if isinstance(r, OffsetCommit):
                commits.append((r.key, r.value.offset, r.value.commit_timestamp, r.order, 7))
            elif isinstance(r, Skipped):
                skipped[r.reason] = skipped.get(r.reason, 0) + 1
            else:
                events.append(r)
        assert list(b.iter_commits()) == commits
        assert [dataclasses.replace(e, commit_index=0) for e in b.events] == events
        assert b.skipped == skipped

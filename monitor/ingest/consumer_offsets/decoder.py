"""Decoder for records of Kafka's ``__consumer_offsets`` topic, written from Kafka's schemas.

Two layers:

* A strict, schema-following slow path (:class:`_Reader` and the ``_read_*`` functions) that
  decodes every record type we care about and turns any malformation into a
  :class:`~.records.Skipped` with a stable reason label. It backs the single-record and
  fragment entry points (``decode_record``, ``decode_offset_commit_value`` ...).
* A fast path in :meth:`ConsumerOffsetsDecoder.decode_batch` for offset commits, which are
  nearly all of the topic: the parsed key is cached by its raw bytes (a compacted topic repeats
  keys endlessly) and the value is unpacked by one precompiled :class:`struct.Struct` per
  (length, version) layout that the slow path has already validated once. The fast path checks
  every structural field (version, metadata length, tagged-field section) so it accepts exactly
  what the slow path accepts; anything else falls through to the slow path.

Nothing raises out of the decoder for bad data: records are skipped and counted by reason.
Where this decoder and Burrow disagree, it follows the Kafka schema (see the package docstring).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Sequence
from itertools import repeat
from struct import Struct
from typing import Any

from .records import (
    RECORD_TYPE_LABELS,
    UNKNOWN_RECORD_TYPE,
    ClassicProtocol,
    CommitKey,
    ConsumerAssignment,
    ConsumerGroupCurrentAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupRecordTombstone,
    ConsumerGroupTargetAssignment,
    DecodedBatch,
    DecoderStats,
    Event,
    GroupMember,
    GroupMetadata,
    GroupMetadataHeader,
    GroupMetadataValue,
    GroupTombstone,
    OffsetCommit,
    OffsetCommitValue,
    OffsetTombstone,
    Record,
    Skipped,
    SkippedRecord,
    SkipReason,
)

__all__ = [
    "ConsumerOffsetsDecoder",
    "decode_compact_string",
    "decode_consumer_assignment",
    "decode_group_member",
    "decode_group_metadata_header",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_key",
    "decode_offset_commit_value",
    "decode_record",
    "decode_string",
]

_I8 = Struct(">b")
_I16 = Struct(">h")
_I32 = Struct(">i")
_I64 = Struct(">q")

_MAX_INT32 = 0x7FFFFFFF
_MAX_STRING = 0x7FFF  # Kafka refuses longer (compact) strings: the length must fit an int16

_OFFSET_COMMIT_VALUE_VERSIONS = range(5)  # OffsetCommitValue validVersions "0-4"
_GROUP_METADATA_VALUE_VERSIONS = range(5)  # GroupMetadataValue validVersions "0-4"
_COMMIT_TYPES = (0, 1)
_GROUP_TYPE = 2
# KIP-848 record types carrying membership or assignment; value validVersions "0" for each.
_KIP848_DECODED = {3, 5, 7, 8}
_KIP848_MEMBER_KEYED = {5, 7, 8}
# Known record types we deliberately do not decode: counted, not treated as corrupt.
_IGNORED_TYPES = frozenset(RECORD_TYPE_LABELS) - {0, 1, 2} - _KIP848_DECODED

_TRUNCATED = SkipReason.TRUNCATED
_COMMIT_LABEL = RECORD_TYPE_LABELS[1]


class _Fail(Exception):
    """Internal: decoding stopped at ``field`` for ``reason``. Never escapes the module."""

    def __init__(self, reason: SkipReason, field: str, detail: str = "") -> None:
        super().__init__(reason, field, detail)
        self.reason = reason
        self.field = field
        self.detail = detail

    def under(self, prefix: str) -> _Fail:
        """Prefix the field path (e.g. ``members[2].``) on the way out of a nested read."""
        self.field = prefix + self.field
        return self

    def skipped(self) -> Skipped:
        return Skipped(self.reason, self.field, self.detail)


class _Reader:
    """Bounds-checked big-endian cursor over ``buf[pos:end]``; raises :class:`_Fail`."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def _take(self, n: int, field: str) -> int:
        pos = self.pos
        if pos + n > self.end:
            raise _Fail(_TRUNCATED, field, f"needs {n} bytes, {self.end - pos} left")
        self.pos = pos + n
        return pos

    # The fixed-size readers and string/bytes are inlined (no _take): group metadata records
    # with many members call them hundreds of times each.
    def int8(self, field: str) -> int:
        return int(_I8.unpack_from(self.buf, self._take(1, field))[0])

    def int16(self, field: str) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise _Fail(_TRUNCATED, field, f"needs 2 bytes, {self.end - pos} left")
        self.pos = pos + 2
        return int(_I16.unpack_from(self.buf, pos)[0])

    def int32(self, field: str) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise _Fail(_TRUNCATED, field, f"needs 4 bytes, {self.end - pos} left")
        self.pos = pos + 4
        return int(_I32.unpack_from(self.buf, pos)[0])

    def int64(self, field: str) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            raise _Fail(_TRUNCATED, field, f"needs 8 bytes, {self.end - pos} left")
        self.pos = pos + 8
        return int(_I64.unpack_from(self.buf, pos)[0])

    def int32_array(self, n: int, field: str) -> tuple[int, ...]:
        pos = self._take(4 * n, field)
        return struct.unpack_from(f">{n}i", self.buf, pos)

    def uvarint(self, field: str) -> int:
        """Unsigned varint as Kafka writes them: at most 5 bytes."""
        buf, pos, end = self.buf, self.pos, self.end
        result = shift = 0
        for _ in range(5):
            if pos >= end:
                raise _Fail(_TRUNCATED, field, "varint runs past the end")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
        raise _Fail(SkipReason.INVALID_LENGTH, field, "varint longer than 5 bytes")

    def _raw(self, n: int, field: str, nullable: bool) -> bytes | None:
        """Bytes of a length-prefixed field whose decoded length is ``n`` (-1 means null)."""
        if n < 0:
            if n != -1:
                raise _Fail(SkipReason.INVALID_LENGTH, field, f"length {n}")
            if not nullable:
                raise _Fail(SkipReason.INVALID_NULL, field, "null in a non-nullable field")
            return None
        pos = self._take(n, field)
        return self.buf[pos : pos + n]

    def _text(self, raw: bytes | None, field: str) -> str | None:
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Fail(SkipReason.INVALID_UTF8, field, str(exc)) from None

    def string(self, field: str, nullable: bool = False) -> Any:
        n = self.int16(field)
        start = self.pos
        stop = start + n
        if n < 0 or stop > self.end:
            return self._text(self._raw(n, field, nullable), field)  # null, or the error
        self.pos = stop
        try:
            return self.buf[start:stop].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Fail(SkipReason.INVALID_UTF8, field, str(exc)) from None

    def compact_string(self, field: str, nullable: bool = False) -> Any:
        n = self.uvarint(field) - 1
        if n > _MAX_STRING:
            raise _Fail(SkipReason.INVALID_LENGTH, field, f"string length {n} > {_MAX_STRING}")
        return self._text(self._raw(n, field, nullable), field)

    def bytes_(self, field: str, nullable: bool = False) -> Any:
        n = self.int32(field)
        start = self.pos
        stop = start + n
        if n < 0 or stop > self.end:
            return self._raw(n, field, nullable)  # null, or the error
        self.pos = stop
        return self.buf[start:stop]

    def compact_bytes(self, field: str, nullable: bool = False) -> Any:
        n = self.uvarint(field) - 1
        if n > _MAX_INT32:
            raise _Fail(SkipReason.INVALID_LENGTH, field, f"length {n} overflows int32")
        return self._raw(n, field, nullable)

    def _count(self, n: int, field: str, nullable: bool, min_size: int) -> int | None:
        if n < 0:
            if n != -1:
                raise _Fail(SkipReason.INVALID_LENGTH, field, f"array count {n}")
            if not nullable:
                raise _Fail(SkipReason.INVALID_NULL, field, "null array in a non-nullable field")
            return None
        if n > _MAX_INT32:
            raise _Fail(SkipReason.INVALID_LENGTH, field, f"array count {n} overflows int32")
        if n * min_size > self.end - self.pos:
            raise _Fail(_TRUNCATED, field, f"{n} elements cannot fit in {self.end - self.pos}")
        return n

    def array(self, field: str, min_size: int, nullable: bool = False) -> Any:
        """Element count of an int32-counted array (None if null)."""
        return self._count(self.int32(field), field, nullable, min_size)

    def compact_array(self, field: str, min_size: int, nullable: bool = False) -> Any:
        """Element count of a varint-counted (flexible) array (None if null)."""
        return self._count(self.uvarint(field) - 1, field, nullable, min_size)

    def uuid(self, field: str) -> str:
        pos = self._take(16, field)
        return base64.urlsafe_b64encode(self.buf[pos : pos + 16])[:22].decode("ascii")

    def tagged_fields(
        self, field: str, known: dict[int, Callable[[_Reader], Any]] | None = None
    ) -> dict[int, Any]:
        """Read a tagged-field section; decode ``known`` tags, skip the others (KIP-482)."""
        found: dict[int, Any] = {}
        n = self.uvarint(field)
        if 2 * n > self.end - self.pos:  # every tagged field has at least a tag and a size
            raise _Fail(_TRUNCATED, field, f"{n} tagged fields cannot fit")
        for _ in range(n):
            tag = self.uvarint(field)
            size = self.uvarint(field)
            start = self.pos
            self._take(size, f"{field}[{tag}]")
            reader = known.get(tag) if known else None
            if reader is None:
                continue
            sub = _Reader(self.buf, start, start + size)
            try:
                found[tag] = reader(sub)
            except _Fail as exc:
                if exc.reason is _TRUNCATED:
                    exc.reason = SkipReason.INVALID_TAGGED_FIELD
                raise exc.under(f"{field}[{tag}].") from None
            if sub.pos != sub.end:
                raise _Fail(
                    SkipReason.INVALID_TAGGED_FIELD,
                    f"{field}[{tag}]",
                    f"{sub.end - sub.pos} bytes left inside the tagged field",
                )
        return found

    def finish(self, field: str) -> None:
        if self.pos != self.end:
            raise _Fail(SkipReason.TRAILING_BYTES, field, f"{self.end - self.pos} bytes left")


# --- offset commits (apiKey 0 and 1) --------------------------------------------------------


def _read_commit_key_body(r: _Reader) -> CommitKey:
    group = r.string("group")
    topic = r.string("topic")
    partition = r.int32("partition")
    r.finish("partition")
    return CommitKey(group, topic, partition)


# Layout of the value after its fields, for teaching the fast path: (version, metadata length,
# trailer) where trailer is 0 (no tagged fields), 1 (only tag 0 = topicId) or -1 (anything else).
_Shape = tuple[int, int, int]


def _read_offset_commit_value(r: _Reader, version: int) -> tuple[OffsetCommitValue, _Shape]:
    offset = r.int64("offset")
    leader_epoch = r.int32("leaderEpoch") if version >= 3 else None
    flexible = version >= 4
    if flexible:
        mlen = r.uvarint("metadata") - 1
        if mlen > _MAX_STRING:
            raise _Fail(SkipReason.INVALID_LENGTH, "metadata", f"string length {mlen}")
    else:
        mlen = r.int16("metadata")
    raw = r._raw(mlen, "metadata", False)
    # Free-form client text, never validated: decoded as leniently as Kafka's Java reader.
    metadata = raw.decode("utf-8", "replace") if raw else ""
    commit_ts = r.int64("commitTimestamp")
    expire_ts = r.int64("expireTimestamp") if version == 1 else None
    topic_id = None
    trailer = 0
    if flexible:
        tags_at = r.pos
        tagged = r.tagged_fields("taggedFields", {0: lambda s: s.uuid("topicId")})
        topic_id = tagged.get(0)
        if r.pos - tags_at == 19 and r.buf[tags_at : tags_at + 3] == b"\x01\x00\x10":
            trailer = 1
        elif r.pos - tags_at != 1:
            trailer = -1
    last = "taggedFields" if flexible else "expireTimestamp" if version == 1 else "commitTimestamp"
    r.finish(last)
    value = OffsetCommitValue(
        version, offset, leader_epoch, metadata, commit_ts, expire_ts, topic_id
    )
    return value, (version, mlen, trailer)


_Layout = tuple[Callable[[bytes], tuple[int, int, Any, int]], int, Any]
"""Fast-path layout: (unpack, version, check). ``unpack(v)`` gives (version, offset, check
field(s), commitTimestamp); the bytes have this exact layout iff the first and third equal
``version`` and ``check``."""


def _fold_v4(unpack: Callable[[bytes], tuple[Any, ...]]) -> Callable[[bytes], tuple]:
    """v4 has more structural bytes (varint length, tagged-field header) than one field:
    fold them into the third element so the hot loop's two comparisons still cover them."""

    def unpack_v4(v: bytes) -> tuple[int, int, Any, int]:
        ver, off, mlen_plus_1, ts, *trailer = unpack(v)
        return ver, off, (mlen_plus_1, *trailer), ts

    return unpack_v4


def _fast_layout(shape: _Shape, size: int) -> _Layout | None:
    """The fast-path layout of ``size``-byte values of this shape, or None when it has no
    fixed-struct form (a multi-byte varint, tags other than topicId, a non-minimal encoding)."""
    version, m, trailer = shape
    if version in (0, 2):
        s = Struct(f">hqh{m}xq")
    elif version == 1:
        s = Struct(f">hqh{m}xq8x")  # expireTimestamp skipped
    elif version == 3:
        s = Struct(f">hq4xh{m}xq")  # leaderEpoch skipped
    elif version == 4 and trailer == 0:  # no tagged fields: count 0
        s = Struct(f">hq4xB{m}xqB")
        return (_fold_v4(s.unpack), 4, (m + 1, 0)) if s.size == size else None
    elif version == 4 and trailer == 1:  # count 1, tag 0, size 16, the topicId
        s = Struct(f">hq4xB{m}xqBBB16x")
        return (_fold_v4(s.unpack), 4, (m + 1, 1, 0, 16)) if s.size == size else None
    else:
        return None
    # A size mismatch means a non-minimal varint was used somewhere: leave it to the slow path.
    return (s.unpack, version, m) if s.size == size else None


# --- classic group metadata (apiKey 2) ------------------------------------------------------


def _read_assignment(r: _Reader, version: int | None) -> ConsumerAssignment:
    """ConsumerProtocolAssignment; ``version`` None means the int16 version is in the bytes."""
    if version is None:
        version = r.int16("version")
    if version < 0:
        raise _Fail(SkipReason.UNKNOWN_VALUE_VERSION, "version", f"version {version}")
    partitions: dict[str, tuple[int, ...]] = {}
    n = r.array("assignedPartitions", 1)
    for i in range(n):
        try:
            topic = r.string("topic")
            parts = r.int32_array(r.array("partitions", 4), "partitions")
        except _Fail as exc:
            raise exc.under(f"assignedPartitions[{i}].") from None
        partitions[topic] = partitions.get(topic, ()) + parts
    user_data = r.bytes_("userData", nullable=True)
    if version <= 3:  # later versions may append fields, as the consumer protocol allows
        r.finish("userData")
    return ConsumerAssignment(version, partitions, user_data)


def _read_member(r: _Reader, version: int, consumer_protocol: bool) -> GroupMember:
    flexible = version >= 4
    rs = r.compact_string if flexible else r.string
    rb = r.compact_bytes if flexible else r.bytes_
    member_id = rs("memberId")
    instance_id = rs("groupInstanceId", True) if version >= 3 else None
    client_id = rs("clientId")
    client_host = rs("clientHost")
    rebalance_timeout = r.int32("rebalanceTimeout") if version >= 1 else None
    session_timeout = r.int32("sessionTimeout")
    subscription = rb("subscription")
    assignment_bytes = rb("assignment")
    if flexible:
        r.tagged_fields("taggedFields")
    assignment = None
    if consumer_protocol and assignment_bytes:
        try:
            assignment = _read_assignment(_Reader(assignment_bytes), None)
        except _Fail as exc:
            raise _Fail(
                SkipReason.INVALID_ASSIGNMENT,
                f"assignment.{exc.field}",
                f"{exc.reason.value}: {exc.detail}",
            ) from None
    return GroupMember(
        member_id,
        instance_id,
        client_id,
        client_host,
        rebalance_timeout,
        session_timeout,
        subscription,
        assignment_bytes,
        assignment,
    )


def _read_group_header(r: _Reader, version: int) -> GroupMetadataHeader:
    rs = r.compact_string if version >= 4 else r.string
    protocol_type = rs("protocolType")
    generation = r.int32("generation")
    protocol = rs("protocol", True)
    leader = rs("leader", True)
    state_ts = r.int64("currentStateTimestamp") if version >= 2 else None
    return GroupMetadataHeader(protocol_type, generation, protocol, leader, state_ts)


def _read_group_metadata_value(r: _Reader, version: int) -> GroupMetadataValue:
    h = _read_group_header(r, version)
    flexible = version >= 4
    n = r.compact_array("members", 1) if flexible else r.array("members", 1)
    consumer = h.protocol_type == "consumer"
    members = []
    for i in range(n):
        try:
            members.append(_read_member(r, version, consumer))
        except _Fail as exc:
            raise exc.under(f"members[{i}].") from None
    if flexible:
        r.tagged_fields("taggedFields")
    r.finish("taggedFields" if flexible else "members")
    return GroupMetadataValue(
        version,
        h.protocol_type,
        h.generation,
        h.protocol,
        h.leader,
        h.current_state_timestamp,
        tuple(members),
    )


# --- KIP-848 consumer group records (apiKey 3, 5, 7, 8; all flexible, version 0) ----------


def _read_topic_partitions(
    r: _Reader, field: str, epochs: dict[str, tuple[int, ...]] | None = None
) -> dict[str, tuple[int, ...]]:
    """A compact array of {TopicId uuid, Partitions []int32, tagged fields}."""
    out: dict[str, tuple[int, ...]] = {}
    n = r.compact_array(field, 1)
    for i in range(n):
        try:
            topic_id = r.uuid("topicId")
            parts = r.int32_array(r.compact_array("partitions", 4), "partitions")
            tagged = r.tagged_fields(
                "taggedFields",
                {0: _read_assignment_epochs} if epochs is not None else None,
            )
        except _Fail as exc:
            raise exc.under(f"{field}[{i}].") from None
        out[topic_id] = out.get(topic_id, ()) + parts
        if epochs is not None and tagged.get(0) is not None:
            epochs[topic_id] = epochs.get(topic_id, ()) + tagged[0]
    return out


def _read_assignment_epochs(r: _Reader) -> tuple[int, ...] | None:
    n = r.compact_array("assignmentEpochs", 4, nullable=True)
    return None if n is None else r.int32_array(n, "assignmentEpochs")


def _read_classic_member_metadata(r: _Reader) -> tuple[int, tuple[ClassicProtocol, ...]] | None:
    """Tagged nullable struct (KIP-893): a varint 0 (null) or 1, then the struct."""
    present = r.uvarint("present")
    if present == 0:
        return None
    if present != 1:
        raise _Fail(SkipReason.INVALID_TAGGED_FIELD, "present", f"marker {present}")
    session_timeout = r.int32("sessionTimeoutMs")
    protocols = []
    for i in range(r.compact_array("supportedProtocols", 1)):
        try:
            name = r.compact_string("name")
            metadata = r.compact_bytes("metadata")
            r.tagged_fields("taggedFields")
        except _Fail as exc:
            raise exc.under(f"supportedProtocols[{i}].") from None
        protocols.append(ClassicProtocol(name, metadata))
    r.tagged_fields("taggedFields")
    return session_timeout, tuple(protocols)


def _read_kip848_value(
    r: _Reader, rtype: int, group: str, member: str | None, pos: dict[str, int]
) -> Event:
    if rtype == 3:
        epoch = r.int32("epoch")
        tagged = r.tagged_fields("taggedFields", {0: lambda s: s.int64("metadataHash")})
        r.finish("taggedFields")
        metadata_hash = tagged.get(0, 0)
        return ConsumerGroupMetadata(group=group, epoch=epoch, metadata_hash=metadata_hash, **pos)
    assert member is not None
    if rtype == 5:
        instance_id = r.compact_string("instanceId", True)
        rack_id = r.compact_string("rackId", True)
        client_id = r.compact_string("clientId")
        client_host = r.compact_string("clientHost")
        names = []
        for i in range(r.compact_array("subscribedTopicNames", 1)):
            names.append(r.compact_string(f"subscribedTopicNames[{i}]"))
        regex = r.compact_string("subscribedTopicRegex", True)
        rebalance_timeout = r.int32("rebalanceTimeoutMs")
        assignor = r.compact_string("serverAssignor", True)
        tagged = r.tagged_fields("taggedFields", {0: _read_classic_member_metadata})
        r.finish("taggedFields")
        classic = tagged.get(0)
        return ConsumerGroupMemberMetadata(
            group=group,
            member_id=member,
            instance_id=instance_id,
            rack_id=rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=tuple(names),
            subscribed_topic_regex=regex,
            rebalance_timeout_ms=rebalance_timeout,
            server_assignor=assignor,
            classic_session_timeout_ms=None if classic is None else classic[0],
            classic_protocols=None if classic is None else classic[1],
            **pos,
        )
    if rtype == 7:
        parts = _read_topic_partitions(r, "topicPartitions")
        r.tagged_fields("taggedFields")
        r.finish("taggedFields")
        return ConsumerGroupTargetAssignment(group=group, member_id=member, partitions=parts, **pos)
    member_epoch = r.int32("memberEpoch")
    previous_epoch = r.int32("previousMemberEpoch")
    state = r.int8("state")
    epochs: dict[str, tuple[int, ...]] = {}
    pending_epochs: dict[str, tuple[int, ...]] = {}
    assigned = _read_topic_partitions(r, "assignedPartitions", epochs)
    pending = _read_topic_partitions(r, "partitionsPendingRevocation", pending_epochs)
    r.tagged_fields("taggedFields")
    r.finish("taggedFields")
    return ConsumerGroupCurrentAssignment(
        group=group,
        member_id=member,
        member_epoch=member_epoch,
        previous_member_epoch=previous_epoch,
        state=state,
        partitions=assigned,
        pending_revocation=pending,
        assignment_epochs=epochs,
        pending_revocation_epochs=pending_epochs,
        **pos,
    )


# --- one whole record ----------------------------------------------------------------------

_COMMIT = 0
_EVENT = 1
_SKIP = 2


def _value_version(value: bytes, valid: range) -> tuple[_Reader, int]:
    r = _Reader(value)
    version = r.int16("value.version")
    if version not in valid:
        raise _Fail(SkipReason.UNKNOWN_VALUE_VERSION, "value.version", f"version {version}")
    return r, version


def _decode_one(
    key: Any,
    value: Any,
    pos: dict[str, int],
    commit_key: Callable[[bytes], CommitKey],
) -> tuple[str | None, int, Any]:
    """Decode one record: (record type label or None, _COMMIT/_EVENT/_SKIP, payload).

    For _COMMIT the payload is (CommitKey, OffsetCommitValue, shape); for _EVENT an Event;
    for _SKIP a Skipped. ``commit_key`` parses (and may cache) the body of a commit key.
    """
    if key is None or len(key) == 0:
        return None, _SKIP, Skipped(SkipReason.MISSING_KEY, "key", "record has no key")
    if not isinstance(key, bytes):
        key = bytes(key)
    if value is not None and not isinstance(value, bytes):
        value = bytes(value)
    if len(key) < 2:
        return None, _SKIP, Skipped(_TRUNCATED, "key.type", "key shorter than its int16 type")
    rtype = _I16.unpack_from(key)[0]
    label = RECORD_TYPE_LABELS.get(rtype)
    if label is None:
        reason = SkipReason.UNKNOWN_KEY_VERSION
        return UNKNOWN_RECORD_TYPE, _SKIP, Skipped(reason, "key.type", f"record type {rtype}")
    if rtype in _IGNORED_TYPES:
        return label, _SKIP, Skipped(SkipReason.IGNORED_RECORD_TYPE, "key.type", label)
    stage = "key."
    try:
        if rtype in _COMMIT_TYPES:
            ck = commit_key(key)
            if not value:
                return label, _EVENT, OffsetTombstone(key=ck, **pos)
            stage = ""
            r, version = _value_version(value, _OFFSET_COMMIT_VALUE_VERSIONS)
            stage = "value."
            commit, shape = _read_offset_commit_value(r, version)
            return label, _COMMIT, (ck, commit, shape)
        kr = _Reader(key, 2)
        if rtype == _GROUP_TYPE:
            group = kr.string("group")
            kr.finish("group")
            if not value:
                return label, _EVENT, GroupTombstone(group=group, **pos)
            stage = ""
            r, version = _value_version(value, _GROUP_METADATA_VALUE_VERSIONS)
            stage = "value."
            gm = _read_group_metadata_value(r, version)
            return label, _EVENT, GroupMetadata(group=group, value=gm, **pos)
        # KIP-848 records: GroupId [, MemberId]
        group = kr.string("groupId")
        member = kr.string("memberId") if rtype in _KIP848_MEMBER_KEYED else None
        kr.finish("memberId" if member is not None else "groupId")
        if not value:
            return (
                label,
                _EVENT,
                ConsumerGroupRecordTombstone(
                    record_type=label, group=group, member_id=member, **pos
                ),
            )
        stage = ""
        r, _version = _value_version(value, range(1))
        stage = "value."
        return label, _EVENT, _read_kip848_value(r, rtype, group, member, pos)
    except _Fail as exc:
        return label, _SKIP, exc.under(stage).skipped()


def _parse_commit_key(key: bytes) -> CommitKey:
    return _read_commit_key_body(_Reader(key, 2))


# --- the batch decoder ---------------------------------------------------------------------


class ConsumerOffsetsDecoder:
    """Stateful batch decoder: caches parsed commit keys and learned value layouts.

    One instance per ``__consumer_offsets`` reader; not thread-safe. The key cache is bounded
    by ``max_cached_keys`` (cleared when full, so memory stays bounded even as groups churn).
    """

    def __init__(self, *, max_cached_keys: int = 1_000_000, max_layouts: int = 4096) -> None:
        self.max_cached_keys = max_cached_keys
        self.max_layouts = max_layouts
        self._commit_keys: dict[bytes, CommitKey] = {}
        self._strings: dict[str, str] = {}
        self._layouts: dict[int, _Layout] = {}
        self._batches = 0
        self._records = 0
        self._commits = 0
        self._key_cache_resets = 0
        self._by_type: dict[str, int] = {}
        self._by_reason: dict[str, int] = {}
        self._by_kind: dict[str, int] = {}

    # The hot loop. Keep it flat: every attribute lookup here costs on a million records.
    def decode_batch(
        self,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        partitions: Sequence[int] | int,
        offsets: Sequence[int],
    ) -> DecodedBatch:
        """Decode parallel sequences of record keys and values, with each record's
        ``__consumer_offsets`` partition (or one int for the whole batch) and offset.

        Never raises for bad records; raises ValueError only if the sequences differ in length.
        """
        n = len(keys)
        if len(values) != n or len(offsets) != n:
            raise ValueError("keys, values and offsets must have the same length")
        if isinstance(partitions, int):
            parts: Any = repeat(partitions, n)
        elif len(partitions) != n:
            raise ValueError("partitions must be an int or have the same length as keys")
        else:
            parts = partitions
        batch = DecodedBatch(total=n)
        add_key = batch.commit_keys.append
        add_offset = batch.commit_offsets.append
        add_ts = batch.commit_timestamps.append
        add_order = batch.commit_orders.append
        add_part = batch.commit_source_partitions.append
        # Any: the loop relies on TypeError/IndexError for None, short or odd inputs.
        cached_key: Callable[[Any], CommitKey | None] = self._commit_keys.get
        layout: Callable[[int], Any] = self._layouts.get
        slow = self._slow
        slow_commits = 0
        v: Any
        for k, v, p, o in zip(keys, values, parts, offsets, strict=False):
            try:
                ck = cached_key(k)
                if ck is not None:
                    unpack, version, check = layout((len(v) << 8) | v[1])
                    ver, offset, found, ts = unpack(v)
                    if ver == version and found == check:
                        add_key(ck)
                        add_offset(offset)
                        add_ts(ts)
                        add_order(o)
                        add_part(p)
                        continue
            except (TypeError, IndexError, struct.error):
                pass  # no cached key/layout, a tombstone, an unhashable key: the slow path
            slow_commits += slow(batch, k, v, p, o)
        fast = len(batch.commit_offsets) - slow_commits
        if fast:
            batch.record_types[_COMMIT_LABEL] = batch.record_types.get(_COMMIT_LABEL, 0) + fast
        self._account(batch)
        return batch

    def _slow(self, batch: DecodedBatch, k: Any, v: Any, p: int, o: int) -> int:
        """Decode one record the careful way; returns 1 if it added a commit."""
        pos = {"order": o, "source_partition": p, "commit_index": len(batch.commit_offsets)}
        try:
            label, kind, payload = _decode_one(k, v, pos, self._commit_key)
        except Exception as exc:  # a decoder bug must not take the service down
            label, kind = None, _SKIP
            payload = Skipped(SkipReason.INTERNAL_ERROR, "", repr(exc))
        if label is not None:
            batch.record_types[label] = batch.record_types.get(label, 0) + 1
        if kind == _COMMIT:
            ck, value, shape = payload
            batch.commit_keys.append(ck)
            batch.commit_offsets.append(value.offset)
            batch.commit_timestamps.append(value.commit_timestamp)
            batch.commit_orders.append(o)
            batch.commit_source_partitions.append(p)
            self._learn(v, shape)
            return 1
        if kind == _EVENT:
            batch.events.append(payload)
            return 0
        reason = payload.reason
        batch.skipped[reason] = batch.skipped.get(reason, 0) + 1
        if reason not in batch.skip_samples:
            batch.skip_samples[reason] = SkippedRecord(
                reason, payload.field, payload.detail, o, p, label
            )
        return 0

    def _commit_key(self, key: bytes) -> CommitKey:
        ck = self._commit_keys.get(key)
        if ck is not None:
            return ck
        ck = _parse_commit_key(key)
        strings = self._strings
        ck = CommitKey(
            strings.setdefault(ck.group, ck.group),
            strings.setdefault(ck.topic, ck.topic),
            ck.partition,
        )
        if len(self._commit_keys) >= self.max_cached_keys:
            self._commit_keys.clear()
            self._strings.clear()
            self._key_cache_resets += 1
        self._commit_keys[key] = ck
        return ck

    def _learn(self, value: bytes, shape: _Shape) -> None:
        """Teach the fast path the layout of a value the slow path just accepted."""
        slot = (len(value) << 8) | value[1]
        if slot in self._layouts or len(self._layouts) >= self.max_layouts:
            return
        fast = _fast_layout(shape, len(value))
        if fast is not None:
            self._layouts[slot] = fast

    def _account(self, batch: DecodedBatch) -> None:
        self._batches += 1
        self._records += batch.total
        self._commits += len(batch.commit_offsets)
        for counts, into in ((batch.record_types, self._by_type), (batch.skipped, self._by_reason)):
            for label, count in counts.items():
                into[label] = into.get(label, 0) + count
        for event in batch.events:
            self._by_kind[event.kind] = self._by_kind.get(event.kind, 0) + 1

    def decode_record(
        self, key: bytes | None, value: bytes | None, partition: int = -1, offset: int = -1
    ) -> Record | Skipped:
        """Decode one record into a typed object (tooling, tests); not for the hot path."""
        return _record(key, value, partition, offset, self._commit_key)

    @property
    def stats(self) -> DecoderStats:
        """A snapshot of the cumulative counters (records, commits, per type/reason/kind)."""
        return DecoderStats(
            batches=self._batches,
            records=self._records,
            commits=self._commits,
            records_by_type=dict(self._by_type),
            skipped_by_reason=dict(self._by_reason),
            events_by_kind=dict(self._by_kind),
            key_cache_size=len(self._commit_keys),
            key_cache_resets=self._key_cache_resets,
            layout_cache_size=len(self._layouts),
        )

    def clear_caches(self) -> None:
        """Drop cached keys and layouts (they are rebuilt on demand)."""
        self._commit_keys.clear()
        self._strings.clear()
        self._layouts.clear()


# --- single-record and fragment entry points ---------------------------------------------


def _record(
    key: Any, value: Any, partition: int, offset: int, commit_key: Callable[[bytes], CommitKey]
) -> Record | Skipped:
    pos = {"order": offset, "source_partition": partition, "commit_index": 0}
    try:
        _label, kind, payload = _decode_one(key, value, pos, commit_key)
    except Exception as exc:
        return Skipped(SkipReason.INTERNAL_ERROR, "", repr(exc))
    if kind == _COMMIT:
        ck, commit, _shape = payload
        return OffsetCommit(ck, commit, offset, partition)
    return payload  # type: ignore[no-any-return]


def decode_record(
    key: bytes | None, value: bytes | None, partition: int = -1, offset: int = -1
) -> Record | Skipped:
    """Decode one whole ``__consumer_offsets`` record (key and value with their prefixes)."""
    return _record(key, value, partition, offset, _parse_commit_key)


def _run(read: Callable[[_Reader], Any], data: Any, whole: bool = True) -> Any:
    """Run a reader over ``data``; map failures (and bugs) to Skipped; check for leftovers."""
    try:
        r = _Reader(bytes(data))
        result = read(r)
        if whole:
            r.finish("end")
        return result
    except _Fail as exc:
        return exc.skipped()
    except Exception as exc:
        return Skipped(SkipReason.INTERNAL_ERROR, "", repr(exc))


def decode_key(key: bytes) -> CommitKey | tuple[int, str, str | None] | Skipped:
    """Decode a key with its int16 record type: a CommitKey for types 0/1, else
    (record type, group, member id or None) for types 2-8; other types are Skipped."""

    def read(r: _Reader) -> Any:
        rtype = r.int16("type")
        if rtype in _COMMIT_TYPES:
            return _read_commit_key_body(r)
        if rtype == _GROUP_TYPE:
            return rtype, r.string("group"), None
        if rtype in _KIP848_DECODED or rtype in (4, 6):
            group = r.string("groupId")
            return rtype, group, r.string("memberId") if rtype in _KIP848_MEMBER_KEYED else None
        reason = (
            SkipReason.IGNORED_RECORD_TYPE
            if rtype in RECORD_TYPE_LABELS
            else SkipReason.UNKNOWN_KEY_VERSION
        )
        raise _Fail(reason, "type", f"record type {rtype}")

    return _run(read, key)  # type: ignore[no-any-return]


def decode_offset_commit_key(body: bytes) -> CommitKey | Skipped:
    """OffsetCommitKey fields (group, topic, partition) without the int16 record type."""
    return _run(_read_commit_key_body, body)  # type: ignore[no-any-return]


def decode_offset_commit_value(
    value: bytes, version: int | None = None
) -> OffsetCommitValue | Skipped:
    """An OffsetCommitValue; with ``version`` given, ``value`` is the body without its prefix."""

    def read(r: _Reader) -> OffsetCommitValue:
        v = r.int16("version") if version is None else version
        if v not in _OFFSET_COMMIT_VALUE_VERSIONS:
            raise _Fail(SkipReason.UNKNOWN_VALUE_VERSION, "version", f"version {v}")
        return _read_offset_commit_value(r, v)[0]

    return _run(read, value)  # type: ignore[no-any-return]


def decode_group_metadata_value(
    value: bytes, version: int | None = None
) -> GroupMetadataValue | Skipped:
    """A GroupMetadataValue; with ``version`` given, ``value`` is the body without its prefix."""

    def read(r: _Reader) -> GroupMetadataValue:
        v = r.int16("version") if version is None else version
        if v not in _GROUP_METADATA_VALUE_VERSIONS:
            raise _Fail(SkipReason.UNKNOWN_VALUE_VERSION, "version", f"version {v}")
        return _read_group_metadata_value(r, v)

    return _run(read, value)  # type: ignore[no-any-return]


def decode_group_metadata_header(body: bytes, version: int) -> GroupMetadataHeader | Skipped:
    """The GroupMetadataValue fields before ``members`` (body without the version prefix).

    Bytes after the header (the member array) are not looked at.
    """
    if version not in _GROUP_METADATA_VALUE_VERSIONS:
        return Skipped(SkipReason.UNKNOWN_VALUE_VERSION, "version", f"version {version}")
    return _run(lambda r: _read_group_header(r, version), body, whole=False)  # type: ignore


def decode_group_member(
    body: bytes, version: int, protocol_type: str = "consumer"
) -> GroupMember | Skipped:
    """One GroupMetadataValue member entry laid out for value ``version``."""
    if version not in _GROUP_METADATA_VALUE_VERSIONS:
        return Skipped(SkipReason.UNKNOWN_VALUE_VERSION, "version", f"version {version}")
    consumer = protocol_type == "consumer"
    return _run(lambda r: _read_member(r, version, consumer), body)  # type: ignore


def decode_consumer_assignment(
    data: bytes, version: int | None = None
) -> ConsumerAssignment | Skipped:
    """A consumer-protocol assignment; with ``version`` given, ``data`` lacks its int16 prefix."""
    return _run(lambda r: _read_assignment(r, version), data, whole=False)  # type: ignore


def decode_string(data: bytes) -> str | None | Skipped:
    """A STRING (int16 length, -1 = null) filling ``data`` exactly."""
    return _run(lambda r: r.string("string", True), data)  # type: ignore[no-any-return]


def decode_compact_string(data: bytes) -> str | None | Skipped:
    """A COMPACT_STRING (unsigned varint length + 1, 0 = null) filling ``data`` exactly."""
    return _run(lambda r: r.compact_string("string", True), data)  # type: ignore

"""``__consumer_offsets`` records encoded from Kafka's schemas (reference/
kafka-coordinator-schemas), written independently of the decoder, so that a round trip checks
the decoder against a second reading of the schemas: offset commits (key versions 0-1, value
versions 0-4), classic group metadata, and the KIP-848 consumer-group records."""

from __future__ import annotations

import base64
import dataclasses
import struct


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def cstring(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def blob(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def cblob(b: bytes | None) -> bytes:
    return uvarint(0) if b is None else uvarint(len(b) + 1) + b


def array(items: list[bytes]) -> bytes:
    return i32(len(items)) + b"".join(items)


def carray(items: list[bytes] | None) -> bytes:
    return uvarint(0) if items is None else uvarint(len(items) + 1) + b"".join(items)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


def uuid_bytes(topic_id: str) -> bytes:
    return base64.urlsafe_b64decode(topic_id + "==")


def uuid_str(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def commit_key(group: str, topic: str, partition: int, key_type: int = 1) -> bytes:
    """LegacyOffsetCommitKey (0) / OffsetCommitKey (1)."""
    return i16(key_type) + string(group) + string(topic) + i32(partition)


def offset_value(
    version: int,
    offset: int,
    metadata: str = "",
    commit_ts: int = 0,
    *,
    expire_ts: int = -1,
    leader_epoch: int = -1,
    topic_id: str | None = None,
    extra_tags: dict[int, bytes] | None = None,
    prefix: bool = True,
) -> bytes:
    """OffsetCommitValue v0-v4 (expireTimestamp only in v1, leaderEpoch 3+, flexible 4+)."""
    body = i64(offset)
    if version >= 3:
        body += i32(leader_epoch)
    body += cstring(metadata) if version >= 4 else string(metadata)
    body += i64(commit_ts)
    if version == 1:
        body += i64(expire_ts)
    if version >= 4:
        fields = dict(extra_tags or {})
        if topic_id is not None:
            fields[0] = uuid_bytes(topic_id)
        body += tags(fields)
    return (i16(version) if prefix else b"") + body


def group_key(group: str) -> bytes:
    return i16(2) + string(group)


def consumer_assignment(
    version: int, partitions: dict[str, list[int]], user_data: bytes | None = b""
) -> bytes:
    """ConsumerProtocolAssignment (same layout in every version)."""
    topics = [string(t) + array([i32(p) for p in ps]) for t, ps in partitions.items()]
    return i16(version) + array(topics) + blob(user_data)


@dataclasses.dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None
    rebalance_timeout: int = -1


def group_member(version: int, m: Member) -> bytes:
    flexible = version >= 4
    s, b = (cstring, cblob) if flexible else (string, blob)
    out = s(m.member_id)
    if version >= 3:
        out += s(m.group_instance_id)
    out += s(m.client_id) + s(m.client_host)
    if version >= 1:
        out += i32(m.rebalance_timeout)
    out += i32(m.session_timeout) + b(m.subscription) + b(m.assignment)
    if flexible:
        out += tags()
    return out


def group_value(
    version: int,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    state_ts: int,
    members: list[Member],
    prefix: bool = True,
) -> bytes:
    """GroupMetadataValue v0-v4."""
    flexible = version >= 4
    s = cstring if flexible else string
    out = s(protocol_type) + i32(generation) + s(protocol) + s(leader)
    if version >= 2:
        out += i64(state_ts)
    encoded = [group_member(version, m) for m in members]
    out += carray(encoded) if flexible else array(encoded)
    if flexible:
        out += tags()
    return (i16(version) if prefix else b"") + out


def kip848_key(record_type: int, group: str, member: str | None = None) -> bytes:
    return i16(record_type) + string(group) + (b"" if member is None else string(member))


def cg_metadata_value(epoch: int, metadata_hash: int | None = None) -> bytes:
    fields = {} if metadata_hash is None else {0: i64(metadata_hash)}
    return i16(0) + i32(epoch) + tags(fields)


def cg_member_value(
    instance_id: str | None,
    rack_id: str | None,
    client_id: str,
    client_host: str,
    topics: list[str],
    regex: str | None,
    rebalance_timeout: int,
    assignor: str | None,
    classic: tuple[int, list[tuple[str, bytes]]] | None = None,
) -> bytes:
    out = cstring(instance_id) + cstring(rack_id) + cstring(client_id) + cstring(client_host)
    out += carray([cstring(t) for t in topics]) + cstring(regex) + i32(rebalance_timeout)
    out += cstring(assignor)
    fields = {}
    if classic is not None:
        session, protocols = classic
        struct_bytes = i32(session)
        struct_bytes += carray([cstring(n) + cblob(md) + tags() for n, md in protocols])
        struct_bytes += tags()
        fields[0] = uvarint(1) + struct_bytes  # KIP-893: tagged nullable struct marker
    return i16(0) + out + tags(fields)


def topic_partitions(
    parts: dict[str, list[int]], epochs: dict[str, list[int] | None] | None = None
) -> bytes:
    items = []
    for topic_id, ps in parts.items():
        fields = {}
        if epochs and topic_id in epochs:
            e = epochs[topic_id]
            fields[0] = carray(None if e is None else [i32(x) for x in e])
        items.append(uuid_bytes(topic_id) + carray([i32(p) for p in ps]) + tags(fields))
    return carray(items)


def cg_target_value(parts: dict[str, list[int]]) -> bytes:
    return i16(0) + topic_partitions(parts) + tags()


def cg_current_value(
    member_epoch: int,
    previous_epoch: int,
    state: int,
    assigned: dict[str, list[int]],
    pending: dict[str, list[int]],
    epochs: dict[str, list[int] | None] | None = None,
) -> bytes:
    out = i32(member_epoch) + i32(previous_epoch) + i8(state)
    out += topic_partitions(assigned, epochs) + topic_partitions(pending, epochs)
    return i16(0) + out + tags()

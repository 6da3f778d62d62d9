"""Typed outputs of the ``__consumer_offsets`` decoder.

Offset commits, by far the most frequent record, come out of :class:`DecodedBatch` as parallel
lists (struct-of-arrays) so a batch of a million commits costs a handful of list appends per
record instead of an object each. Everything rarer (group metadata, tombstones, KIP-848 records)
is a small frozen dataclass that carries its position in the topic, so a consumer can apply it
exactly between the commits that preceded and followed it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter
from typing import ClassVar, NamedTuple


class SkipReason(StrEnum):
    """Why a record was skipped: a small, stable label set exported as Prometheus labels."""

    MISSING_KEY = "missing_key"
    """The record has no key (None or empty); every coordinator record has one."""
    TRUNCATED = "truncated"
    """The bytes ended before the schema was satisfied (a length or count overruns the data)."""
    TRAILING_BYTES = "trailing_bytes"
    """Bytes left over after the last field where the (non-flexible) schema allows none."""
    INVALID_LENGTH = "invalid_length"
    """A length or count that no writer produces: negative (not -1), or a malformed varint."""
    INVALID_NULL = "invalid_null"
    """A null (-1 / compact 0) in a field the schema declares non-nullable."""
    INVALID_UTF8 = "invalid_utf8"
    """An identifier (group, topic, member id ...) that is not valid UTF-8."""
    INVALID_TAGGED_FIELD = "invalid_tagged_field"
    """A known tagged field whose content does not match its declared size or type."""
    INVALID_ASSIGNMENT = "invalid_assignment"
    """A consumer-protocol member assignment inside group metadata that does not decode."""
    UNKNOWN_KEY_VERSION = "unknown_key_version"
    """A record type (key int16 prefix) that no known Kafka schema uses."""
    UNKNOWN_VALUE_VERSION = "unknown_value_version"
    """A value version outside the schema's validVersions for that record type."""
    IGNORED_RECORD_TYPE = "ignored_record_type"
    """A known record type this service has no use for (share/streams groups, ...)."""
    INTERNAL_ERROR = "internal_error"
    """A bug in the decoder: an unexpected exception, contained so the service keeps running."""


SKIP_REASONS: tuple[str, ...] = tuple(r.value for r in SkipReason)
"""Every skip reason label, so an exporter can create all series up front (at zero)."""

RECORD_TYPE_LABELS: dict[int, str] = {
    0: "offset_commit",  # LegacyOffsetCommitKey: same key layout, counted with apiKey 1
    1: "offset_commit",
    2: "group_metadata",
    3: "consumer_group_metadata",
    4: "consumer_group_partition_metadata",
    5: "consumer_group_member_metadata",
    6: "consumer_group_target_assignment_metadata",
    7: "consumer_group_target_assignment_member",
    8: "consumer_group_current_member_assignment",
    10: "share_group_member_metadata",
    11: "share_group_metadata",
    12: "share_group_target_assignment_metadata",
    13: "share_group_target_assignment_member",
    14: "share_group_current_member_assignment",
    15: "share_group_state_partition_metadata",
    16: "consumer_group_regular_expression",
    17: "streams_group_metadata",
    19: "streams_group_member_metadata",
    20: "streams_group_target_assignment_metadata",
    21: "streams_group_target_assignment_member",
    22: "streams_group_current_member_assignment",
    23: "streams_group_topology",
}
"""apiKey (the int16 key prefix) → record type label (Kafka's schema name in snake case)."""

UNKNOWN_RECORD_TYPE = "unknown"
"""record_types label for a key prefix that no known schema uses."""


class CommitKey(NamedTuple):
    """The (group, topic, partition) an offset commit is for; one shared object per raw key."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Skipped:
    """The answer of a single-record or fragment decode that failed: never an exception."""

    reason: SkipReason
    field: str
    """Schema field path where decoding stopped, e.g. ``members[0].clientHost``."""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A sample skipped record of a batch (the first one per reason), for logging once per kind."""

    reason: SkipReason
    field: str
    detail: str
    order: int
    source_partition: int
    record_type: str | None


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """OffsetCommitValue fields; ``None`` where the value version has no such field."""

    version: int
    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None
    topic_id: str | None
    """Tagged field 0 of v4 (Kafka Uuid, base64url as Kafka prints it), if present."""


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """One offset commit as a typed object: for single-record decoding and tooling only.

    The batch API never builds these; it fills :class:`DecodedBatch`'s commit columns.
    """

    key: CommitKey
    value: OffsetCommitValue
    order: int = -1
    source_partition: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    """A consumer-protocol member assignment (ConsumerProtocolAssignment)."""

    version: int
    partitions: dict[str, tuple[int, ...]]
    """Topic → assigned partition ids, in encoded order."""
    user_data: bytes | None


class PartitionOwner(NamedTuple):
    """Who consumes a partition, from a classic group's member assignments (Burrow's owner)."""

    topic: str
    partition: int
    member_id: str
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member of a classic group (GroupMetadataValue.members[])."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int | None
    session_timeout: int
    subscription: bytes
    """Raw ConsumerProtocolSubscription bytes: not needed for lag, kept for tooling."""
    assignment_bytes: bytes
    assignment: ConsumerAssignment | None
    """Decoded only for protocol type ``consumer`` with a non-empty assignment."""


@dataclass(frozen=True, slots=True)
class GroupMetadataHeader:
    """The fields of GroupMetadataValue before its member array."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A whole GroupMetadataValue (the value of a key-type-2 record)."""

    version: int
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: tuple[GroupMember, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Positioned:
    """Where an event sits in ``__consumer_offsets`` and relative to the batch's commits."""

    order: int = -1
    """The record's offset in its ``__consumer_offsets`` partition."""
    source_partition: int = -1
    """The ``__consumer_offsets`` partition it was read from."""
    commit_index: int = 0
    """How many commits of the same batch precede this event (apply those first)."""


@dataclass(frozen=True, slots=True)
class OffsetTombstone(Positioned):
    """An offset commit tombstone: the group's offset for this partition was deleted."""

    kind: ClassVar[str] = "offset_tombstone"
    key: CommitKey


@dataclass(frozen=True, slots=True)
class GroupMetadata(Positioned):
    """A classic group's state snapshot: generation, leader, members and their assignments."""

    kind: ClassVar[str] = "group_metadata"
    group: str
    value: GroupMetadataValue

    def partition_owners(self) -> list[PartitionOwner]:
        """Owner (client id, host) of every partition assigned in this snapshot."""
        owners: list[PartitionOwner] = []
        for m in self.value.members:
            if m.assignment is None:
                continue
            for topic, parts in m.assignment.partitions.items():
                owners.extend(
                    PartitionOwner(topic, p, m.member_id, m.client_id, m.client_host) for p in parts
                )
        return owners


@dataclass(frozen=True, slots=True)
class GroupTombstone(Positioned):
    """A group metadata tombstone: the group was deleted."""

    kind: ClassVar[str] = "group_tombstone"
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata(Positioned):
    """KIP-848 consumer group epoch record (ConsumerGroupMetadataValue, apiKey 3)."""

    kind: ClassVar[str] = "consumer_group_metadata"
    group: str
    epoch: int
    metadata_hash: int
    """Tagged field 0 (Kafka 4.1+, KIP-1101); the schema default 0 when absent."""


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    """One protocol a classic-protocol member of a KIP-848 group supports."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadata(Positioned):
    """KIP-848 member metadata (ConsumerGroupMemberMetadataValue, apiKey 5)."""

    kind: ClassVar[str] = "consumer_group_member_metadata"
    group: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_session_timeout_ms: int | None
    """From tagged ClassicMemberMetadata: set only for members using the classic protocol."""
    classic_protocols: tuple[ClassicProtocol, ...] | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignment(Positioned):
    """KIP-848 target assignment of one member (apiKey 7): topic id → partitions."""

    kind: ClassVar[str] = "consumer_group_target_assignment"
    group: str
    member_id: str
    partitions: dict[str, tuple[int, ...]]
    """Kafka topic id (base64url Uuid) → partition ids."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentAssignment(Positioned):
    """KIP-848 current assignment of one member (apiKey 8): what it owns right now."""

    kind: ClassVar[str] = "consumer_group_current_assignment"
    group: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int
    partitions: dict[str, tuple[int, ...]]
    """Owned partitions: Kafka topic id (base64url Uuid) → partition ids."""
    pending_revocation: dict[str, tuple[int, ...]]
    assignment_epochs: dict[str, tuple[int, ...]]
    """Tagged AssignmentEpochs of owned partitions per topic id (KIP-1251), where present."""
    pending_revocation_epochs: dict[str, tuple[int, ...]]
    """The same for partitions pending revocation."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecordTombstone(Positioned):
    """Tombstone of a KIP-848 record: the group (apiKey 3) or member state (5, 7, 8) is gone."""

    kind: ClassVar[str] = "consumer_group_record_tombstone"
    record_type: str
    group: str
    member_id: str | None


Event = (
    OffsetTombstone
    | GroupMetadata
    | GroupTombstone
    | ConsumerGroupMetadata
    | ConsumerGroupMemberMetadata
    | ConsumerGroupTargetAssignment
    | ConsumerGroupCurrentAssignment
    | ConsumerGroupRecordTombstone
)
"""A decoded record that is not an offset commit."""

Record = OffsetCommit | Event
"""What the single-record decoder returns on success."""

_GROUP = itemgetter(0)
_TOPIC = itemgetter(1)
_PARTITION = itemgetter(2)


@dataclass(slots=True, eq=False)
class DecodedBatch:
    """The result of decoding one batch: commit columns, rarer events, counters.

    Invariant: ``commit_count + len(events) + skipped_total == total``.
    Commits and events are each in input order; ``Positioned.commit_index`` interleaves them.
    """

    commit_keys: list[CommitKey] = field(default_factory=list)
    commit_offsets: list[int] = field(default_factory=list)
    commit_timestamps: list[int] = field(default_factory=list)
    """commitTimestamp (ms) of each commit."""
    commit_orders: list[int] = field(default_factory=list)
    """Offset of each commit record in its ``__consumer_offsets`` partition (Burrow's order)."""
    commit_source_partitions: list[int] = field(default_factory=list)
    """The ``__consumer_offsets`` partition each commit was read from."""
    events: list[Event] = field(default_factory=list)
    record_types: dict[str, int] = field(default_factory=dict)
    """Records per record type label, for every record whose key type could be read."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Skipped records per :class:`SkipReason` label."""
    skip_samples: dict[str, SkippedRecord] = field(default_factory=dict)
    """The first skipped record per reason, for one log line per kind."""
    total: int = 0

    @property
    def commit_count(self) -> int:
        return len(self.commit_offsets)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    @property
    def decoded(self) -> int:
        """Records that became a commit or an event."""
        return len(self.commit_offsets) + len(self.events)

    @property
    def commit_groups(self) -> list[str]:
        return list(map(_GROUP, self.commit_keys))

    @property
    def commit_topics(self) -> list[str]:
        return list(map(_TOPIC, self.commit_keys))

    @property
    def commit_partitions(self) -> list[int]:
        """Topic partition of each commit (not the ``__consumer_offsets`` partition)."""
        return list(map(_PARTITION, self.commit_keys))

    def iter_commits(self) -> Iterator[tuple[CommitKey, int, int, int, int]]:
        """(key, offset, commit timestamp, order, source partition) per commit, in input order."""
        return zip(
            self.commit_keys,
            self.commit_offsets,
            self.commit_timestamps,
            self.commit_orders,
            self.commit_source_partitions,
            strict=True,
        )


@dataclass(frozen=True, slots=True)
class DecoderStats:
    """Cumulative counters of a decoder since it was created, for Prometheus export."""

    batches: int
    records: int
    commits: int
    records_by_type: dict[str, int]
    skipped_by_reason: dict[str, int]
    events_by_kind: dict[str, int]
    key_cache_size: int
    key_cache_resets: int
    layout_cache_size: int

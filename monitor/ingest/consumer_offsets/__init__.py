"""Decoding of Kafka's ``__consumer_offsets`` topic into commits and group events.

Use :class:`ConsumerOffsetsDecoder` per reader of the topic::

    decoder = ConsumerOffsetsDecoder()
    batch = decoder.decode_batch(keys, values, partitions, offsets)
    for key, offset, ts, order, source_partition in batch.iter_commits(): ...
    for event in batch.events: ...  # GroupMetadata, OffsetTombstone, KIP-848 records ...

Decisions where the Kafka schema and Burrow's behaviour (and test vectors) differ; this
package follows the schema:

* OffsetCommitValue version 2 (offset, metadata, commitTimestamp) is decoded; Burrow drops it.
* OffsetCommitValue version 4 is flexible: it must end with a tagged-field section (at least
  one ``00`` byte). Burrow's v4 vector lacks it and is rejected here as ``truncated``.
* COMPACT_STRING lengths are unsigned varints (Burrow reads one byte).
* Null strings decode to ``None`` (Burrow gives ``""``).
* Group metadata is decoded whatever its protocol type (Burrow skips non-``consumer``
  groups before reading members); member assignments are decoded as the consumer protocol
  only for protocol type ``consumer``. A record whose members do not decode is skipped.
* A consumer-protocol assignment that does not decode makes the whole group metadata record
  ``invalid_assignment`` (as Burrow rejects it), rather than publishing a partial snapshot.
* Key types 3, 5, 7, 8 (KIP-848 consumer groups) are decoded into events; other known types
  (4, 6, share and streams groups) are counted as ``ignored_record_type``; unknown ones as
  ``unknown_key_version``. Burrow drops all types above 2.
* Unknown value versions are skipped as ``unknown_value_version`` (KIP-915 would let a broker
  read a newer flexible version as its highest known one; we prefer a visible counter).
* Key types 0 and 1 share one layout and both accept OffsetCommitValue versions 0-4.
* Trailing bytes after the last field of a value or key are ``trailing_bytes``; tagged
  fields must be consistent with their declared sizes.
* Identifiers must be valid UTF-8 (Kafka only ever writes them so); the free-form commit
  ``metadata`` string is decoded leniently, like Kafka's own reader.
"""

from .decoder import (
    ConsumerOffsetsDecoder,
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
from .records import (
    RECORD_TYPE_LABELS,
    SKIP_REASONS,
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
    PartitionOwner,
    Positioned,
    Record,
    Skipped,
    SkippedRecord,
    SkipReason,
)

__all__ = [
    "RECORD_TYPE_LABELS",
    "SKIP_REASONS",
    "UNKNOWN_RECORD_TYPE",
    "ClassicProtocol",
    "CommitKey",
    "ConsumerAssignment",
    "ConsumerGroupCurrentAssignment",
    "ConsumerGroupMemberMetadata",
    "ConsumerGroupMetadata",
    "ConsumerGroupRecordTombstone",
    "ConsumerGroupTargetAssignment",
    "ConsumerOffsetsDecoder",
    "DecodedBatch",
    "DecoderStats",
    "Event",
    "GroupMember",
    "GroupMetadata",
    "GroupMetadataHeader",
    "GroupMetadataValue",
    "GroupTombstone",
    "OffsetCommit",
    "OffsetCommitValue",
    "OffsetTombstone",
    "PartitionOwner",
    "Positioned",
    "Record",
    "SkipReason",
    "Skipped",
    "SkippedRecord",
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

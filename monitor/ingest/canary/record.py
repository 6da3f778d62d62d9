"""The canary record: small, versioned, self-describing.

Kafka 0.9 records have no timestamps, so the send time travels in the payload. Every field a
consumer needs to place the record is inside it (not in the key or the partition it landed
in), because a mirror may write it to another partition of another cluster:

``magic "KM"`` | version (1) | len(instance) | len(stream) | source partition (int32) |
sequence (int64) | run epoch, unix ms (int64) | send time, unix ns (int64) | instance id |
stream | zero padding up to ``record_size``.

* instance id: which monitor sent it (several instances may share a canary topic);
* run epoch: when that instance's probe started, so a restarted monitor tells its own old
  records (sequence numbers restart at 0) from new ones;
* stream: which probe of that instance sent it (``cluster/<name>`` or ``mirror/<name>``), so
  a mirrored canary landing in the destination's own canary topic is not mistaken for the
  destination's records.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

MAGIC = b"KM"
VERSION = 1
_HEADER = struct.Struct(">2sBBBiqqq")
HEADER_SIZE = _HEADER.size


class CanaryRecord(NamedTuple):
    instance: str
    epoch_ms: int
    stream: str
    partition: int
    seq: int
    send_ns: int


def encode(record: CanaryRecord, size: int = 0) -> bytes:
    """The record's bytes, zero-padded to ``size`` (never truncated)."""
    instance = record.instance.encode()
    stream = record.stream.encode()
    if len(instance) > 255 or len(stream) > 255:
        raise ValueError("instance id and stream must be at most 255 bytes")
    raw = _HEADER.pack(
        MAGIC, VERSION, len(instance), len(stream), record.partition, record.seq,
        record.epoch_ms, record.send_ns,
    ) + instance + stream
    return raw + bytes(size - len(raw)) if size > len(raw) else raw


def decode(raw: bytes | None) -> CanaryRecord | None:
    """The record, or None for anything that is not a canary record of a known version."""
    if raw is None or len(raw) < HEADER_SIZE or raw[:2] != MAGIC:
        return None
    magic, version, n_inst, n_orig, partition, seq, epoch, send_ns = _HEADER.unpack_from(raw)
    if version != VERSION or len(raw) < HEADER_SIZE + n_inst + n_orig:
        return None
    start = HEADER_SIZE
    try:
        instance = raw[start : start + n_inst].decode()
        stream = raw[start + n_inst : start + n_inst + n_orig].decode()
    except UnicodeDecodeError:
        return None
    return CanaryRecord(instance, epoch, stream, partition, seq, send_ns)

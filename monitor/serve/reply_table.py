"""The round's rendered ``/status`` and ``/lag`` replies in one file, from the service process
to the HTTP front (``monitor/serve/front.py``), which answers those paths from it.

Why a file: the front runs in another process (its own interpreter lock, so evaluation and
ingest never hold up a reply), and a memory-mapped file hands it a whole round at once with no
per-reply copy, no parsing and no per-entry Python objects: opening a new table is O(1) however
many groups there are, and a lookup is a binary search over the sorted 64-bit hashes of the
paths. The writer replaces the file atomically (write aside, then rename), so the front sees
one round or the next, never a mix.

Layout (little-endian): ``MAGIC``, ``u64 n``, ``n × u64`` path hashes sorted, ``n × u64``
entry offsets in the same order, then the entries, each ``u32 path length``, ``u32 body
length``, the path (UTF-8), the body. Equal hashes are told apart by the stored path.
"""

from __future__ import annotations

import bisect
import hashlib
import mmap
import os
import struct
from collections.abc import Iterable
from pathlib import Path

MAGIC = b"KMREPLY1"
_HEAD = struct.Struct("<8sQ")
_ENTRY = struct.Struct("<II")


def path_hash(path: str) -> int:
    """A stable 64-bit hash of a request path (the same in both processes, unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(path.encode(), digest_size=8).digest(), "little")


def write_table(target: Path, replies: Iterable[tuple[str, bytes]]) -> int:
    """Write ``replies`` (path, whole response body) as the new table at ``target``, replacing
    the old one atomically. Returns how many entries it holds."""
    keyed = sorted((path_hash(p), p.encode(), body) for p, body in replies)
    n = len(keyed)
    hashes = [h for h, _, _ in keyed]
    offsets: list[int] = []
    blobs: list[bytes] = []
    at = _HEAD.size + 16 * n
    for _, path, body in keyed:
        offsets.append(at)
        blobs += [_ENTRY.pack(len(path), len(body)), path, body]
        at += _ENTRY.size + len(path) + len(body)
    aside = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(aside, "wb") as f:
        f.write(_HEAD.pack(MAGIC, n))
        f.write(struct.pack(f"<{n}Q", *hashes))
        f.write(struct.pack(f"<{n}Q", *offsets))
        f.writelines(blobs)
    os.replace(aside, target)
    return n


class ReplyTable:
    """A table opened read-only; :meth:`get` finds a path's body (None: not in this round's
    table). Close it once no lookup is running (lookups return copies)."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _HEAD.size:
                raise ValueError(f"{path}: not a reply table (too short)")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        magic, n = _HEAD.unpack_from(self._map, 0)
        if magic != MAGIC or _HEAD.size + 16 * n > size:
            self._map.close()
            raise ValueError(f"{path}: not a reply table")
        self.size = n
        view = memoryview(self._map)
        self._hashes = view[_HEAD.size:_HEAD.size + 8 * n].cast("Q")
        self._offsets = view[_HEAD.size + 8 * n:_HEAD.size + 16 * n].cast("Q")

    def get(self, path: str) -> bytes | None:
        key = path_hash(path)
        wanted = path.encode()
        i = bisect.bisect_left(self._hashes, key)
        while i < self.size and self._hashes[i] == key:
            at = self._offsets[i]
            path_len, body_len = _ENTRY.unpack_from(self._map, at)
            start = at + _ENTRY.size
            if self._map[start:start + path_len] == wanted:
                return self._map[start + path_len:start + path_len + body_len]
            i += 1
        return None

    def close(self) -> None:
        self._hashes.release()
        self._offsets.release()
        self._map.close()

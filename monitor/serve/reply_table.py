"""The round's rendered ``/status`` and ``/lag`` replies in one file, from the service process
to the HTTP front (``monitor/serve/front.py``), which answers those paths from it.

Why a file: the front runs in another process (its own interpreter lock, so evaluation and
ingest never hold up a reply), and a memory-mapped file hands it a whole round at once with no
per-reply copy, no parsing and no per-entry Python objects: opening a new table is O(1) however
many groups there are, and a lookup is a binary search over the sorted 64-bit hashes of the
paths. The writer replaces the file atomically (write aside, then rename), so the front sees
one round or the next, never a mix. Entries are written as they are rendered, so the service
never holds a round's replies (~46 MB at 100k group-partitions); the index follows them.

Layout (little-endian): ``MAGIC``, ``u64 n``, ``u64 index offset``, the entries, each ``u32
path length``, ``u32 body length``, the path (UTF-8), the body; then the index: ``n × u64``
path hashes sorted, ``n × u64`` entry offsets in the same order. Equal hashes are told apart
by the stored path.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import mmap
import os
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

MAGIC = b"KMREPLY2"
_HEAD = struct.Struct("<8sQQ")
_ENTRY = struct.Struct("<II")


def path_hash(path: str) -> int:
    """A stable 64-bit hash of a request path (the same in both processes, unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(path.encode(), digest_size=8).digest(), "little")


class TableWriter:
    """A new table at ``target``, written aside entry by entry: :meth:`commit` puts it in
    place atomically, :meth:`abort` (or leaving a ``with`` block on an error) removes it.
    Adding a path twice keeps the first body."""

    def __init__(self, target: Path) -> None:
        self.target = target
        fd, aside = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        self._aside = Path(aside)  # one of its own: two writers never share a file
        self._file: BinaryIO | None = os.fdopen(fd, "wb")
        self._file.write(_HEAD.pack(MAGIC, 0, 0))
        self._at = _HEAD.size
        self._index: dict[str, tuple[int, int]] = {}  # path -> (hash, entry offset)

    def __contains__(self, path: str) -> bool:
        return path in self._index

    def add(self, path: str, body: bytes) -> None:
        assert self._file is not None, "the table is already committed or aborted"
        if path in self._index:
            return
        encoded = path.encode()
        self._index[path] = (path_hash(path), self._at)
        self._file.write(_ENTRY.pack(len(encoded), len(body)))
        self._file.write(encoded)
        self._file.write(body)
        self._at += _ENTRY.size + len(encoded) + len(body)

    def commit(self) -> int:
        """Write the index and replace the old table. Returns how many entries it holds."""
        assert self._file is not None, "the table is already committed or aborted"
        keyed = sorted(self._index.values())
        n = len(keyed)
        pad = -self._at % 8  # the index 8-byte aligned, as the reader's casts like it
        try:
            self._file.write(bytes(pad))
            self._file.write(struct.pack(f"<{n}Q", *(h for h, _ in keyed)))
            self._file.write(struct.pack(f"<{n}Q", *(at for _, at in keyed)))
            self._file.seek(0)
            self._file.write(_HEAD.pack(MAGIC, n, self._at + pad))
            self._file.close()
            self._file = None
            os.replace(self._aside, self.target)
        except BaseException:
            self.abort()
            raise
        return n

    def abort(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        with contextlib.suppress(OSError):
            self._aside.unlink()

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            self.abort()


def write_table(target: Path, replies: Iterable[tuple[str, bytes]]) -> int:
    """Write ``replies`` (path, whole response body) as the new table at ``target``, replacing
    the old one atomically. Returns how many entries it holds."""
    with TableWriter(target) as table:
        for path, body in replies:
            table.add(path, body)
        return table.commit()


class ReplyTable:
    """A table opened read-only; :meth:`get` finds a path's body (None: not in this round's
    table). Close it once no lookup is running (lookups return copies)."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _HEAD.size:
                raise ValueError(f"{path}: not a reply table (too short)")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        magic, n, index = _HEAD.unpack_from(self._map, 0)
        if magic != MAGIC or index < _HEAD.size or index + 16 * n > size:
            self._map.close()
            raise ValueError(f"{path}: not a reply table")
        self.size = n
        view = memoryview(self._map)
        self._hashes = view[index:index + 8 * n].cast("Q")
        self._offsets = view[index + 8 * n:index + 16 * n].cast("Q")

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

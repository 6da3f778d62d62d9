"""Exposition text kept compressed, and served as one gzip stream without recompressing.

At 100k group-partitions the rendered text is ~110 MB held from one round to the next, where
compressed it is ~7 MB (level 1 costs ~0.2 s per round there). Each piece is compressed on its
own as raw deflate ended by a sync flush: it is byte-aligned and refers to nothing before it,
so pieces compressed apart, in any combination, concatenate into one valid deflate stream.
A gzip reply is then a header, the pieces as they are, a final empty block and a trailer whose
CRC is combined from the pieces' own (RFC 1952); a client that does not accept gzip gets each
piece inflated in turn. Prometheus always asks for gzip.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

LEVEL = 1  # ~16x smaller on exposition text at ~550 MB/s; level 6 only gains another 12%
_RAW = -zlib.MAX_WBITS
_FINAL_BLOCK = zlib.compressobj(wbits=_RAW).flush()  # an empty last block ends the stream
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, no mtime
GZIP_EXTRA_BYTES = len(GZIP_HEADER) + len(_FINAL_BLOCK) + 8  # + CRC32 and length trailer
_POLY = 0xEDB88320  # CRC-32, reflected


@dataclass(frozen=True, slots=True)
class Deflated:
    """One piece of text: raw deflate data ending on a sync flush, its CRC-32 and length."""

    data: bytes
    crc: int
    size: int


def deflate(text: bytes, level: int = LEVEL) -> Deflated:
    c = zlib.compressobj(level, zlib.DEFLATED, _RAW)
    return Deflated(c.compress(text) + c.flush(zlib.Z_SYNC_FLUSH), zlib.crc32(text), len(text))


def inflate(piece: Deflated) -> bytes:
    return zlib.decompressobj(_RAW).decompress(piece.data)


def gzip_size(pieces: Iterable[Deflated]) -> int:
    """The length of :func:`gzip_stream` of ``pieces`` (for Content-Length)."""
    return GZIP_EXTRA_BYTES + sum(len(p.data) for p in pieces)


def gzip_stream(pieces: Iterable[Deflated]) -> Iterator[bytes]:
    """The pieces, in order, as one gzip member, yielded in parts to be written in turn."""
    yield GZIP_HEADER
    crc = size = 0
    for p in pieces:
        yield p.data
        crc = crc32_combine(crc, p.crc, p.size)
        size += p.size
    yield _FINAL_BLOCK + struct.pack("<II", crc, size & 0xFFFFFFFF)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header admits gzip (``gzip`` or ``*``, not at q=0)."""
    verdicts: dict[str, bool] = {}
    for item in accept_encoding.split(","):
        name, *params = (s.strip() for s in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        verdicts[name.lower()] = q > 0
    return verdicts.get("gzip", verdicts.get("x-gzip", verdicts.get("*", False)))


# CRC-32 of a concatenation from the parts' CRCs, as zlib's crc32_combine (which Python's
# zlib does not expose): crc(A + B) = crc(A) * x^(8 * len(B)) + crc(B) over GF(2), modulo the
# CRC polynomial, in the reflected bit order CRC-32 uses.

def _multiply(a: int, b: int) -> int:
    """a(x) * b(x) modulo the CRC polynomial (reflected: x^0 is the top bit)."""
    product = 0
    bit = 1 << 31
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


def _x_to_2n() -> list[int]:
    """x^(2^k) modulo the polynomial for k = 0..31 (x^1 is 1 << 30 when reflected)."""
    table = [1 << 30]
    for _ in range(31):
        table.append(_multiply(table[-1], table[-1]))
    return table


_X_2N = _x_to_2n()


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from ``crc1`` = crc(A), ``crc2`` = crc(B) and ``len2`` = len(B)."""
    shift = 1 << 31  # x^0
    n, k = len2, 3  # x^(8 * len2) = x^(len2 * 2^3)
    while n:
        if n & 1:
            shift = _multiply(_X_2N[k & 31], shift)
        n >>= 1
        k += 1
    return _multiply(shift, crc1) ^ crc2

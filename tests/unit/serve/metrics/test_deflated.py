"""The exporter's compressed pieces (monitor/serve/metrics/deflated.py): pieces compressed
apart concatenate into one gzip member that standard readers (Python's gzip and zlib, which
check the CRC and length) read back as the joined text."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from monitor.serve.metrics.deflated import (
    accepts_gzip,
    crc32_combine,
    deflate,
    gzip_size,
    gzip_stream,
    inflate,
)


def test_crc32_combine_is_the_crc_of_the_concatenation() -> None:
    rng = random.Random(7)
    for _ in range(200):
        a = rng.randbytes(rng.randrange(0, 5000))
        b = rng.randbytes(rng.randrange(0, 5000))
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_pieces_in_any_combination_make_one_valid_gzip_member() -> None:
    rng = random.Random(3)
    texts = [b"", b"x\n"] + [
        b"".join(b'kafka_consumergroup_group_lag{group="g%d",partition="%d"} %d\n'
                 % (rng.randrange(1000), p, rng.randrange(10**9)) for p in range(n))
        for n in (1, 10, 1000, 20000)
    ]
    pieces = [deflate(t) for t in texts]
    assert [inflate(p) for p in pieces] == texts
    for order in (pieces, pieces[::-1], [pieces[3], pieces[3], pieces[0]], []):
        blob = b"".join(gzip_stream(order))
        assert len(blob) == gzip_size(order)
        joined = b"".join(inflate(p) for p in order)
        assert gzip.decompress(blob) == joined
        reader = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one member, nothing after it
        assert reader.decompress(blob) == joined and reader.eof and not reader.unused_data
    big = texts[-1]
    assert len(deflate(big).data) < len(big) / 5


def test_a_corrupted_piece_fails_the_checksum() -> None:
    """The trailer really is checked against the pieces: a wrong CRC is refused."""
    piece = deflate(b"abc\n")
    wrong = type(piece)(piece.data, piece.crc ^ 1, piece.size)
    with pytest.raises(gzip.BadGzipFile):
        gzip.decompress(b"".join(gzip_stream([wrong])))


@pytest.mark.parametrize(("header", "gzip_ok"), [
    ("gzip", True), ("gzip, deflate, br", True), ("deflate, gzip;q=0", False),
    ("*", True), ("*;q=0", False), ("identity", False), ("", False),
    ("br;q=1.0, GZIP;q=0.5", True), ("gzip;q=0, *", False), ("x-gzip", True),
    ("gzip;q=bogus", False),
])
def test_accept_encoding(header: str, gzip_ok: bool) -> None:
    assert accepts_gzip(header) is gzip_ok

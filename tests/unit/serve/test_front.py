"""The HTTP front of ``kafka-monitor run`` (``monitor/serve/front.py``) and the reply table it
serves from (``monitor/serve/reply_table.py``): lookups, collisions, a table replaced whole,
foreign files, and a port already in use. End to end on the real broker:
tests/integration/serve/test_front.py."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from monitor.serve import reply_table
from monitor.serve.reply_table import ReplyTable, TableWriter, write_table
from tests.harness.net import free_port

# ------------------------------------------------------------------------ the reply table


def test_the_table_finds_every_path_and_nothing_else(tmp_path: Path) -> None:
    replies = [(f"/v3/kafka/c/consumer/g{i}/status", f'{{"n": {i}}}'.encode() * (i % 7))
               for i in range(2000)]
    assert write_table(tmp_path / "t", replies) == 2000
    table = ReplyTable(tmp_path / "t")
    try:
        for path, body in replies:
            assert table.get(path) == body
        assert table.get("/v3/kafka/c/consumer/g2000/status") is None
        assert table.get("/v3/kafka/c/consumer/g1/lag") is None
    finally:
        table.close()


def test_paths_with_one_hash_are_told_apart_by_the_stored_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in hash that collides for every path (no two real paths were found to)."""
    monkeypatch.setattr(reply_table, "path_hash", lambda path: 42)
    replies = [(f"/p/{i}", str(i).encode()) for i in range(50)]
    write_table(tmp_path / "t", replies)
    table = ReplyTable(tmp_path / "t")
    try:
        assert [table.get(p) for p, _ in replies] == [b for _, b in replies]
        assert table.get("/p/50") is None
    finally:
        table.close()


def test_a_table_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    """Until a new table is committed the old one is served whole; a writer that fails
    leaves the old one and no file of its own; a path added twice keeps its first body."""
    target = tmp_path / "t"
    write_table(target, [("/a", b"1"), ("/b", b"1")])
    with pytest.raises(RuntimeError), TableWriter(target) as failing:
        failing.add("/a", b"2")
        raise RuntimeError("a render failed")
    assert list(tmp_path.iterdir()) == [target]
    writer = TableWriter(target)
    writer.add("/a", b"3")
    writer.add("/a", b"4")
    old = ReplyTable(target)
    assert (old.get("/a"), old.get("/b")) == (b"1", b"1")
    old.close()
    assert writer.commit() == 1
    new = ReplyTable(target)
    assert (new.get("/a"), new.get("/b")) == (b"3", None)
    new.close()


def test_an_empty_or_foreign_file_is_refused_or_empty(tmp_path: Path) -> None:
    write_table(tmp_path / "empty", [])
    table = ReplyTable(tmp_path / "empty")
    assert table.get("/anything") is None
    table.close()
    (tmp_path / "foreign").write_bytes(b"not a table at all, long enough to read")
    with pytest.raises(ValueError, match="not a reply table"):
        ReplyTable(tmp_path / "foreign")


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        path = tmp_path / "monitor.yaml"
        path.write_text(yaml.safe_dump({
            "clusters": [{"name": "x", "bootstrap_servers": [f"127.0.0.1:{free_port()}"]}],
            "http": {"host": "127.0.0.1", "port": port}}))
        result = subprocess.run([sys.executable, "-m", "monitor", "run", "--config", str(path)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"cannot serve http on 127.0.0.1:{port}" in result.stderr
    assert "address already in use" in result.stderr.lower()

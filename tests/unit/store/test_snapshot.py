"""State across restarts (monitor/store/snapshot.py): the real store saved to a real file and loaded
into a new store gives the evaluator the same arrays and the same verdicts; every kind of
unusable file is logged and ignored, never a crash; a directory that cannot be written is
counted and logged while the real service keeps running.

The stores here are fed synthetic observations through their public ``put_*`` methods (the
collectors' own interface); the restart on a real broker is
tests/integration/store/test_restart.py."""

from __future__ import annotations

import dataclasses
import json
import logging
import pickle
import struct
import threading
import time
import urllib.request
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.config import ClusterConfig, EvaluatorConfig, MonitorConfig, StateConfig, parse_config
from monitor.evaluate.job import Evaluator
from monitor.model.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    GroupFetchFailed,
    GroupMember,
    GroupMembership,
    OffsetSource,
    PartitionMetadata,
)
from monitor.store.snapshot import FILE_NAME, MAGIC, StateFile, layout
from monitor.store.store import Store
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

C = "local"
SERVERS = ["127.0.0.1:1"]  # nothing listens there: the service tests run without Kafka
T0 = 1_700_000_000.0


def cluster_config(name: str = C, servers: list[str] | None = None) -> ClusterConfig:
    return ClusterConfig(name=name, bootstrap_servers=servers or SERVERS)


def state_file(path: Path, *clusters: ClusterConfig, max_age: float = 3600.0) -> StateFile:
    return StateFile(StateConfig(path=path, max_age=max_age), clusters or (cluster_config(),))


def batch(
    group: str, tps: list[tuple[str, int]], offsets: list[int], at: float, order: int,
    source: OffsetSource, cluster: str = C,
) -> CommitBatch:
    admin = source == "admin"
    return CommitBatch(
        cluster=cluster, source=source, observed_at=at, groups=[group] * len(tps),
        topics=[t for t, _ in tps], partitions=[p for _, p in tps], offsets=offsets,
        commit_times=[None if admin else round((at - 0.2) * 1000)] * len(tps),
        orders=[order] * len(tps),
    )


def membership(group: str, live: bool, at: float, cluster: str = C) -> GroupMembership:
    members = (GroupMember("m1", "client-1", "/10.0.0.1", (("orders", 0), ("orders", 1))),)
    return GroupMembership(
        cluster=cluster, group=group, source="offsets_topic", observed_at=at,
        state="Stable" if live else "Empty", protocol_type="consumer", protocol="range",
        generation=3, members=members if live else (),
    )


def filled_store(cluster: str = C, config: EvaluatorConfig | None = None) -> Store:
    """Two minutes of a cluster at 20 records/s on two partitions: a healthy group and one
    that stopped (offsets topic), a group read through the Admin API that stalled, and a
    group whose fetch fails."""
    store = Store(config)
    tps = [("orders", 0), ("orders", 1)]
    store.put_metadata(ClusterMetadata(
        cluster=cluster, observed_at=T0, brokers={0: "127.0.0.1:1"}, controller_id=0,
        topics={"orders": tuple(PartitionMetadata(p, 0, (0,), (0,)) for p in (0, 1))},
    ))
    store.put_group(membership("healthy", True, T0, cluster))
    store.put_group(membership("stopped", True, T0, cluster))
    for second in range(120):
        at = T0 + second
        end = 10 * second
        if second % 10 == 0:
            store.put_broker_offsets(BrokerOffsets(cluster, at, ["orders"] * 2, [0, 1], [0, 0],
                                                   [end, end]))
        store.put_commits(batch("healthy", tps, [end, end], at, second, "offsets_topic",
                                cluster))
        if second < 40:
            store.put_commits(batch("stopped", tps, [end, end], at, 1000 + second,
                                    "offsets_topic", cluster))
        if second % 10 == 5:  # an Admin API round every 10 s
            admin = min(end, 300)  # stalled at 300
            store.put_commits(batch("admin", tps, [admin, admin], at, second // 10 + 1,
                                    "admin", cluster))
            store.put_commits(batch("failing", tps, [end // 2, end // 2], at,
                                    second // 10 + 1, "admin", cluster))
    store.put_group(membership("stopped", False, T0 + 41, cluster))
    store.put_group_fetch_failed(GroupFetchFailed(cluster, "failing", "COORDINATOR_NOT_AVAILABLE",
                                                  T0 + 119))
    return store


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """Equal, field by field, arrays element by element."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    else:
        assert a == b, where


def verdicts(store: Store, now: float) -> dict[str, tuple[str, float, int]]:
    # The offsets-topic reader read everything up to the end of the two minutes.
    result = Evaluator(store, EvaluatorConfig(), freshness=lambda _c: T0 + 119.5).run_once(now)[C]
    out = {}
    for name in result.group_names():
        g = result.group(name)
        assert g is not None
        out[name] = (g.status, g.lag_seconds, g.totallag)
    return out


def test_round_trip_gives_the_evaluator_the_same_arrays_and_verdicts(tmp_path: Path) -> None:
    store = filled_store()
    saver = state_file(tmp_path)
    assert saver.save(store, freshness=lambda _c: T0 + 119.5)
    assert (tmp_path / FILE_NAME).read_bytes().startswith(MAGIC)
    assert saver.saves == 1 and saver.last_size == (tmp_path / FILE_NAME).stat().st_size

    loaded = Store()
    restored = state_file(tmp_path).load(loaded)
    assert restored is not None
    assert restored.groups == {C: 4} and restored.freshness == {C: T0 + 119.5}
    assert 0 <= restored.age < 10

    before, after = store.evaluation_input(C), loaded.evaluation_input(C)
    assert before is not None and before.windows.size == 8
    assert_same(before, after)
    assert loaded.group_states(C) == store.group_states(C)
    for group in store.groups(C):
        assert loaded.group_windows(C, group) == store.group_windows(C, group)
    assert loaded.metadata(C) == store.metadata(C)
    assert loaded.broker_offsets(C) == store.broker_offsets(C)
    # The same verdicts: what a restart must not change.
    now = T0 + 130
    assert verdicts(loaded, now) == verdicts(store, now)
    statuses = {g: v[0] for g, v in verdicts(loaded, now).items()}
    assert (statuses["healthy"], statuses["stopped"]) == ("OK", "STOP"), statuses


def test_admin_rounds_of_the_new_process_are_newer_than_the_restored_ones(
    tmp_path: Path,
) -> None:
    """The Admin API collector numbers its rounds from 1 in every process, and a commit's
    order is its round: restored commits are renumbered so round 1 of the new process
    counts as the newest commit, not as one older than the whole window."""
    store = filled_store()
    state_file(tmp_path).save(store)
    loaded = Store()
    assert state_file(tmp_path).load(loaded) is not None
    tps = [("orders", 0), ("orders", 1)]
    window = loaded.group_windows(C, "failing")
    assert window is not None
    before = window[("orders", 0)]
    # The same offset read again keeps the time it was first seen ...
    loaded.put_commits(batch("failing", tps, [575, 575], T0 + 135, 1, "admin"))
    assert loaded.group_windows(C, "failing") == window
    # ... and a new one is the newest commit.
    loaded.put_commits(batch("failing", tps, [700, 700], T0 + 145, 2, "admin"))
    after = loaded.group_windows(C, "failing")
    assert after is not None
    assert [e["offset"] for e in after[("orders", 0)]] == [
        e["offset"] for e in before][1:] + [700]
    snapshot = loaded.group(C, "failing")
    assert snapshot is not None and snapshot.commits[("orders", 0)].offset == 700


def test_missing_file_is_an_empty_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "monitor.state")
    store = Store()
    assert state_file(tmp_path / "new").load(store) is None
    assert store.clusters() == []
    (record,) = [r for r in caplog.records if r.name == "monitor.state"]
    assert record.levelno == logging.INFO and "no saved state" in record.getMessage()


def rewrite(path: Path, **header: Any) -> None:
    """Change header fields of a saved file, keeping its sections."""
    data = path.read_bytes()
    head = len(MAGIC) + 4
    (n,) = struct.unpack_from(">I", data, len(MAGIC))
    fields = {**json.loads(data[head : head + n]), **header}
    encoded = json.dumps(fields).encode()
    path.write_bytes(MAGIC + struct.pack(">I", len(encoded)) + encoded + data[head + n :])


def write_sections(path: Path, store_blob: bytes, extras_blob: bytes) -> None:
    """A file with a valid header around the given sections (what an attacker could plant)."""
    header = json.dumps({
        "format": 1, "package_version": "x", "saved_at": time.time(),
        "clusters": {C: {"bootstrap_servers": SERVERS}}, "layout": layout(),
        "sections": {"store": len(store_blob), "extras": len(extras_blob)},
        "crc32": zlib.crc32(extras_blob, zlib.crc32(store_blob)),
    }).encode()
    path.write_bytes(MAGIC + struct.pack(">I", len(header)) + header + store_blob + extras_blob)


class _Remove:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.remove, (str(self.path),))


def damage_truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def damage_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:10])


def damage_garbage(path: Path) -> None:
    path.write_bytes(np.random.default_rng(1).bytes(5000))


def damage_empty(path: Path) -> None:
    path.write_bytes(b"")


def damage_flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF
    path.write_bytes(bytes(data))


def damage_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(MAGIC) + 4] = ord("#")
    path.write_bytes(bytes(data))


def damage_version(path: Path) -> None:
    rewrite(path, format=2)


def damage_layout(path: Path) -> None:
    rewrite(path, layout="0123456789abcdef", package_version="0.0.9")


def damage_old(path: Path) -> None:
    rewrite(path, saved_at=time.time() - 7200)


def damage_future(path: Path) -> None:
    rewrite(path, saved_at=time.time() + 3600)


def damage_foreign(path: Path) -> None:
    rewrite(path, clusters={"prod": {"bootstrap_servers": SERVERS}})


def damage_other_kafka(path: Path) -> None:
    rewrite(path, clusters={C: {"bootstrap_servers": ["10.1.1.1:9092"]}})


def damage_unsafe(path: Path) -> None:
    sentinel = path.parent / "sentinel"
    sentinel.write_text("still here")
    write_sections(path, pickle.dumps({C: _Remove(sentinel)}), pickle.dumps({}))


def damage_not_a_cluster(path: Path) -> None:
    write_sections(path, pickle.dumps({C: {"windows": [1, 2]}}), pickle.dumps({}))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (damage_truncate, "truncated"),
        (damage_short, "truncated"),
        (damage_garbage, "bad magic"),
        (damage_empty, "truncated (0 bytes)"),
        (damage_flip, "checksum"),
        (damage_header, "corrupt header"),
        (damage_version, "format version 2, this version reads 1"),
        (damage_layout, "written by kafka-monitor 0.0.9 with another store layout"),
        (damage_old, "too old"),
        (damage_future, "in the future"),
        (damage_foreign, "foreign: saved for prod (127.0.0.1:1), configured local"),
        (damage_other_kafka, "foreign: saved for local (10.1.1.1:9092)"),
        (damage_unsafe, "posix.remove is not allowed"),
        (damage_not_a_cluster, "not a saved cluster"),
    ],
    ids=lambda v: v.__name__.removeprefix("damage_") if callable(v) else None,
)
def test_unusable_snapshot_is_logged_and_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Any, reason: str
) -> None:
    state_file(tmp_path).save(filled_store())
    damage(tmp_path / FILE_NAME)
    caplog.set_level(logging.INFO, "monitor.state")
    store = Store()
    assert state_file(tmp_path).load(store) is None
    assert store.clusters() == []
    warnings = [r for r in state_records(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.__dict__ for r in warnings]
    assert warnings[0].getMessage() == "saved state ignored, starting empty"
    assert reason in warnings[0].reason, warnings[0].reason  # type: ignore[attr-defined]
    if damage is damage_unsafe:
        assert (tmp_path / "sentinel").read_text() == "still here"


def test_windows_sized_for_another_configuration_are_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "monitor.state")  # whatever level a test left
    state_file(tmp_path).save(filled_store())
    store = Store(EvaluatorConfig(window=15))
    assert state_file(tmp_path).load(store) is None
    assert store.clusters() == []
    (warning,) = [r for r in state_records(caplog) if r.levelno == logging.WARNING]
    assert "evaluator.window 10" in warning.reason  # type: ignore[attr-defined]


def test_only_configured_clusters_are_restored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cluster added to or removed from the configuration does not cost the others their
    state; the one removed is not brought back."""
    caplog.set_level(logging.WARNING, "monitor.state")
    store = filled_store("a")
    other = filled_store("b")
    other_input = other.evaluation_input("b")
    assert other_input is not None
    store.restore_state(pickle.loads(other.dump_state(["b"])))
    saver = state_file(tmp_path, cluster_config("a"), cluster_config("b"))
    saver.save(store)
    loaded = Store()
    restored = state_file(tmp_path, cluster_config("a"), cluster_config("c")).load(loaded)
    assert restored is not None and restored.groups == {"a": 4}
    assert loaded.clusters() == ["a"]
    assert_same(loaded.evaluation_input("a"), store.evaluation_input("a"))
    (warning,) = [r for r in state_records(caplog) if r.levelno == logging.WARNING]
    assert warning.clusters == ["b"]  # type: ignore[attr-defined]


def test_jmx_scrape_is_not_saved(tmp_path: Path) -> None:
    from monitor.model.jmx_metrics import JmxScrape

    store = filled_store()
    store.put_broker_jmx(JmxScrape(cluster=C, observed_at=T0, brokers={}))
    state_file(tmp_path).save(store)
    loaded = Store()
    assert state_file(tmp_path).load(loaded) is not None
    assert loaded.broker_health_input(C)[2] is None
    assert loaded.broker_health_input(C)[1] == store.broker_health_input(C)[1]


def test_unwritable_directory_is_counted_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the state directory should be")
    saver = state_file(blocker / "state")
    store = filled_store()
    caplog.set_level(logging.INFO, "monitor.state")
    assert not saver.save(store)
    assert not saver.save(store)
    assert (saver.saves, saver.failures) == (0, 2)
    assert saver.last_error is not None and "NotADirectoryError" in saver.last_error
    blocker.unlink()
    blocker.mkdir()
    assert saver.save(store)
    messages = [(r.levelname, r.getMessage()) for r in state_records(caplog)]
    assert messages == [("WARNING", "state save failing"), ("INFO", "state save recovered")]
    assert saver.consecutive_failures == 0 and saver.saves == 1


def state_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What the state file logged: a Kafka client left by an earlier test in this worker
    (collected later by the garbage collector) may log into the capture meanwhile."""
    return [r for r in caplog.records if r.name == "monitor.state"]


def monitor_config(state: dict[str, Any]) -> MonitorConfig:
    return parse_config({
        "clusters": [{"name": C, "bootstrap_servers": SERVERS,
                      "broker_version_fallback": "0.9.0.1", "request_timeout": "2s"}],
        "http": {"host": "127.0.0.1", "port": 0},
        "state": state,
    })


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kafka_monitor_state_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_service_with_an_unwritable_state_directory_keeps_running(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    service = ServiceThread(monitor_config({"path": str(blocker / "state"),
                                            "interval": "200ms"})).start()
    try:
        port = service.service.http_port
        assert port is not None
        metrics = wait_for(lambda: scrape(port), 20, "failed saves counted",
                           ok=lambda m: m.get("kafka_monitor_state_save_failures_total", 0) >= 3)
        assert metrics["kafka_monitor_state_saves_total"] == 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert r.status == 200
    finally:
        service.stop()  # the last save fails too, and the service still stops cleanly
    state = service.service.state
    assert state is not None and state.failures >= 4


def test_service_saves_at_shutdown_and_the_next_one_serves_the_restored_verdicts(
    tmp_path: Path,
) -> None:
    config = monitor_config({"path": str(tmp_path), "interval": "1h"})
    first = ServiceThread(config)
    filled = filled_store()
    now = time.time()
    # The synthetic two minutes, shifted to end now.
    shifted = Store()
    shifted.restore_state(_shift(pickle.loads(filled.dump_state([C])), now - T0 - 120))
    first.service.store.restore_state(pickle.loads(shifted.dump_state([C])))
    first.start()
    # The round the scheduler starts at once has evaluated (its lag is in the history).
    wait_for(lambda: first.service.history.series(C, ["stopped"])[0], 30,
             "the first evaluation round")
    first.stop()
    state = first.service.state
    assert state is not None and state.saves == 1  # interval 1h: the shutdown save
    # The status page's lag history is saved with it.
    saved_times, (saved_lag,) = first.service.history.series(C, ["stopped"])
    assert saved_times and saved_lag[-1] > 0

    second = ServiceThread(config)
    restored = second.service.state.restored if second.service.state else None
    assert restored is not None and restored.groups == {C: 4}
    assert second.service.history.series(C, ["stopped"]) == (saved_times, [saved_lag])
    second.start()
    try:
        # Evaluated before it served anything: no answer came from an empty store.
        result = second.service.evaluator.result(C)
        assert result is not None
        expected = Evaluator(shifted, config.evaluator).run_once(result.evaluated_at)[C]
        for name in expected.group_names():
            g, want = result.group(name), expected.group(name)
            assert g is not None and want is not None
            assert (g.status, g.lag_seconds, g.totallag) == (
                want.status, want.lag_seconds, want.totallag), name
        assert sorted(result.group_names()) == ["admin", "failing", "healthy", "stopped"]
        port = second.service.http_port
        assert port is not None
        metrics = scrape(port)
        assert 0 < metrics["kafka_monitor_state_restored_age_seconds"] < 60
    finally:
        second.stop()


def test_a_round_in_flight_at_shutdown_is_in_the_last_snapshot(tmp_path: Path) -> None:
    """The scheduler's shutdown abandons the coroutine awaiting a round, not the round's
    thread: the shutdown save waits for it, or the round's history is lost to the next
    process (a slow round here: 1.5 s)."""
    config = monitor_config({"path": str(tmp_path), "interval": "1h"})
    first = ServiceThread(config)
    shifted = _shift(pickle.loads(filled_store().dump_state([C])), time.time() - T0 - 120)
    first.service.store.restore_state(shifted)
    evaluate = first.service.evaluator.run_once
    started = threading.Event()

    def slow_round(*args: Any, **kwargs: Any) -> Any:
        started.set()
        time.sleep(1.5)
        return evaluate(*args, **kwargs)

    first.service.evaluator.run_once = slow_round  # type: ignore[method-assign]
    first.start()
    assert started.wait(30)
    first.stop()  # while the round sleeps
    saved = first.service.history.series(C, ["stopped"])
    assert saved[0] and saved[1][0][-1] > 0, "the round in flight ended before the process"
    second = ServiceThread(config)
    assert second.service.history.series(C, ["stopped"]) == saved


def _shift(clusters: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Move every time in a saved cluster by ``seconds`` (a snapshot of two minutes that
    ended just now)."""
    ms = round(seconds * 1000)
    for cluster in clusters.values():
        w = cluster.windows
        for arr in (w.times_ms, w.observed_ms, w.hist_times_ms):
            arr += ms
        w.group_last_ms[w.group_last_ms > np.iinfo(np.int64).min] += ms
        for group in cluster.groups.values():
            for c in group.commits.values():
                c.commit_time += seconds
                c.observed_at += seconds
            group.offsets_at += seconds
            group.updated_at += seconds
            for name in ("live_at", "left_at"):
                if getattr(group, name, None) is not None:
                    setattr(group, name, getattr(group, name) + seconds)
            if group.membership is not None:
                group.membership = dataclasses.replace(
                    group.membership, observed_at=group.membership.observed_at + seconds)
    return clusters

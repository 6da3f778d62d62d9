"""The recorder (observations and verdicts to Parquet) and the replay that reproduces the
verdicts from the recording, without Spark or Kafka: a real store, windows and evaluator fed
synthetic observations on a simulated clock (the Kafka-backed version of the same check is in
``test_pipeline_spark.py``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from monitor.config import EvaluatorConfig, RecorderConfig
from monitor.evaluate.job import Evaluator
from monitor.model.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    GroupMember,
    GroupMembership,
    PartitionMetadata,
)
from monitor.pipeline.backtest import (
    alerts,
    backtest_local,
    percentiles,
    read_local,
    timelines,
)
from monitor.pipeline.replay import Replayer
from monitor.record.recorder import Recorder
from monitor.store.store import Store

C = "sim"
T0 = 1_700_000_000.0


def simulate(store: Store, recorder: Recorder, first: int, last: int) -> list[dict[str, str]]:
    """Four groups on one topic, read from the offsets topic: ok keeps up, lag falls behind,
    stall re-commits one offset (its consumer still there), stop dies at 40 s; log end +10/s.
    Evaluated every 5 s as the service would, the reader always fresh. Returns the statuses
    of every round."""
    now = T0 + first
    evaluator = Evaluator(store, EvaluatorConfig(), freshness=lambda _c: now)
    if first == 0:
        parts = {"t": (PartitionMetadata(0, 0, (0,), (0,)),)}
        store.put_metadata(ClusterMetadata(C, T0, {0: "h:1"}, 0, parts))
        member = GroupMember("m", "c", "h", (("t", 0),))
        store.put_group(GroupMembership(C, "stall", "offsets_topic", T0, "Stable", "consumer",
                                        "range", 1, (member,)))
    seen = []
    for s in range(first, last):
        now = T0 + s
        end = 10 * s + 100
        store.put_broker_offsets(BrokerOffsets(C, now, ["t"], [0], [0], [end]))
        if s % 2 == 0:
            groups, offsets = ["ok", "lag", "stall"], [end, 100 + 4 * s, 150]
            if s <= 40:
                groups.append("stop")
                offsets.append(end)
            n = len(groups)
            store.put_commits(CommitBatch(
                C, "offsets_topic", now, groups, ["t"] * n, [0] * n, offsets,
                [round(now * 1000)] * n, list(range(10 * s, 10 * s + n)),
            ))
        if s % 5 == 4:
            now += 0.5
            results = {C: evaluator.evaluate_cluster(C, now)}
            recorder.record_round(results, lambda _c, at=now: at)
            ev = results[C]
            seen.append({g: ev.group(g).status for g in ev.group_names()})  # type: ignore[union-attr]
    return seen


@pytest.fixture
def recording(tmp_path: Path) -> tuple[Path, list[dict[str, str]]]:
    store = Store(EvaluatorConfig())
    clock = iter(range(10**6))
    recorder = Recorder(RecorderConfig(enabled=True, path=tmp_path, max_file_bytes=1024),
                        clock=lambda: T0 + next(clock))
    store.listeners.append(recorder.observe)
    seen = simulate(store, recorder, 0, 60)
    recorder.flush()  # a flush in the middle must not matter
    seen += simulate(store, recorder, 60, 120)
    recorder.close()
    return tmp_path, seen


def test_recording_is_hive_partitioned_parquet_with_no_file_left_open(
    recording: tuple[Path, list[dict[str, str]]],
) -> None:
    root, _ = recording
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files, "nothing written"
    assert all(not Path(f).name.startswith(".") for f in files), files  # all closed
    date = time.strftime("%Y-%m-%d", time.gmtime(T0))
    assert any(f.startswith(f"observations/cluster={C}/date={date}/part-") for f in files)
    assert any(f.startswith(f"statuses/cluster={C}/date={date}/part-") for f in files)
    # max_file_bytes of 1 kB: the observations were rotated into several files.
    assert sum(f.startswith("observations/") for f in files) >= 2
    rows = read_local(root)
    assert set(rows["kind"]) >= {"commits", "log_ends", "metadata", "membership", "round"}
    assert set(rows["cluster"]) == {C}


def test_replay_reproduces_every_recorded_round(
    recording: tuple[Path, list[dict[str, str]]],
) -> None:
    root, seen = recording
    statuses = read_local(root, "statuses")
    recorded = [
        dict(zip(r["group"], r["status"], strict=True))
        for _, r in statuses.sort_values("evaluated_at").groupby("evaluated_at", sort=True)
    ]
    assert recorded == seen  # the recorder stored what the evaluator said
    # The scenario covers the interesting statuses.
    final = seen[-1]
    assert final["ok"] == "OK" and final["lag"] == "WARN" and final["stop"] == "STOP"
    assert final["stall"] == "STALL"
    evals = backtest_local(read_local(root), EvaluatorConfig())["evaluations"]
    replayed = [
        dict(zip(r["group"], r["status"], strict=True))
        for _, r in evals.groupby("evaluated_at", sort=True)
    ]
    assert replayed == seen


def test_other_settings_give_other_verdicts_and_alerts(
    recording: tuple[Path, list[dict[str, str]]],
) -> None:
    root, _ = recording
    rows = read_local(root)
    tolerant = backtest_local(rows, EvaluatorConfig(allowed_lag=10**6), rounds=False,
                            step=10.0)
    assert set(tolerant["evaluations"]["status"]) == {"OK"}
    strict = backtest_local(rows, EvaluatorConfig(), rounds=False, step=10.0,
                            rules={"STOP": 20.0})
    ev = strict["evaluations"]
    assert (ev["evaluated_at"] % 10 == 0).all()  # on the step grid
    fired = strict["alerts"]
    assert list(fired["group"]) == ["stop"] and list(fired["status"]) == ["STOP"]
    stop_since = strict["timelines"].query("group == 'stop' and status == 'STOP'")["since"]
    assert fired["fired_at"].iloc[0] == pytest.approx(stop_since.iloc[0] + 20.0)
    pct = strict["percentiles"].set_index("group")
    assert pct.loc["ok", "p99"] < 5 < pct.loc["lag", "p50"] <= pct.loc["lag", "max"]


def test_timelines_and_alerts_from_known_evaluations() -> None:
    import pandas as pd

    evals = pd.DataFrame({
        "cluster": ["c"] * 5, "group": ["g"] * 5, "evaluated_at": [0.0, 10, 20, 30, 40],
        "status": ["OK", "STOP", "STOP", "STOP", "OK"], "lag_seconds": [0.0, 5, 15, 25, 0],
        "totallag": [0] * 5, "partitions": [1] * 5,
    })
    line = timelines(evals)
    assert line[["status", "since", "until", "evaluations"]].values.tolist() == [
        ["OK", 0.0, 10.0, 1], ["STOP", 10.0, 40.0, 3], ["OK", 40.0, 40.0, 1]
    ]
    assert alerts(line, {"STOP": 30.0})[["fired_at", "resolved_at"]].values.tolist() == [
        [40.0, 40.0]
    ]
    assert alerts(line, {"STOP": 31.0}).empty
    p = percentiles(evals).iloc[0]
    assert p["max"] == 25 and p["p50"] == 5 and p["evaluations"] == 5


def test_retention_and_total_size_delete_the_oldest_files(tmp_path: Path) -> None:
    cfg = RecorderConfig(enabled=True, path=tmp_path, max_file_age=0.001, retention=3600,
                         max_total_bytes=10**9)
    now = [T0]
    recorder = Recorder(cfg, clock=lambda: now[0])
    for i in range(4):
        recorder.observe(BrokerOffsets(C, T0 + i, ["t"], [0], [0], [i]))
        recorder.flush()  # max_file_age ~0: each flush closes the file of the one before
        now[0] += 1
    recorder.flush()
    files = sorted(tmp_path.rglob("*.parquet"), key=lambda p: p.name)
    assert len(files) == 4
    os.utime(files[0], (T0 - 7200, T0 - 7200))  # older than the retention
    recorder.flush()
    assert not files[0].exists() and all(f.exists() for f in files[1:])
    size = files[1].stat().st_size
    recorder.config = cfg.model_copy(update={"max_total_bytes": 2 * size + size // 2})
    recorder.flush()
    assert [f.exists() for f in files[1:]] == [False, True, True]
    assert recorder.files_deleted == 2


def test_a_full_buffer_drops_and_counts_instead_of_growing(tmp_path: Path) -> None:
    recorder = Recorder(RecorderConfig(enabled=True, path=tmp_path, max_buffered_rows=1000))
    batch = BrokerOffsets(C, T0, ["t"] * 600, list(range(600)), [0] * 600, [1] * 600)
    recorder.observe(batch)
    recorder.observe(batch)  # 1200 rows > 1000: dropped
    assert recorder.dropped == 1
    assert recorder.flush() == 600


def test_replayer_state_survives_pickling(recording: tuple[Path, list[dict[str, str]]]) -> None:
    root, seen = recording
    rows = read_local(root).sort_values(["run", "seq", "idx"])
    half = len(rows) // 2
    first = Replayer(EvaluatorConfig())
    out = list(first.replay(rows.iloc[:half]))
    second = Replayer.from_bytes(first.to_bytes())
    out += list(second.replay(rows.iloc[half:]))
    replayed = [dict(zip(v["group"], v["status"], strict=True)) for v in out]
    assert replayed == seen


def test_stream_replays_commits_between_the_log_ends_sampled_around_them() -> None:
    """The stream's tasks read commits seconds after they were made; replayed at their commit
    times, each commit is stored against the log end sampled just before it, as the service
    stores it, and a lagging consumer's lag grows at every commit (WARN), as in the service."""
    from monitor.pipeline.stream import _at_commit_times
    from monitor.record.rows import RowBuilder, events

    t0 = 1_700_000_000.0
    rows = RowBuilder()
    for i, t in enumerate((t0, t0 + 2, t0 + 4, t0 + 6)):  # log end +100 every 2 s
        rows.add(0, int(t * 1e6) * 16 + i, BrokerOffsets("c", t, ["t"], [0], [0], [1000 + 50 * i]))
    read_at = t0 + 7  # one task read the three commits at once, after every sample
    commits = CommitBatch("c", "offsets_topic", read_at, ["g"] * 3, ["t"] * 3, [0] * 3,
                          [990, 1020, 1050], [round((t0 + 1 + 2 * k) * 1000) for k in range(3)],
                          [1, 2, 3])
    first = len(rows)
    rows.add(0, int(read_at * 1e6) * 16, commits)
    _at_commit_times(rows, first)
    order = [type(e.observation).__name__ for e in events(rows.to_pandas())]
    assert order == ["BrokerOffsets", "CommitBatch"] * 3 + ["BrokerOffsets"]
    replayer = Replayer(EvaluatorConfig())
    for _ in replayer.replay(rows.to_pandas(), rounds=False):
        pass
    window = replayer.store.group_windows("c", "g")
    assert window is not None
    assert [entry["lag"] for entry in window[("t", 0)]] == [10, 30, 50]


def test_record_timestamps_are_recorded_and_replayed() -> None:
    """The exact lag in seconds rests on the record timestamps the reader fetched: they are
    observations like any other, so a replay judges on them too."""
    from monitor.model.observations import RecordTimes
    from monitor.record.rows import RowBuilder, events, row_count

    times = RecordTimes(C, T0, {("t", 0, 150): 1_699_999_000_000, ("u", 3, 7): 1_699_999_500})
    rows = RowBuilder()
    rows.add(0, 1, times)
    assert len(rows) == row_count(times) == 2
    (event,) = list(events(rows.to_pandas()))
    assert event.observation == times
    store = Store(EvaluatorConfig())
    store.apply(event.observation)
    assert store.record_times(C) == times.timestamps_ms

"""The sliding windows' storage rules (Burrow's ``inmemory.go``), the log-end history, the
store's deletions reaching the windows, and Burrow's storage fixture groups evaluated through
the store."""

from __future__ import annotations

import time

import numpy as np

from monitor.config import EvaluatorConfig
from monitor.model.observations import (
    BrokerOffsets,
    ClusterMetadata,
    CommitBatch,
    GroupDeleted,
    OffsetsDeleted,
    PartitionMetadata,
)
from monitor.rules import GroupIndex, LeoHistory, RuleOptions, Status, evaluate, lag_seconds
from monitor.store.store import Store
from monitor.store.windows import EvaluationInput, Windows

C = "c1"


def store(window: int = 3, min_distance: float = 1.0, expire: float = 7 * 86400.0) -> Store:
    return Store(
        evaluator_config=EvaluatorConfig(
            window=window, min_distance=min_distance, expire_group=expire
        )
    )


def put(s: Store, rows: list[tuple[str, str, int, int, int, int]], at: float = 5000.0) -> None:
    """rows: (group, topic, partition, offset, commit ms, order)."""
    s.put_commits(CommitBatch(
        cluster=C, source="offsets_topic", observed_at=at,
        groups=[r[0] for r in rows], topics=[r[1] for r in rows],
        partitions=[r[2] for r in rows], offsets=[r[3] for r in rows],
        commit_times=[r[4] for r in rows], orders=[r[5] for r in rows],
    ))


def log_ends(s: Store, ends: dict[tuple[str, int], int], at: float) -> None:
    s.put_broker_offsets(BrokerOffsets(
        cluster=C, observed_at=at, topics=[t for t, _ in ends], partitions=[p for _, p in ends],
        log_start=[0] * len(ends), log_end=list(ends.values()),
    ))


def wins(s: Store) -> Windows:
    w = s._clusters[C].windows
    assert w is not None
    return w


def window(s: Store, group: str = "g", tp: tuple[str, int] = ("t", 0)) -> dict[str, list[int]]:
    return wins(s).row_window(s._clusters[C].groups[group].rows[tp])


def evaluation(s: Store) -> EvaluationInput:
    inp = s.evaluation_input(C)
    assert inp is not None
    return inp


def test_newer_commits_are_appended_oldest_first() -> None:
    s = store()
    put(s, [("g", "t", 0, 10, 1_000, 1), ("g", "t", 0, 20, 3_000, 2)])
    put(s, [("g", "t", 0, 30, 5_000, 3)])
    w = window(s)
    assert w["offsets"] == [10, 20, 30]
    assert w["times_ms"] == [1_000, 3_000, 5_000]
    assert w["orders"] == [1, 2, 3]
    assert w["observed_ms"] == [5_000_000] * 3
    assert w["lags"] == [-1, -1, -1]  # no log end known yet


def test_window_overflow_drops_the_oldest() -> None:
    s = store(window=3)
    put(s, [("g", "t", 0, 10 * i, 2_000 * i, i) for i in range(1, 6)])
    assert window(s)["offsets"] == [30, 40, 50]


def test_older_commit_is_inserted_in_order_or_dropped_when_it_would_fall_out() -> None:
    s = store(window=3)
    put(s, [("g", "t", 0, 10, 1_000, 1), ("g", "t", 0, 30, 5_000, 3)])
    put(s, [("g", "t", 0, 20, 3_000, 2)])
    assert window(s)["offsets"] == [10, 20, 30]
    put(s, [("g", "t", 0, 25, 4_000, 2)])  # order 2 again: a duplicate
    assert window(s)["offsets"] == [10, 20, 30]
    put(s, [("g", "t", 0, 5, 500, 0)])  # older than the whole full window
    assert window(s)["offsets"] == [10, 20, 30]
    s2 = store(window=3)
    put(s2, [("g", "t", 0, 10, 1_000, 10), ("g", "t", 0, 30, 5_000, 30),
             ("g", "t", 0, 40, 7_000, 40), ("g", "t", 0, 35, 6_000, 35)])
    assert window(s2)["offsets"] == [30, 35, 40]  # inserted into a full window, oldest left
    # The latest-commit view is unchanged by late arrivals.
    assert s2.group(C, "g").commits[("t", 0)].offset == 40  # type: ignore[union-attr]


def test_exact_duplicates_are_dropped() -> None:
    s = store()
    put(s, [("g", "t", 0, 10, 1_000, 1)])
    put(s, [("g", "t", 0, 10, 1_000, 1)])
    put(s, [("g", "t", 0, 10, 1_000, 1), ("g", "t", 0, 10, 1_000, 1)])
    assert window(s)["offsets"] == [10]


def test_min_distance_replaces_the_newest_keeping_its_timestamp() -> None:
    s = store(min_distance=5.0)
    put(s, [("g", "t", 0, 10, 10_000, 1)])
    put(s, [("g", "t", 0, 11, 12_000, 2), ("g", "t", 0, 12, 14_000, 3)])
    w = window(s)
    assert (w["offsets"], w["times_ms"], w["orders"]) == ([12], [10_000], [3])
    put(s, [("g", "t", 0, 13, 15_000, 4)])  # 5 s after the kept timestamp: appended
    w = window(s)
    assert (w["offsets"], w["times_ms"]) == ([12, 13], [10_000, 15_000])


def test_lag_at_ingest_uses_the_newest_log_end() -> None:
    s = store()
    log_ends(s, {("t", 0): 100}, at=1.0)
    put(s, [("g", "t", 0, 40, 2_000, 1)])
    log_ends(s, {("t", 0): 150}, at=3.0)
    put(s, [("g", "t", 0, 200, 4_000, 2)])  # past the log end: floored at 0
    assert window(s)["lags"] == [60, 0]


def test_log_end_history_collapses_flat_runs_and_rejects_backward_points() -> None:
    s = store()
    for i, end in enumerate([10, 20, 20, 20, 20, 15, 30]):
        log_ends(s, {("t", 0): end}, at=float(i + 1))
    offsets, times = wins(s).log_end_history("t", 0)
    assert offsets == [10, 20, 20, 30]
    assert times == [1_000, 2_000, 5_000, 7_000]  # the backward 15 at 6 s is rejected


def test_log_end_history_is_bounded_and_thins_old_points() -> None:
    """At most 60 points, reaching back to the first observation: old ones thinned, recent
    ones kept."""
    s = store()
    for i in range(1000):
        log_ends(s, {("t", 0): i}, at=float(i + 1))
    offsets, times = wins(s).log_end_history("t", 0)
    assert 52 <= len(offsets) <= 60
    assert offsets[0] == 0 and offsets[-1] == 999  # the whole span is still covered
    assert offsets[-5:] == list(range(995, 1000))  # the last seconds at full resolution
    gaps = np.diff(times)
    assert gaps[0] > 10 * gaps[-1]  # resolution proportional to age
    assert np.all(np.diff(offsets) > 0)


def test_thinned_history_keeps_lag_seconds_accurate_far_back() -> None:
    """A steady 100 records/s for an hour, one point per second (60 points kept): a group
    50 minutes behind gets an estimate within a few percent, not a lower bound."""
    s = store()
    for i in range(3600):
        log_ends(s, {("t", 0): 100 * i}, at=float(1000 + i))
    offsets, times = wins(s).log_end_history("t", 0)
    hist = LeoHistory.from_arrays([offsets], [times])
    now_ms = (1000 + 3599) * 1000.0
    committed = 100 * (3599 - 3000)  # the log end was here 3000 s ago
    res = lag_seconds([committed], hist, now_ms)
    assert not res.lower_bound[0]
    assert abs(res.seconds[0] - 3000) < 0.03 * 3000


def test_thinning_never_splits_a_flat_run() -> None:
    """Short quiet stretches (two observations each, the first and last point of a flat run)
    all the way: thinning must not take one endpoint of a run and leave the other, so every
    level but possibly the oldest one still has both its points."""
    s = store()
    for i in range(400):
        log_ends(s, {("t", 0): 10 * (i // 2)}, at=float(i + 1))
    offsets, _ = wins(s).log_end_history("t", 0)
    counts = np.unique(offsets, return_counts=True)[1]
    assert len(offsets) >= 50
    assert np.all(counts[1:] == 2), offsets


def test_thinning_keeps_flat_run_endpoints() -> None:
    """Quiet stretches (flat runs) keep their first and last points through thinning."""
    s = store()
    t = 1.0
    level = 0
    for _block in range(40):
        for _ in range(5):
            level += 10
            log_ends(s, {("t", 0): level}, at=t)
            t += 1
        for _ in range(20):  # quiet
            log_ends(s, {("t", 0): level}, at=t)
            t += 1
    offsets, times = wins(s).log_end_history("t", 0)
    assert len(offsets) <= 60
    o = np.array(offsets)
    # Every flat run kept in the history still has both endpoints (runs of length >= 2 whose
    # neighbours differ), i.e. no run was cut down to a single point in the middle of history.
    runs = [(i, j) for i in range(len(o)) for j in [i + 1] if j < len(o) and o[i] == o[j]]
    assert runs, "flat runs survive thinning"
    assert all(times[j] - times[i] >= 15_000 for i, j in runs[-5:])
    # The newest quiet stretch exactly: its first point (the last rise) and its last one.
    assert o[-1] == o[-2] == level and o[-3] == level - 10
    assert times[-1] - times[-2] == 20_000
    assert len(set(o.tolist())) == len(o) - len(runs)  # no level kept three times


def test_groups_expire_without_commits() -> None:
    s = store(expire=100.0)
    put(s, [("old", "t", 0, 1, 1_000_000, 1), ("new", "t", 0, 1, 1_150_000, 2)])
    assert s.expire_groups(now=1_200.0) == [(C, "old")]
    assert s.groups(C) == ["new"]
    assert evaluation(s).group_names == ["new"]


def test_topic_deletion_removes_window_rows_and_log_ends() -> None:
    def meta(topics: list[str]) -> ClusterMetadata:
        return ClusterMetadata(
            cluster=C, observed_at=1.0, brokers={0: "h:1"}, controller_id=0,
            topics={t: (PartitionMetadata(0, 0, (0,), (0,)),) for t in topics},
        )

    s = store()
    s.put_metadata(meta(["t", "u"]))
    log_ends(s, {("t", 0): 10, ("u", 0): 10}, at=1.0)
    put(s, [("g", "t", 0, 5, 1_000, 1), ("g", "u", 0, 5, 1_000, 2)])
    s.put_metadata(meta(["u"]))
    inp = evaluation(s)
    assert [inp.topic_partition(i) for i in range(inp.windows.size)] == [("u", 0)]
    assert wins(s).log_end_history("t", 0) == ([], [])
    assert ("t", 0) not in s._clusters[C].groups["g"].rows


def test_offsets_tombstone_and_group_deletion_remove_rows() -> None:
    s = store()
    put(s, [("g", "t", 0, 5, 1_000, 1), ("g", "t", 1, 5, 1_000, 2), ("h", "t", 0, 5, 1_000, 3)])
    s.put_offsets_deleted(OffsetsDeleted(C, "g", "t", 0, 2.0))
    inp = evaluation(s)
    assert inp.windows.size == 2
    s.put_offsets_deleted(OffsetsDeleted(C, "g", "t", 1, 2.0))
    s.put_group_deleted(GroupDeleted(C, "g", 2.0))
    inp = evaluation(s)
    assert inp.group_names == ["h"] and inp.windows.size == 1
    s.remove_group(C, "h")
    assert evaluation(s).windows.size == 0
    # Freed rows are reused, starting empty.
    put(s, [("k", "t", 0, 7, 9_000, 4)])
    assert window(s, "k")["offsets"] == [7]


def test_evaluation_input_is_sorted_by_group_with_current_lag() -> None:
    s = store()
    log_ends(s, {("t", 0): 100, ("t", 1): 50}, at=1.0)
    put(s, [("b", "t", 0, 90, 2_000, 1), ("a", "t", 1, 20, 2_000, 2), ("b", "t", 1, 50, 2_000, 3)])
    inp = evaluation(s)
    assert inp.group_names == ["a", "b"]
    assert inp.group_ids.tolist() == [0, 1, 1]
    assert inp.windows.current_lag.tolist() == [30, 10, 0]
    assert inp.windows.broker_offsets[:, 0].tolist() == [50, 100, 50]


def burrow_fixture() -> tuple[Store, float]:
    """``CoordinatorWithOffsets()``: intervals 10, min-distance 0 (here 1 ms: commits are 10 s
    apart), one broker offset 4321 stored before the commits, now = start + 100 s."""
    s = Store(evaluator_config=EvaluatorConfig(window=10, min_distance=0.001))
    s.put_broker_offsets(BrokerOffsets(
        cluster="testcluster", observed_at=9.876, topics=["testtopic"], partitions=[0],
        log_start=[0], log_end=[4321],
    ))
    now_ms = time.time() * 1000
    start = int(now_ms) - 100_000
    for group, n in (("testgroup", 10), ("testgroup2", 5)):
        s.put_commits(CommitBatch(
            cluster="testcluster", source="offsets_topic", observed_at=now_ms / 1000,
            groups=[group] * n, topics=["testtopic"] * n, partitions=[0] * n,
            offsets=[1000 + 100 * i for i in range(n)],
            commit_times=[start + 10_000 * i for i in range(n)],
            orders=[10 + i for i in range(n)],
        ))
    return s, now_ms


def test_burrow_storage_fixture_groups() -> None:
    s, now_ms = burrow_fixture()
    inp = s.evaluation_input("testcluster")
    assert inp is not None
    assert inp.group_names == ["testgroup", "testgroup2"]
    opts = RuleOptions.burrow()
    parts, groups = evaluate(
        inp.windows, GroupIndex(inp.group_ids, len(inp.group_names)), now_ms, opts, inp.history
    )
    assert groups.status_names() == ["OK", "ERR"]
    assert groups.complete.tolist() == [1.0, 0.0]
    assert groups.totallag.tolist() == [2421, 2921]
    assert groups.partition_count.tolist() == [1, 1]
    assert [Status(c).name for c in parts.status.tolist()] == ["OK", "STOP"]
    assert parts.complete.tolist() == [1.0, 0.5]
    w2 = inp.windows.offsets[1, : int(inp.windows.counts[1])]
    assert (int(w2[0]), int(w2[-1])) == (1000, 1400)  # maxlag start and end offsets
    assert inp.windows.lags[0].tolist() == [3321 - 100 * i for i in range(10)]


def test_put_commits_repeating_rows_in_one_batch_match_one_at_a_time() -> None:
    rng = np.random.default_rng(1)
    rows = [
        ("g", "t", int(p), int(o), int(ms), i)
        for i, (p, o, ms) in enumerate(zip(
            rng.integers(0, 4, 300), rng.integers(0, 1000, 300),
            np.cumsum(rng.integers(0, 3000, 300)), strict=True,
        ))
    ]
    rng.shuffle(rows)  # out-of-order arrivals too
    batched, single = store(window=5), store(window=5)
    put(batched, rows)
    for r in rows:
        put(single, [r])
    for p in range(4):
        assert window(batched, tp=("t", p)) == window(single, tp=("t", p))


class ReferenceWindows:
    """Burrow's storage rules applied one commit at a time, in plain Python (no numpy): what
    the store's vectorised ingest must reproduce. Also keeps the latest commit per partition,
    which decides whether an Admin API value is a re-observation (skipped)."""

    def __init__(self, window: int, min_distance_ms: int) -> None:
        self.window, self.min_distance_ms = window, min_distance_ms
        self.rows: dict[tuple[str, str, int], list[dict[str, int]]] = {}
        self.row_source: dict[tuple[str, str, int], str] = {}
        self.latest: dict[tuple[str, str, int], tuple[int, float, int, str]] = {}
        self.log_end: dict[tuple[str, int], int] = {}
        self.exact: set[str] = set()  # groups fed by the offsets topic

    def put(self, batch: CommitBatch) -> None:
        at_ms = round(batch.observed_at * 1000)
        for g, t, p, off, ms, order in zip(
            batch.groups, batch.topics, batch.partitions, batch.offsets, batch.commit_times,
            batch.orders, strict=True,
        ):
            key, source = (g, t, p), batch.source
            if source == "admin" and g in self.exact:
                continue  # the offsets topic feeds this group: Admin reads are ignored
            if source == "offsets_topic" and g not in self.exact:
                self.exact.add(g)  # its windows restart from the offsets topic's commits
                for k in [k for k, src in self.row_source.items()
                          if k[0] == g and src == "admin"]:
                    del self.rows[k], self.row_source[k], self.latest[k]
            previous = self.latest.get(key)
            if (source == "admin" and previous is not None and previous[3] == source
                    and previous[0] == off):
                continue  # seen again, not committed again
            when = batch.observed_at if ms is None else ms / 1000.0
            if previous is None or (
                order >= previous[2] if previous[3] == source else when >= previous[1]
            ):
                self.latest[key] = (off, when, order, source)
            if self.row_source.setdefault(key, source) != source:
                continue  # orders only compare within the row's source
            end = self.log_end.get((t, p))
            entry = {"offset": off, "order": order, "ts": at_ms if ms is None else ms,
                     "obs": at_ms, "lag": -1 if end is None else max(end - off, 0)}
            self._apply(self.rows.setdefault(key, []), entry)

    def _apply(self, entries: list[dict[str, int]], e: dict[str, int]) -> None:
        if any(x["order"] == e["order"] for x in entries):
            return  # duplicate
        if not entries or e["order"] > entries[-1]["order"]:
            if entries and e["ts"] - entries[-1]["ts"] < self.min_distance_ms:
                entries[-1] = {**e, "ts": entries[-1]["ts"]}  # replaced, keeps its time
                return
            entries.append(e)
        else:
            pos = sum(x["order"] < e["order"] for x in entries)
            entries.insert(pos, e)
        if len(entries) > self.window:
            del entries[0]

    def window_of(self, key: tuple[str, str, int]) -> dict[str, list[int]]:
        entries = self.rows.get(key, [])
        return {
            "offsets": [x["offset"] for x in entries], "orders": [x["order"] for x in entries],
            "times_ms": [x["ts"] for x in entries], "observed_ms": [x["obs"] for x in entries],
            "lags": [x["lag"] for x in entries],
        }


def test_vectorised_windows_match_a_per_commit_reference_on_random_batches() -> None:
    """Random batches with rows repeated many times, out-of-order and duplicate orders,
    chatty commits (min-distance), full windows, both sources and moving log ends."""
    rng = np.random.default_rng(7)
    for case in range(40):
        window, min_distance_ms = int(rng.integers(2, 6)), int(rng.choice([1, 500, 2_000]))
        s = store(window=window, min_distance=min_distance_ms / 1000)
        ref = ReferenceWindows(window, min_distance_ms)
        keys = [(f"g{g}", f"t{t}", p) for g in range(3) for t in range(2) for p in range(3)]
        next_order = {k: 0 for k in keys}
        clock_ms, end = 1_000_000, 0
        for _ in range(12):
            clock_ms += int(rng.integers(0, 3_000))
            if rng.random() < 0.5:  # a log-end refresh for every partition
                end += int(rng.integers(0, 50))
                ends = {(f"t{t}", p): end for t in range(2) for p in range(3)}
                log_ends(s, ends, at=clock_ms / 1000)
                ref.log_end.update(ends)
            n = int(rng.integers(1, 60))
            picks = [keys[i] for i in rng.integers(0, len(keys) if case % 2 else 3, n)]
            source = "admin" if rng.random() < 0.25 else "offsets_topic"
            orders, times = [], []
            for k in picks:
                r = rng.random()
                if r < 0.15 and next_order[k] > 0:  # late or duplicate arrival
                    orders.append(int(rng.integers(0, next_order[k])))
                else:
                    next_order[k] += int(rng.integers(1, 3))
                    orders.append(next_order[k])
                times.append(clock_ms + int(rng.integers(-1_500, 1_500)))
            batch = CommitBatch(
                cluster=C, source=source, observed_at=clock_ms / 1000,
                groups=[k[0] for k in picks], topics=[k[1] for k in picks],
                partitions=[k[2] for k in picks],
                offsets=[int(x) for x in rng.integers(0, 5, n)] if source == "admin"
                else [o * 10 for o in orders],
                commit_times=[None] * n if source == "admin" else list(times), orders=orders,
            )
            s.put_commits(batch)
            ref.put(batch)
        for g, t, p in keys:
            group = s._clusters[C].groups.get(g)
            row = group.rows.get((t, p)) if group is not None else None
            got = wins(s).row_window(row) if row is not None else ref.window_of(("", "", -1))
            assert got == ref.window_of((g, t, p)), (case, g, t, p)

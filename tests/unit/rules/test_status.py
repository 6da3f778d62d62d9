"""Tests of the vectorised partition and group rules (monitor.rules.status).

Burrow's 16 rule cases and its two storage-fixture groups (shared/reference) are data: every
case runs through the same batch function, alone and all together, and each rule result is
compared, not only the status. A plain per-partition Python reading of the rules
(``reference_partition``, written from the reference README, not from the vectorised code) is
the oracle for the property tests; the benchmark times it as its baseline.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.rules import (
    BurrowStatus,
    GroupIndex,
    LeoHistory,
    PartitionWindows,
    RuleOptions,
    Status,
    evaluate,
    evaluate_groups,
    evaluate_partitions,
    to_burrow,
)
from tests.harness.burrow_oracle import reference_partition
from tests.harness.reference import REFERENCE_DIR

CASES_FILE = REFERENCE_DIR / "burrow-evaluator-cases.json"
ALL: list[dict[str, Any]] = json.loads(CASES_FILE.read_text()) if CASES_FILE.exists() else []
CASES = [c for c in ALL if c["kind"] == "partition-rules-case"]
FIXTURES = {c["group"]: c for c in ALL if c["kind"] == "storage-fixture-group"}
BURROW = RuleOptions.burrow()


def test_reference_cases_present() -> None:
    """Fails (rather than silently skipping the cases) when the reference data is missing."""
    assert len(CASES) == 16, f"{CASES_FILE} not found: set KAFKA_MONITOR_REFERENCE_DIR"
    assert set(FIXTURES) == {"testgroup", "testgroup2"}


# --- building inputs --------------------------------------------------------------------


def windows_from_cases(
    cases: list[dict[str, Any]], pad: int = 0, junk: int = 0
) -> PartitionWindows:
    """One batch from Burrow cases, padded to the widest window (+``pad``); unfilled slots get
    ``junk`` so a rule that reads past ``counts`` changes a result."""
    width = max(len(c["offsets"]) for c in cases) + pad
    ring = max(len(c["broker_offsets"]) for c in cases) + pad
    p = len(cases)
    off = np.full((p, width), junk, dtype=np.int64)
    ts = np.full((p, width), junk, dtype=np.int64)
    lag = np.full((p, width), junk, dtype=np.int64)
    bro = np.full((p, ring), junk, dtype=np.int64)
    for i, c in enumerate(cases):
        n = len(c["offsets"])
        off[i, :n] = [o["offset"] for o in c["offsets"]]
        ts[i, :n] = [o["timestamp_ms"] for o in c["offsets"]]
        lag[i, :n] = [-1 if o["lag"] is None else o["lag"] for o in c["offsets"]]
        bro[i, : len(c["broker_offsets"])] = c["broker_offsets"]
    return PartitionWindows.from_arrays(
        off,
        ts,
        lag,
        counts=[len(c["offsets"]) for c in cases],
        current_lag=[c["current_lag"] for c in cases],
        broker_offsets=bro,
        broker_counts=[len(c["broker_offsets"]) for c in cases],
    )


def case_now_ms(cases: list[dict[str, Any]]) -> np.ndarray:
    return np.array([c["time_now_s"] * 1000 for c in cases], dtype=np.float64)


def assert_case(case: dict[str, Any], res: Any, i: int) -> None:
    exp = case["expected"]
    name = case["name"]
    assert bool(res.lag_always_not_zero[i]) == exp["isLagAlwaysNotZero"], name
    assert int(res.rewind_index[i]) == exp["checkIfOffsetsRewind"], name
    assert bool(res.stopped[i]) == exp["checkIfOffsetsStopped"], name
    assert bool(res.stalled[i]) == exp["checkIfOffsetsStalled"], name
    assert bool(res.lag_not_decreasing[i]) == exp["checkIfLagNotDecreasing"], name
    assert bool(res.recent_lag_zero[i]) == exp["checkIfRecentLagZero"], name
    assert Status(int(res.status[i])).name == exp["calculatePartitionStatus"], name


# --- Burrow's 16 cases --------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_burrow_case_alone(case: dict[str, Any]) -> None:
    """Each case through the batch function as a batch of one, with Burrow's options."""
    allowed = RuleOptions.burrow(case["allowed_lag"])
    res = evaluate_partitions(windows_from_cases([case]), case["time_now_s"] * 1000, allowed)
    assert_case(case, res, 0)


@pytest.mark.parametrize("junk", [0, -5, 10**12])
def test_burrow_cases_as_one_batch(junk: int) -> None:
    """All 16 in a single call (per-partition ``now`` and allowed lag), unfilled window and
    ring slots holding junk that would change a result if a rule read past ``counts``."""
    w = windows_from_cases(CASES, pad=3, junk=junk)
    allowed = [c["allowed_lag"] for c in CASES]
    res = evaluate_partitions(w, case_now_ms(CASES), BURROW, allowed_lag=allowed)
    for i, case in enumerate(CASES):
        assert_case(case, res, i)


def test_project_defaults_agree_with_burrow_on_its_cases() -> None:
    """The improvements change none of Burrow's 16 statuses (no history is given, no case has
    a marker-sized lag that was already there at its last commit, and every window holds at
    least three commit gaps)."""
    w = windows_from_cases(CASES)
    allowed = [c["allowed_lag"] for c in CASES]
    ours = evaluate_partitions(w, case_now_ms(CASES), RuleOptions(), allowed_lag=allowed)
    want = [c["expected"]["calculatePartitionStatus"] for c in CASES]
    assert [Status(int(s)).name for s in ours.status] == want


def test_e_young_window_needs_three_gaps_of_silence() -> None:
    """Two commits 100 s apart, then 150 s of silence with lag: Burrow says STOP (one gap is
    its whole span); ours waits for three gaps. A lone commit waits young_window_stop_ms."""
    two = PartitionWindows.from_arrays(
        [[100, 110]], [[1_000_000, 1_100_000]], [[50, 60]], [2], [60], [[200]], window_size=10
    )
    assert evaluate_partitions(two, 1_250_000, BURROW).status[0] == Status.STOP
    # Not STOP: the next rules apply (lag never decreased: WARN).
    assert evaluate_partitions(two, 1_250_000, RuleOptions()).status[0] == Status.WARN
    assert evaluate_partitions(two, 1_400_001, RuleOptions()).status[0] == Status.STOP
    off = RuleOptions(young_window_stop_ms=0)
    assert evaluate_partitions(two, 1_250_000, off).status[0] == Status.STOP
    lone = PartitionWindows.from_arrays(
        [[100]], [[1_000_000]], [[5]], [1], [50], [[200]], window_size=10
    )
    assert evaluate_partitions(lone, 1_059_000, BURROW).status[0] == Status.STOP
    assert evaluate_partitions(lone, 1_059_000, RuleOptions()).status[0] == Status.OK
    assert evaluate_partitions(lone, 1_060_001, RuleOptions()).status[0] == Status.STOP
    # Seconds after its only commit Burrow already calls it STALL (one offset is "all equal").
    assert evaluate_partitions(lone, 1_000_000, BURROW).status[0] == Status.STALL
    assert evaluate_partitions(lone, 1_000_000, RuleOptions()).status[0] == Status.OK


def _steady(lags: list[int], step: int = 10) -> PartitionWindows:
    """Five commits one second apart whose offsets advance ``step`` per commit, each stored
    with the given lag at ingest (-1: unknown); the current lag is the largest."""
    offsets = [1000 + step * i for i in range(len(lags))]
    ts = [1_000_000 + 1000 * i for i in range(len(lags))]
    return PartitionWindows.from_arrays(
        [offsets], [ts], [lags], [len(lags)], [max(lags)], [[offsets[-1] + max(lags)]],
        window_size=len(lags),
    )


@pytest.mark.parametrize("lags", [[9, 9, 9, 9, 9], [4, 4, 5, 5, 5], [2, 4, 6, 8, 10]])
def test_f_lag_within_sampling_noise_is_not_warn(lags: list[int]) -> None:
    """A consumer that keeps up with 10 records per commit gap, sampled at drifting phases: its
    lag at ingest stays flat or creeps up for a whole window (as the real broker showed).
    Burrow says WARN; ours waits for growth beyond two gaps of production."""
    w = _steady(lags)
    now = 1_004_500  # soon after the last commit: not STOP
    assert evaluate_partitions(w, now, BURROW).status[0] == Status.WARN
    assert evaluate_partitions(w, now, RuleOptions()).status[0] == Status.OK
    assert evaluate_partitions(w, now, RuleOptions(warn_lag_gaps=0)).status[0] == Status.WARN


def test_f_consumer_falling_behind_is_warn() -> None:
    """8 of every 10 records consumed per gap: the lag grows 2 per commit. It is WARN once it
    exceeded two gaps of production (20 records) at two commits in a row, and stays WARN while
    it keeps growing."""
    now = 1_004_500
    assert evaluate_partitions(_steady([30, 32, 34, 36, 38], step=8), now).status[0] == \
        Status.WARN
    assert evaluate_partitions(_steady([16, 18, 20, 22, 24], step=8), now).status[0] == \
        Status.WARN
    assert evaluate_partitions(_steady([14, 16, 18, 20, 22], step=8), now).status[0] == \
        Status.OK  # above the bound at the last commit only: one step so far
    assert evaluate_partitions(_steady([10, 12, 14, 16, 18], step=8), now).status[0] == \
        Status.OK
    # A large lag that stays flat keeps pace: not falling behind (lag-in-seconds alerts cover
    # "too far behind"); one that grew then fell back is not WARN in either rule set.
    assert evaluate_partitions(_steady([500] * 5), now).status[0] == Status.OK
    assert evaluate_partitions(_steady([500] * 5), now, BURROW).status[0] == Status.WARN
    # The first and last *known* lags are compared (unknown lags are skipped, as Burrow does).
    w = _steady([-1, 10, 12, 14, -1], step=8)
    assert evaluate_partitions(w, now, BURROW).status[0] == Status.WARN
    assert evaluate_partitions(w, now).status[0] == Status.OK  # 14 < 2 x 10
    w = _steady([-1, 30, 32, 34, -1], step=8)
    assert evaluate_partitions(w, now).status[0] == Status.WARN  # 34 > 2 x 10


def test_f_a_burst_absorbed_before_the_next_commit_is_not_warn() -> None:
    """2 records per gap, then 3,000 at once, read before the commit that covers them: one lag
    far above the others is a step, not a trend. Burrow says WARN; ours waits for a second
    commit above the bound, which a consumer that absorbed the burst never shows."""
    now = 1_004_500
    w = _steady([1, 1, 1, 1, 3000], step=2)
    assert evaluate_partitions(w, now, BURROW).status[0] == Status.WARN
    assert evaluate_partitions(w, now).status[0] == Status.OK
    # Not absorbed: the next commit is still above the bound, and growing.
    assert evaluate_partitions(_steady([1, 1, 1, 3000, 3100], step=2), now).status[0] == \
        Status.WARN


def test_empty_window_is_ok_with_complete_zero() -> None:
    w = PartitionWindows.from_arrays(
        np.full((2, 10), 7),
        np.full((2, 10), 7),
        np.full((2, 10), 7),
        counts=[0, 10],
        current_lag=[500, 500],
        broker_offsets=[[10**9], [10**9]],
        broker_counts=[1, 1],
    )
    res = evaluate_partitions(w, 7, BURROW)  # no time has passed: not stopped
    assert res.status[0] == Status.OK and res.complete[0] == 0.0
    assert res.status[1] == Status.STALL and res.complete[1] == 1.0  # same data, filled
    assert not res.stopped[0] and res.rewind_index[0] == -1


def test_rewind_recovery_needs_reaching_the_old_offset() -> None:
    """Offsets 100, 300, 200, then x: recovered iff x >= 300 (the offset before the rewind)."""
    xs = [250, 299, 300, 301]
    w = PartitionWindows.from_arrays(
        [[100, 300, 200, x] for x in xs],
        [[0, 10, 20, 30]] * 4,
        [[5, 5, 5, 5]] * 4,
        counts=[4] * 4,
        current_lag=[5] * 4,
        broker_offsets=[[10**6]] * 4,
    )
    res = evaluate_partitions(w, 35, BURROW)
    assert res.rewind_index.tolist() == [2] * 4
    assert res.rewind_recovered.tolist() == [False, False, True, True]
    assert [Status(s).name for s in res.status] == ["REWIND", "REWIND", "WARN", "WARN"]


# --- Burrow's storage fixture groups -------------------------------------------------------


def fixture_windows(names: list[str]) -> tuple[PartitionWindows, float]:
    """The fixture groups as Burrow's evaluator sees them: a ring of 10, the broker offset
    4321, timestamps relative to now."""
    now = 1_700_000_000_000.0
    rows = [FIXTURES[n]["consumer_offsets_in_commit_order"] for n in names]
    width = 10
    off = np.zeros((len(rows), width), dtype=np.int64)
    ts = np.zeros_like(off)
    lag = np.zeros_like(off)
    for i, r in enumerate(rows):
        off[i, : len(r)] = [o["offset"] for o in r]
        ts[i, : len(r)] = [now + o["timestamp_ms_relative_to_now"] for o in r]
        lag[i, : len(r)] = [o["lag_as_stored_derived"] for o in r]
    leo = [FIXTURES[n]["broker_offset"]["offset"] for n in names]
    cur = [max(leo[i] - r[-1]["offset"], 0) for i, r in enumerate(rows)]
    w = PartitionWindows.from_arrays(
        off, ts, lag, [len(r) for r in rows], cur, [[x] for x in leo], window_size=10
    )
    return w, now


@pytest.mark.parametrize("options", [BURROW, RuleOptions()], ids=["burrow", "defaults"])
def test_storage_fixture_groups(options: RuleOptions) -> None:
    w, now = fixture_windows(["testgroup", "testgroup2"])
    parts, groups = evaluate(w, GroupIndex([0, 1]), now, options)
    one, two = FIXTURES["testgroup"], FIXTURES["testgroup2"]
    e1, e2 = one["expected_group_status_from_tests"], two["expected_group_status_from_tests"]
    names = groups.status_names()
    assert names[0] == e1["status"]
    assert names[1] == (e2["status"] if options.burrow_err else "STOP")
    assert groups.complete.tolist() == [e1["complete"], e2["complete"]]
    assert groups.partition_count.tolist() == [e1["total_partitions"], e2["total_partitions"]]
    assert groups.totallag.tolist() == [e1["total_lag"], e2["total_lag"]]
    assert parts.complete[1] == e2["partition_0"]["complete"]
    assert Status(int(parts.status[1])).name == e2["partition_0"]["status"]
    m = int(groups.maxlag[1])
    assert w.offsets[m, 0] == e2["maxlag"]["start_offset"]
    assert w.offsets[m, w.counts[m] - 1] == e2["maxlag"]["end_offset"]


def test_group_with_no_partitions_is_ok_complete_zero() -> None:
    """Burrow's testgroup after its topic is deleted: OK, no partitions, complete 0."""
    w, now = fixture_windows(["testgroup"])
    _, groups = evaluate(w, GroupIndex([0], n_groups=2), now, BURROW)
    assert groups.status_names()[1] == "OK"
    assert groups.complete[1] == 0.0 and groups.partition_count[1] == 0
    assert groups.maxlag[1] == -1 and groups.totallag[1] == 0


# --- group status ---------------------------------------------------------------------------


def test_group_status_ranking_and_burrow_mapping() -> None:
    order = [Status.OK, Status.WARN, Status.REWIND, Status.STALL, Status.STOP]
    assert order == sorted(order)
    assert to_burrow([int(s) for s in Status], group=True).tolist() == [0, 1, 2, 3, 3, 3]
    part = to_burrow([int(s) for s in Status], group=False)
    assert [BurrowStatus(int(b)).name for b in part] == [s.name for s in Status]


def test_group_maxlag_first_among_ties_in_input_order() -> None:
    groups = GroupIndex([1, 0, 1, 0, 1])
    lag = np.array([7, 3, 9, 3, 9])
    assert groups.argmax(lag).tolist() == [1, 2]
    assert groups.sum(lag).tolist() == [6, 25]


# --- options (a), (b), (c) -----------------------------------------------------------------

X = 1_000_000  # committed offset in the scenarios below
T = 10_000_000_000  # ms


def idle_then_data(
    data_age_s: float, commit_gap_s: float = 15.0
) -> tuple[PartitionWindows, LeoHistory, float]:
    """A consumer that committed every ``commit_gap_s`` while caught up (lag 0), then the topic
    went quiet for two hours; 5 records arrived ``data_age_s`` ago and the consumer has not
    committed since. Burrow's broker ring holds only log ends seen after the data arrived."""
    last = T
    ts = [last - commit_gap_s * 1000 * (9 - i) for i in range(10)]
    now = last + 2 * 3600 * 1000
    arrived = now - data_age_s * 1000
    w = PartitionWindows.from_arrays(
        [[X] * 10],
        [ts],
        [[0] * 10],
        [10],
        [5],
        [[X + 5] * 10],
    )
    # History (flat runs collapsed): at X since before the commits until just before the data.
    hist = LeoHistory.from_arrays(
        [[X, X, X + 5, X + 5]], [[ts[0], arrived - 10_000, arrived, now]], [4]
    )
    return w, hist, now


def test_a_idle_topic_no_false_stop_when_data_just_arrived() -> None:
    w, hist, now = idle_then_data(data_age_s=120)  # window span 135 s > 120 s since data
    assert evaluate_partitions(w, now, BURROW, hist).status[0] == Status.STOP
    res = evaluate_partitions(w, now, RuleOptions(), hist)
    assert res.status[0] == Status.OK
    assert res.stop_clock_ms[0] == now - 130_000  # last seen caught up, not the last commit


def test_a_still_stops_a_consumer_that_does_not_react() -> None:
    """Data arrived longer ago than the consumer's own commit span: STOP, as in Burrow."""
    w, hist, now = idle_then_data(data_age_s=600)
    assert evaluate_partitions(w, now, RuleOptions(), hist).status[0] == Status.STOP


def test_a_is_not_lag_zero_at_last_commit_means_ok() -> None:
    """Burrow #290 / case 9: caught up at every commit, then dead while data kept coming.
    Without a history the default rules keep Burrow's STOP; with a history showing the log end
    moved on long ago, STOP too."""
    case = CASES[9]
    w = windows_from_cases([case])
    now = case["time_now_s"] * 1000
    assert evaluate_partitions(w, now, RuleOptions()).status[0] == Status.STOP
    last_ts = case["offsets"][-1]["timestamp_ms"]
    last_off = case["offsets"][-1]["offset"]
    hist = LeoHistory.from_arrays([[last_off, last_off + 900]], [[last_ts, last_ts + 1000]])
    assert evaluate_partitions(w, now, RuleOptions(), hist).status[0] == Status.STOP


def progress_committer(
    idle_s: float, data_age_s: float, commit_gap_s: float = 1.0
) -> tuple[PartitionWindows, LeoHistory, float]:
    """A consumer that commits only when it made progress: three commits ``commit_gap_s``
    apart, caught up at the last; the log end then stayed at its offset for ``idle_s``, and 5
    records arrived ``data_age_s`` ago (not consumed yet)."""
    last = T
    ts = [last - int(commit_gap_s * 1000) * (2 - i) for i in range(3)]
    arrived = last + int(idle_s * 1000)
    now = arrived + int(data_age_s * 1000)
    w = PartitionWindows.from_arrays(
        [[X - 20, X - 10, X]], [ts], [[0, 0, 0]], [3], [5], [[X + 5] * 10]
    )
    points = [(ts[0], X - 20), (last, X)]
    if idle_s > 1:
        points.append((arrived - 1000, X))  # the flat run's last observation
    points += [(arrived, X + 5), (now, X + 5)]
    hist = LeoHistory.from_arrays([[o for _, o in points]], [[t for t, _ in points]])
    return w, hist, now


def test_a_idle_progress_committer_gets_the_grace_then_stops() -> None:
    """Its window spans 2 s, so both Burrow and a plain "clock from last caught-up" would call
    it STOP seconds after data arrives after an idle hour; it gets idle_grace_ms (60 s)."""
    w, hist, now = progress_committer(idle_s=3600, data_age_s=30)
    assert evaluate_partitions(w, now, BURROW, hist).status[0] == Status.STOP
    assert evaluate_partitions(w, now, RuleOptions(idle_grace_ms=0), hist).status[0] == (
        Status.STOP
    )
    assert evaluate_partitions(w, now, RuleOptions(), hist).status[0] == Status.OK
    # Dead while idle: once data has waited past the grace, STOP.
    w, hist, now = progress_committer(idle_s=3600, data_age_s=61)
    assert evaluate_partitions(w, now, RuleOptions(), hist).status[0] == Status.STOP


def test_a_consumer_dead_mid_stream_gets_no_grace() -> None:
    """The log end moved on within its usual commit gap after its last commit: not idle, so
    STOP after the window's span as in Burrow."""
    w, hist, now = progress_committer(idle_s=0.5, data_age_s=30)
    assert evaluate_partitions(w, now, RuleOptions(), hist).status[0] == Status.STOP


def test_d_live_member_turns_stop_into_stall() -> None:
    case = CASES[9]  # Burrow: STOP
    w = windows_from_cases([case])
    now = case["time_now_s"] * 1000
    assert evaluate_partitions(w, now, RuleOptions(), alive=False).status[0] == Status.STOP
    assert evaluate_partitions(w, now, RuleOptions(), alive=True).status[0] == Status.STALL
    off = RuleOptions(live_member_stall=False)
    assert evaluate_partitions(w, now, off, alive=True).status[0] == Status.STOP
    assert evaluate_partitions(w, now, BURROW, alive=True).status[0] == Status.STOP


def test_per_partition_now_stops_the_clock_of_stale_partitions() -> None:
    """The service passes "now" per partition, frozen where its offsets are not fresh (an
    outage of our own view is not a silent consumer)."""
    case = CASES[9]
    w = windows_from_cases([case, case])
    last_ts = case["offsets"][-1]["timestamp_ms"]
    now = case["time_now_s"] * 1000
    res = evaluate_partitions(w, np.array([now, last_ts + 1]), RuleOptions())
    assert res.status.tolist() == [Status.STOP, Status.OK]


def marker_windows(
    lag_at_commits: int, current: int, recommitting: bool
) -> tuple[PartitionWindows, float]:
    """A consumer at X with ``current`` lag. ``recommitting``: it keeps committing X every 5 s
    (Java auto-commit; Burrow says STALL); else it went silent an hour ago (Burrow: STOP)."""
    gap = 5_000
    ts = [T + gap * i for i in range(10)]
    now = ts[-1] + (gap if recommitting else 3600_000)
    w = PartitionWindows.from_arrays(
        [[X] * 10], [ts], [[lag_at_commits] * 10], [10], [current], [[X + current] * 10]
    )
    return w, now


@pytest.mark.parametrize("recommitting", [False, True])
def test_b_transaction_marker_lag_is_caught_up(recommitting: bool) -> None:
    w, now = marker_windows(1, 1, recommitting)
    burrow = evaluate_partitions(w, now, BURROW).status[0]
    assert burrow == (Status.STALL if recommitting else Status.STOP)
    res = evaluate_partitions(w, now, RuleOptions())
    assert res.status[0] == Status.OK and res.markers_only[0] and res.caught_up[0]


def test_b_tolerance_is_configurable_and_bounded() -> None:
    w, now = marker_windows(3, 3, recommitting=False)
    assert evaluate_partitions(w, now, RuleOptions()).status[0] == Status.STOP
    assert evaluate_partitions(w, now, RuleOptions(marker_tolerance=3)).status[0] == Status.OK
    assert evaluate_partitions(w, now, RuleOptions(marker_tolerance=0)).status[0] == Status.STOP


def test_b_a_record_that_arrived_after_the_commit_is_real_lag() -> None:
    """Caught up (lag 0) at the commit, one record since: not markers, Burrow's STOP holds,
    with and without a history proving the log end moved after the commit."""
    w, now = marker_windows(0, 1, recommitting=False)
    assert evaluate_partitions(w, now, RuleOptions()).status[0] == Status.STOP
    last_ts = float(w.timestamps_ms[0, -1])
    hist = LeoHistory.from_arrays([[X, X, X + 1]], [[last_ts - 1, last_ts + 60_000, now]])
    res = evaluate_partitions(w, now, RuleOptions(), hist)
    assert res.status[0] == Status.STOP and not res.markers_only[0]
    # ... whereas a history that saw X + 1 already before the commit proves markers.
    hist2 = LeoHistory.from_arrays([[X, X + 1, X + 1]], [[last_ts - 9, last_ts - 5, now]])
    assert evaluate_partitions(w, now, RuleOptions(), hist2).status[0] == Status.OK


def test_c_burrow_err_option() -> None:
    w, now = marker_windows(1, 1, recommitting=True)
    parts = evaluate_partitions(w, now, BURROW)
    burrow = evaluate_groups(parts, w.current_lag, GroupIndex([0]), BURROW)
    ours = evaluate_groups(parts, w.current_lag, GroupIndex([0]), RuleOptions(burrow_err=False))
    assert burrow.status.tolist() == [BurrowStatus.ERR] and burrow.status_names() == ["ERR"]
    assert ours.status.tolist() == [Status.STALL] and ours.status_names() == ["STALL"]


# --- the oracle and property tests ---------------------------------------------------------


@st.composite
def batches(draw: st.DrawFn, max_p: int = 12) -> dict[str, Any]:
    """Random windows with small value ranges, so ties, stalls, rewinds and lag 0 are common."""
    p = draw(st.integers(1, max_p))
    width = draw(st.integers(1, 6))
    ring = draw(st.integers(1, 4))
    ints = st.integers(0, 6)
    rows = []
    for _ in range(p):
        n = draw(st.integers(0, width))
        base = draw(st.integers(0, 3))
        steps = draw(st.lists(st.integers(-2, 3), min_size=n, max_size=n))
        offs = list(np.cumsum([base, *steps[1:]])) if n else []
        gaps = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        ts = list(np.cumsum(gaps) * 1000)
        lags = draw(st.lists(st.one_of(st.none(), ints), min_size=n, max_size=n))
        nb = draw(st.integers(0, ring))
        broker = draw(st.lists(st.integers(-2, 12), min_size=nb, max_size=nb))
        rows.append(
            dict(
                offsets=[int(o) for o in offs],
                ts=[int(t) for t in ts],
                lags=lags,
                broker=broker,
                current_lag=draw(ints),
                group=draw(st.integers(0, 3)),
                now=draw(st.integers(0, 40)) * 1000,
            )
        )
    return dict(rows=rows, width=width, ring=ring, allowed=draw(st.integers(0, 3)))


def build(b: dict[str, Any]) -> PartitionWindows:
    rows, width, ring = b["rows"], b["width"], b["ring"]
    p = len(rows)
    off = np.full((p, width), 99, dtype=np.int64)
    ts = np.full((p, width), 99, dtype=np.int64)
    lag = np.full((p, width), 99, dtype=np.int64)
    bro = np.full((p, ring), -99, dtype=np.int64)
    for i, r in enumerate(rows):
        n = len(r["offsets"])
        off[i, :n], ts[i, :n] = r["offsets"], r["ts"]
        lag[i, :n] = [-1 if x is None else x for x in r["lags"]]
        bro[i, : len(r["broker"])] = r["broker"]
    return PartitionWindows.from_arrays(
        off,
        ts,
        lag,
        [len(r["offsets"]) for r in rows],
        [r["current_lag"] for r in rows],
        bro,
        [len(r["broker"]) for r in rows],
    )


options_st = st.builds(
    RuleOptions,
    allowed_lag=st.integers(0, 3),
    idle_aware_stop=st.booleans(),
    idle_grace_ms=st.sampled_from([0.0, 5_000.0, 60_000.0]),
    marker_tolerance=st.integers(0, 3),
    burrow_err=st.booleans(),
    live_member_stall=st.booleans(),
    warn_lag_gaps=st.sampled_from([0.0, 0.5, 2.0]),
)


@settings(max_examples=300, deadline=None)
@given(batches())
def test_vectorised_equals_per_partition_oracle(b: dict[str, Any]) -> None:
    w = build(b)
    now = np.array([r["now"] for r in b["rows"]], dtype=np.float64)
    res = evaluate_partitions(w, now, RuleOptions.burrow(b["allowed"]))
    want = [
        reference_partition(
            r["offsets"], r["ts"], r["lags"], r["current_lag"], r["broker"], r["now"], b["allowed"]
        )
        for r in b["rows"]
    ]
    assert [Status(int(s)) for s in res.status] == want


@settings(max_examples=200, deadline=None)
@given(batches(), options_st)
def test_caught_up_is_never_non_ok(b: dict[str, Any], opt: RuleOptions) -> None:
    w = build(b)
    res = evaluate_partitions(w, 20_000, opt)
    ok = w.current_lag <= opt.allowed_lag
    assert np.all(res.status[ok] == Status.OK)
    assert np.all(res.status[w.counts == 0] == Status.OK)


@settings(max_examples=150, deadline=None)
@given(batches(), options_st)
def test_batch_equals_one_by_one(b: dict[str, Any], opt: RuleOptions) -> None:
    w = build(b)
    now = np.array([r["now"] for r in b["rows"]], dtype=np.float64)
    whole = evaluate_partitions(w, now, opt)
    for i, r in enumerate(b["rows"]):
        one = evaluate_partitions(build({**b, "rows": [r]}), r["now"], opt)
        assert one.status[0] == whole.status[i]
        assert one.rewind_index[0] == whole.rewind_index[i]
        assert one.complete[0] == whole.complete[i]


@settings(max_examples=150, deadline=None)
@given(batches(), st.integers(0, 10**6), options_st)
def test_permuting_groups_and_partitions_changes_nothing(
    b: dict[str, Any], seed: int, opt: RuleOptions
) -> None:
    rng = np.random.default_rng(seed)
    w = build(b)
    gid = np.array([r["group"] for r in b["rows"]])
    parts, groups = evaluate(w, GroupIndex(gid, 4), 20_000, opt)
    relabel = rng.permutation(4)  # group g becomes relabel[g]
    perm = rng.permutation(len(gid))  # partitions shuffled
    w2 = build({**b, "rows": [b["rows"][i] for i in perm]})
    parts2, groups2 = evaluate(w2, GroupIndex(relabel[gid[perm]], 4), 20_000, opt)
    assert np.array_equal(parts2.status, parts.status[perm])
    for g in range(4):
        h = relabel[g]
        assert groups2.status[h] == groups.status[g]
        assert groups2.totallag[h] == groups.totallag[g]
        assert groups2.complete[h] == groups.complete[g]
        assert groups2.partition_count[h] == groups.partition_count[g]
        if groups.maxlag[g] >= 0:  # same lag (ties may pick another partition)
            assert w2.current_lag[groups2.maxlag[h]] == w.current_lag[groups.maxlag[g]]


@settings(max_examples=150, deadline=None)
@given(batches(), options_st)
def test_group_results_equal_a_plain_loop(b: dict[str, Any], opt: RuleOptions) -> None:
    w = build(b)
    gid = np.array([r["group"] for r in b["rows"]])
    parts, groups = evaluate(w, GroupIndex(gid, 4), 20_000, opt)
    for g in range(4):
        members = [i for i in range(len(gid)) if gid[i] == g]
        worst = max((int(parts.status[i]) for i in members), default=int(Status.OK))
        want = to_burrow([worst], group=True)[0] if opt.burrow_err else worst
        assert groups.status[g] == want
        lags = [int(w.current_lag[i]) for i in members]
        assert groups.totallag[g] == sum(lags)
        assert groups.maxlag[g] == (members[lags.index(max(lags))] if members else -1)
        full = sum(1 for i in members if parts.complete[i] >= 1)
        assert groups.complete[g] == (full / len(members) if members else 0.0)


@settings(max_examples=150, deadline=None)
@given(batches(), options_st)
def test_options_only_ever_remove_alarms(b: dict[str, Any], opt: RuleOptions) -> None:
    """Without a log-end history and without departures (``left_ms``), the options never
    raise a status Burrow would not: each improved status is either the same as Burrow's or
    OK / a less severe status reached by a later rule. The two places they raise STOP sooner
    on purpose, a consumer that died caught up (a history replaces Burrow's "recently caught
    up" exception) and one whose consumers left (g), have their own tests."""
    w = build(b)
    alive = np.arange(w.size) % 2 == 0
    ours = evaluate_partitions(w, 20_000, opt, alive=alive).status
    theirs = evaluate_partitions(w, 20_000, RuleOptions.burrow(opt.allowed_lag)).status
    assert np.all((ours == theirs) | (ours < theirs) | (ours == Status.OK))
    assert not np.any((ours == Status.STOP) & (theirs != Status.STOP))


# --- the trend window and (g), the causes issue 13 found -------------------------------------


def _one(
    lags: list[int], *, step_ms: int = 1000, trend: list[int] | None = None, current: int = 0,
    ring: list[int] | None = None,
) -> PartitionWindows:
    """One partition whose consumer commits 100 records a step; ``lags`` as stored at ingest,
    ``trend`` (optional) the same commits' lags at their own times."""
    n = len(lags)
    offsets = [100 * (i + 1) for i in range(n)]
    stamps = [step_ms * (i + 1) for i in range(n)]
    return PartitionWindows.from_arrays(
        [offsets], [stamps], [lags], counts=[n], current_lag=[current],
        broker_offsets=[ring if ring is not None else [offsets[-1] + current]],
        trend=None if trend is None else ([offsets], [trend], [n]),
    )


def test_warn_is_judged_on_the_lag_at_commit_time() -> None:
    """Lags taken at ingest against a log end sampled every 10 s fall between samples (the
    consumer moves, the sample does not) though the consumer falls behind: the trend window,
    lags at each commit's own time, is what the WARN rule reads."""
    aliased = [400, 300, 200, 100, 500, 400, 300, 200, 100, 900]  # falls within each sample
    truth = [300 * (i + 1) for i in range(10)]  # 3 records produced per one consumed
    now = 10_500.0
    without = evaluate_partitions(_one(aliased, current=3000), now)
    assert Status(int(without.status[0])) == Status.OK
    with_trend = evaluate_partitions(_one(aliased, trend=truth, current=3000), now)
    assert Status(int(with_trend.status[0])) == Status.WARN
    # A trend window without a known lag (no log-end sample bracketing a commit yet) is no
    # trend: never WARN from nothing.
    unknown = evaluate_partitions(_one(aliased, trend=[-1] * 10, current=3000), now)
    assert Status(int(unknown.status[0])) == Status.OK


def test_consumers_gone_is_stop_after_the_grace_not_the_window_span() -> None:
    """(g): a consumer committing every 5 s (span 45 s) that left the group at 51 s while data
    arrives is STOP once 10 s pass since it left; without the option (Burrow) only after
    the span."""
    w = _one([0] * 10, step_ms=5000, current=200, ring=[1100, 1150, 1200])
    left = 51_000.0
    for now, want in ((60_000.0, Status.OK), (61_500.0, Status.STOP)):
        got = evaluate_partitions(w, now, RuleOptions(), left_ms=left)
        assert Status(int(got.status[0])) == want, now
    burrow_like = RuleOptions(gone_stop_ms=0.0)
    assert Status(int(evaluate_partitions(w, 61_500.0, burrow_like, left_ms=left)
                      .status[0])) == Status.OK
    assert Status(int(evaluate_partitions(w, 96_000.0, burrow_like, left_ms=left)
                      .status[0])) == Status.STOP
    # Not gone (NaN), or gone long ago but committing since: the span rules.
    assert Status(int(evaluate_partitions(w, 61_500.0, RuleOptions(), left_ms=np.nan)
                      .status[0])) == Status.OK

"""The failover verdict on what was read (monitor/rules/failover.py): every state, from scans
of a destination as a mirror would leave it."""

from __future__ import annotations

from monitor.rules.failover import Record, Scan, find_anchor, reread_seconds

MARGIN = 60_000
ANCHOR = Record(offset=40, timestamp_ms=1_000_000, digest="a")


def scan(partition: int, *records: tuple[int, int, str], end: bool = False) -> Scan:
    return Scan(partition, tuple(Record(o, t, d) for o, t, d in records), end)


def test_the_copy_found_after_the_start_is_verified_where_it_is() -> None:
    found = find_anchor([scan(0, (7, 999_000, "x"), (8, 1_000_000, "b"), (9, 1_000_000, "a"))],
                        ANCHOR, MARGIN, caught_up=False)
    assert (found.state, found.partition, found.offset) == ("verified", 0, 9)


def test_a_record_with_the_same_time_but_other_content_is_not_the_copy() -> None:
    found = find_anchor([scan(0, (8, 1_000_000, "b"), end=True)], ANCHOR, MARGIN, False)
    assert found.state == "mirror_behind"


def test_a_scan_that_reached_the_log_end_without_it_means_the_mirror_is_behind() -> None:
    found = find_anchor([scan(0, (1, 990_000, "x"), end=True)], ANCHOR, MARGIN, False)
    assert found.state == "mirror_behind" and "not received" in (found.reason or "")


def test_past_the_anchors_time_without_it_is_a_skip_never_verified() -> None:
    found = find_anchor([scan(0, (1, 990_000, "x"), (2, 1_000_000 + MARGIN + 1, "y"))],
                        ANCHOR, MARGIN, caught_up=False)
    assert found.state == "would_skip"


def test_a_caught_up_groups_lost_last_record_is_unverifiable_not_a_skip() -> None:
    found = find_anchor([scan(0, (2, 1_000_000 + MARGIN + 1, "y"))], ANCHOR, MARGIN, True)
    assert found.state == "unverifiable" and "last consumed" in (found.reason or "")


def test_records_out_of_order_within_the_margin_are_not_a_skip() -> None:
    found = find_anchor([scan(0, (2, 1_000_000 + MARGIN, "y"))], ANCHOR, MARGIN, False)
    assert found.state == "unverifiable" and "budget" in (found.reason or "")


def test_with_any_partitioning_every_partition_must_pass_it_before_a_skip() -> None:
    past = (5, 1_000_000 + MARGIN + 1, "y")
    assert find_anchor([scan(0, past), scan(1, (3, 999_999, "z"))], ANCHOR, MARGIN,
                       False).state == "unverifiable"
    assert find_anchor([scan(0, past), scan(1, past)], ANCHOR, MARGIN, False).state \
        == "would_skip"
    assert find_anchor([scan(0, past), scan(1, (9, 1_000_000, "a"))], ANCHOR, MARGIN,
                       False).partition == 1


def test_reread_seconds_from_the_earliest_start_to_the_latest_anchor() -> None:
    assert reread_seconds([5_000, 9_000], [2_000, None, 4_000]) == 7.0
    assert reread_seconds([5_000], [None]) == 0.0
    assert reread_seconds([], [1]) is None

"""Group lifecycle (monitor/store/lifecycle.py): rebalances counted from generations or from
Admin API reads, their causes, time spent rebalancing, storms, the bounded history, and the
whole of it kept across a restart of the service (the store's snapshot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import ClusterConfig, RebalanceConfig, StateConfig
from monitor.model.observations import GroupMember, GroupMembership
from monitor.store.lifecycle import GroupLifecycle, observe
from monitor.store.snapshot import StateFile
from monitor.store.store import Store

C, G = "c1", "orders"
T0 = 1_800_000_000.0


def members(*ids: str) -> tuple[GroupMember, ...]:
    return tuple(GroupMember(i, f"client-{i}", f"/10.0.0.{n}") for n, i in enumerate(ids, 1))


def seen(at: float, state: str, ids: tuple[str, ...], generation: int | None = None,
         source: str = "admin") -> GroupMembership:
    return GroupMembership(C, G, source, at, state, "consumer", "range",  # type: ignore[arg-type]
                           generation, members(*ids))


def run(*observations: GroupMembership | tuple[float, None]) -> GroupLifecycle:
    lc: GroupLifecycle | None = None
    for o in observations:
        lc = observe(lc, None, o[0]) if isinstance(o, tuple) else observe(lc, o, o.observed_at)
    assert lc is not None
    return lc


def test_generations_count_exactly_even_when_records_were_compacted_away() -> None:
    lc = run(
        seen(T0, "Stable", ("a",), 3, "offsets_topic"),
        seen(T0 + 10, "Stable", ("a", "b"), 4, "offsets_topic"),  # b joined
        seen(T0 + 20, "Stable", ("b",), 7, "offsets_topic"),  # 3 generations later, a gone
        seen(T0 + 21, "Stable", ("b",), 7, "offsets_topic"),  # the same record seen again
    )
    assert lc.rebalances == 1 + 3
    assert lc.exact and lc.last_cause == "member left or timed out"
    assert (lc.joined, lc.left) == (1, 1)
    assert [(c.generation, c.rebalances, c.cause) for c in lc.history] == [
        (3, 0, None), (4, 1, "member joined"), (7, 3, "member left or timed out")]


def test_a_group_emptied_and_formed_again_on_0_9_counts_its_new_generation() -> None:
    """0.9 writes a tombstone when the last member leaves, and the group's next generation
    starts again from 1."""
    lc = run(
        seen(T0, "Stable", ("a",), 5, "offsets_topic"),
        (T0 + 5, None),
        seen(T0 + 9, "Stable", ("c",), 1, "offsets_topic"),
    )
    assert lc.rebalances == 1
    assert [(c.state, c.cause) for c in lc.history] == [
        ("Stable", None), ("Empty", None), ("Stable", "group formed")]
    assert (lc.joined, lc.left) == (1, 1)


def test_admin_reads_count_a_rebalance_per_changed_member_set_and_time_it() -> None:
    lc = run(
        seen(T0, "Stable", ("a", "b")),
        seen(T0 + 10, "Stable", ("a", "b")),  # nothing happened
        seen(T0 + 20, "PreparingRebalance", ("a", "b")),  # c is joining
        seen(T0 + 30, "AwaitingSync", ("a", "b", "c")),  # 0.9's CompletingRebalance
        seen(T0 + 40, "Stable", ("a", "b", "c")),  # done: one rebalance, 20 s
        seen(T0 + 50, "Stable", ("a", "c")),  # b left between two reads
        seen(T0 + 60, "Dead", ()),  # 0.9: the group emptied
    )
    assert lc.rebalances == 2 and not lc.exact
    assert lc.rebalancing_seconds == 20.0
    assert lc.last_cause == "member left or timed out"
    status = lc.status(T0 + 61, storm_count=5, storm_window=600)
    assert status.counted_from == "member changes" and status.recent_rebalances == 2
    assert not status.rebalancing and status.rebalancing_seconds == 20.0
    # An open span counts up to now.
    lc2 = observe(lc, seen(T0 + 70, "PreparingRebalance", ("a",)), T0 + 70)
    assert lc2.status(T0 + 75, 5, 600).rebalancing_seconds == 25.0
    assert lc2.status(T0 + 75, 5, 600).rebalancing


def test_admin_reads_of_a_group_whose_generations_are_known_count_nothing() -> None:
    """With source ``both`` a group is seen by both: its generations count, the Admin API's
    reads only give its state and time rebalancing, so no rebalance is counted twice."""
    lc = run(
        seen(T0, "Stable", ("a",), 1, "offsets_topic"),
        seen(T0 + 5, "PreparingRebalance", ("a",)),
        seen(T0 + 8, "Stable", ("a", "b")),  # Admin read: not counted
        seen(T0 + 8.5, "Stable", ("a", "b"), 2, "offsets_topic"),  # the generation: counted
    )
    assert lc.rebalances == 1 and lc.last_cause == "member joined"
    assert lc.rebalancing_seconds == 3.0
    assert (lc.joined, lc.left) == (1, 0)


@pytest.mark.parametrize(("rebalances", "storm"), [(5, False), (6, True)])
def test_a_storm_is_more_than_storm_count_within_the_window(rebalances: int,
                                                             storm: bool) -> None:
    obs = [seen(T0, "Stable", ("a",), 1, "offsets_topic")]
    obs += [seen(T0 + 60 * k, "Stable", ("a", f"m{k}"), 1 + k, "offsets_topic")
            for k in range(1, rebalances + 1)]
    lc = run(*obs)
    now = T0 + 60 * rebalances + 1
    assert lc.status(now, storm_count=5, storm_window=600).storm is storm
    # Ten minutes after the last one, the storm is over; the count stays.
    later = lc.status(now + 600, storm_count=5, storm_window=600)
    assert not later.storm and later.rebalances == rebalances


def test_history_is_bounded_and_keeps_the_newest() -> None:
    lc: GroupLifecycle | None = None
    for k in range(50):
        lc = observe(lc, seen(T0 + k, "Stable", (f"m{k}",), k + 1, "offsets_topic"), T0 + k,
                     history=20)
    assert lc is not None and len(lc.history) == 20
    assert lc.history[-1].generation == 50 and lc.rebalances == 49
    assert len(lc.recent) == 6  # what a storm of the default count needs, no more


def test_lifecycle_survives_a_restart_through_the_state_file(tmp_path: Path) -> None:
    clusters = [ClusterConfig(name=C, bootstrap_servers=["h:9092"])]
    state = StateFile(StateConfig(path=tmp_path), clusters)
    store = Store(rebalance_config=RebalanceConfig())
    store.put_group(seen(T0, "Stable", ("a",), 1, "offsets_topic"))
    store.put_group(seen(T0 + 5, "Stable", ("a", "b"), 2, "offsets_topic"))
    assert state.save(store)
    restored = Store()
    assert state.load(restored) is not None
    lc = restored.group_states(C)[G].lifecycle
    assert lc is not None and lc.rebalances == 1 and lc.last_cause == "member joined"
    # And counting goes on from there.
    restored.put_group(seen(T0 + 9, "Stable", ("b",), 3, "offsets_topic"))
    after = restored.group_states(C)[G].lifecycle
    assert after is not None and after.rebalances == 2 and len(after.history) == 3

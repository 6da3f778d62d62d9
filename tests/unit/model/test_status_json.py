"""A verdict as JSON and back (what the Spark stream publishes and a service with
``offsets_source: pipeline`` serves), and the evaluation built from published verdicts."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from monitor.evaluate.job import PublishedEvaluation
from monitor.model.observations import GroupMember
from monitor.model.status_json import group_from_json, status_json
from monitor.model.verdicts import CommitPoint, GroupStatus, PartitionStatus
from monitor.serve.metrics.lag import render_cluster


def partition(n: int, status: str, lag: int) -> PartitionStatus:
    return PartitionStatus(
        topic="orders", partition=n, status=status,
        start=CommitPoint(100, 1_700_000_000_000, 1_700_000_000_100, None),
        end=CommitPoint(140, 1_700_000_010_000, 1_700_000_010_100, lag),
        current_lag=lag, lag_seconds=1.5 * lag, lag_seconds_lower_bound=n == 1,
        complete=1.0, owner="/10.0.0.1" if n else "", client_id="c-1" if n else "",
    )


def verdict(group: str = "payments", evaluated_at: float = 1000.0) -> GroupStatus:
    parts = (partition(0, "OK", 0), partition(1, "STOP", 42))
    return GroupStatus(
        cluster="prod", group=group, status="STOP", complete=1.0, partitions=parts,
        partition_count=2, maxlag=parts[1], totallag=42, lag_seconds=63.0, state="Empty",
        generation=7, member_list=(GroupMember("m-1", "c-1", "/10.0.0.1", (("orders", 1),)),),
        stale=False, offsets_age_seconds=2.5, evaluated_at=evaluated_at,
    )


def test_a_status_object_reads_back_as_the_verdict_it_was_rendered_from() -> None:
    g = verdict()
    text = json.dumps(status_json(g, only_non_ok=False))
    assert group_from_json(json.loads(text)) == g
    assert group_from_json(json.loads(text), stale=True).stale is True


@pytest.mark.parametrize("damage", [
    lambda d: d.pop("totallag"),
    lambda d: d.update(status="BROKEN"),
    lambda d: d.update(partitions=[{"topic": "orders"}]),
    lambda d: d.update(totallag="many"),
    lambda d: d.update(member_list=None),
])
def test_anything_else_is_rejected(damage: object) -> None:
    d = status_json(verdict(), only_non_ok=False)
    damage(d)  # type: ignore[operator]
    with pytest.raises((KeyError, ValueError, TypeError)):
        group_from_json(d)


def test_published_verdicts_are_served_stale_past_their_max_age() -> None:
    published = {"fresh": verdict("fresh", 990.0), "old": verdict("old", 900.0),
                 "flagged": replace(verdict("flagged", 995.0), stale=True)}
    ev = PublishedEvaluation("prod", 1000.0, 0.0, published, max_age=60.0)
    assert ev.group_names() == ["flagged", "fresh", "old"]
    assert ev.stale_groups == {"old", "flagged"}
    fresh, old = ev.group("fresh"), ev.group("old")
    assert fresh is not None and old is not None
    assert (fresh.stale, old.stale) == (False, True)
    assert old.status == "STOP" and old.totallag == 42  # held, not dropped
    assert ev.group("unknown") is None
    ev.forget("fresh", "orders")
    trimmed = ev.group("fresh")
    assert trimmed is not None and trimmed.partitions == ()
    ev.forget("old")
    assert ev.group("old") is None and "old" not in ev.group_names()


def test_published_verdicts_are_exported_with_their_own_figures() -> None:
    ev = PublishedEvaluation("prod", 1000.0, 0.0, {"payments": verdict()}, max_age=60.0)
    text = "".join(render_cluster(ev, {}).values())
    labels = 'cluster="prod",group="payments"'
    assert f"kafka_monitor_group_status{{{labels}}} 5\n" in text
    assert f'kafka_monitor_group_status_state{{{labels},status="STOP"}} 1\n' in text
    assert f"kafka_consumergroup_group_sum_lag{{{labels}}} 42\n" in text
    assert f"kafka_consumergroup_group_max_lag{{{labels}}} 42\n" in text
    assert f"kafka_consumergroup_group_max_lag_seconds{{{labels}}} 63.0\n" in text

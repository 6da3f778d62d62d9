"""A failover plan's JSON form is a contract between the API, ``plan --json`` and ``apply``."""

from __future__ import annotations

import json

from monitor.model.failover import (
    DestinationPartition,
    GroupPlan,
    SourcePartition,
    TopicPlan,
    worst,
)


def plan() -> GroupPlan:
    topic = TopicPlan("orders", "src.orders", "same", "verified", None,
                      [SourcePartition(0, 5, 9, "next", 1000, "verified", None, 0, 7)],
                      [DestinationPartition(0, 4, 990, 12, 3)], 3, True, 0.01)
    return GroupPlan("dr", "billing", "verified", None, 60.0, 100.0, 110.0, [topic])


def test_the_json_form_reads_back_as_the_same_plan() -> None:
    original = plan()
    body = json.loads(json.dumps(original.as_dict(now=130.0)))
    assert body["age_seconds"] == 20.0 and body["ready"] and body["reread_records"] == 3
    assert GroupPlan.from_dict(body) == original


def test_apply_commits_the_destination_offsets() -> None:
    assert plan().commits() == {("src.orders", 0): 4}


def test_a_plan_is_as_good_as_its_worst_part() -> None:
    assert worst(["verified", "mirror_behind"]) == "mirror_behind"
    assert worst(["unverifiable", "would_skip", "verified"]) == "would_skip"
    assert worst([]) == "verified"

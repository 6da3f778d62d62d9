"""A consumer group's lifecycle: its state over time, its rebalances and their causes.

Kept per group by the store from every membership observation, whichever source made it, and
saved with the store (so counts and history survive a restart). Pure functions of the previous
:class:`GroupLifecycle` and one observation.

How rebalances are counted depends on what the source can tell:

* ``__consumer_offsets`` (``offsets_topic``, ``both``): the coordinator writes the group's
  metadata with a new generation each time a rebalance completes. A generation that moved from
  g to g + k is k rebalances, exactly, even when the records in between were compacted away. A
  generation that went down is a group created anew (0.9 deletes a group whose last member left,
  and its next generation starts from 1): g rebalances since.
* The Admin API (``admin``, the default): DescribeGroups gives no generation (no version of it
  does), only the state and the members. A read that finds the group Stable with another member
  set than the previous read, or Stable after a read that found it rebalancing, is one
  rebalance; several between two reads count as one, so the count is a lower bound (the API
  says which way a group's was counted). A group whose generations are known ignores the Admin
  API's reads for counting and uses them only for its state and time spent rebalancing.

The cause is read from the member lists before and after: a member joined, left (or timed
out: the records do not tell the two apart), both, the group emptied or formed, or nothing
changed (a member rejoined, e.g. a subscription change or a restart that kept its member id).

Time spent rebalancing is measured between reads that see the group in a rebalancing state
(PreparingRebalance, CompletingRebalance and 0.9's AwaitingSync; KIP-848's Assigning and
Reconciling): the Admin API's reads, since ``__consumer_offsets`` records only completed
rebalances on the brokers this reads. Its resolution is the read interval.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from monitor.model.observations import GroupMembership
from monitor.model.verdicts import GroupLifecycleStatus, StateChange

REBALANCING = frozenset(
    {"PreparingRebalance", "CompletingRebalance", "AwaitingSync", "Assigning", "Reconciling"}
)
"""Kafka's group states in which a rebalance is under way."""

EMPTIED = "Empty"
"""The state a group-metadata tombstone leaves (0.9 writes one when the last member leaves)."""


@dataclass(frozen=True, slots=True)
class GroupLifecycle:
    """What the store keeps of a group's lifecycle. Replaced, never changed, so that an
    evaluation round may hold it without a copy."""

    state: str
    since: float  # when the current state was first seen
    generation: int | None
    member_ids: frozenset[str]
    observed_at: float
    rebalances: int = 0
    rebalancing_seconds: float = 0.0  # closed rebalancing spans
    rebalancing_since: float | None = None  # an open span: rebalancing since
    last_rebalance_at: float | None = None
    last_cause: str | None = None
    joined: int = 0
    left: int = 0
    recent: tuple[float, ...] = ()  # times of the latest rebalances, oldest first
    history: tuple[StateChange, ...] = ()
    exact: bool = False  # counted from generations

    def status(self, now: float, storm_count: int, storm_window: float) -> GroupLifecycleStatus:
        """As of ``now``: the open rebalancing span counted, the storm judged."""
        open_span = max(now - self.rebalancing_since, 0.0) if self.rebalancing_since else 0.0
        recent = sum(1 for t in self.recent if t > now - storm_window)
        return GroupLifecycleStatus(
            rebalances=self.rebalances,
            rebalancing_seconds=round(self.rebalancing_seconds + open_span, 3),
            rebalancing=self.state in REBALANCING,
            last_rebalance_at=self.last_rebalance_at,
            last_cause=self.last_cause,
            members_joined=self.joined,
            members_left=self.left,
            storm=recent > storm_count,
            recent_rebalances=recent,
            counted_from="generations" if self.exact else "member changes",
            history=self.history,
        )


def _cause(before: frozenset[str], after: frozenset[str]) -> str:
    joined, left = after - before, before - after
    if not after:
        return "group emptied"
    if not before:
        return "group formed"
    if joined and left:
        return "members joined and left"
    if joined:
        return "member joined"
    if left:
        return "member left or timed out"
    return "members unchanged"


def _generation_steps(previous: int | None, generation: int | None) -> int:
    """Rebalances between two generations (see the module docstring)."""
    if previous is None or generation is None or generation == previous:
        return 0
    return generation - previous if generation > previous else generation


def observe(
    previous: GroupLifecycle | None,
    membership: GroupMembership | None,
    at: float,
    *,
    history: int = 20,
    storm_count: int = 5,
) -> GroupLifecycle:
    """The lifecycle after one observation: a membership, or None for a group-metadata
    tombstone (the group emptied or was deleted). ``history`` transitions are kept, and the
    times of the last ``storm_count + 1`` rebalances (all a storm needs)."""
    state = membership.state if membership is not None else EMPTIED
    generation = membership.generation if membership is not None else None
    ids = (
        frozenset(m.member_id for m in membership.members) if membership is not None
        else frozenset()
    )
    if previous is None:
        rebalancing_since = at if state in REBALANCING else None
        first = StateChange(at, state, generation, len(ids), 0, None)
        return GroupLifecycle(
            state, at, generation, ids, at, rebalancing_since=rebalancing_since,
            history=(first,), exact=generation is not None,
        )
    if (
        membership is not None
        and state == previous.state
        and generation in (None, previous.generation)
        and (ids == previous.member_ids or (previous.exact and generation is None))
    ):
        return previous  # the usual read: nothing changed (no new object per group and round)
    at = max(at, previous.observed_at)  # the two sources' clocks interleave
    exact = previous.exact or generation is not None
    # Who counts: records of the offsets topic (generations, tombstones), or the Admin API's
    # reads while no generation is known. A tombstone completes no rebalance: 0.9 writes one
    # when the group emptied, without a generation.
    counting = membership is None or generation is not None or not exact
    steps = 0
    if generation is not None and previous.exact:
        steps = _generation_steps(previous.generation, generation)
    elif counting and not exact and state not in REBALANCING:
        # Admin API reads: Stable with other members, Stable after rebalancing, or emptied.
        was_rebalancing = previous.rebalancing_since is not None
        changed = ids != previous.member_ids
        if (state == "Stable" and (changed or was_rebalancing)) or (
            state == EMPTIED and previous.member_ids and previous.state != EMPTIED
        ):
            steps = 1
    spent = previous.rebalancing_seconds
    open_since = previous.rebalancing_since
    if state in REBALANCING:
        open_since = open_since if open_since is not None else at
    elif open_since is not None:
        spent += max(at - open_since, 0.0)
        open_since = None
    joined, left = previous.joined, previous.left
    member_ids = previous.member_ids
    if counting:
        joined += len(ids - member_ids)
        left += len(member_ids - ids)
        member_ids = ids
    cause = _cause(previous.member_ids, ids) if steps else previous.last_cause
    changed_state = state != previous.state
    updated = replace(
        previous,
        state=state,
        since=at if changed_state else previous.since,
        generation=generation if generation is not None else previous.generation,
        member_ids=member_ids,
        observed_at=at,
        rebalances=previous.rebalances + steps,
        rebalancing_seconds=spent,
        rebalancing_since=open_since,
        last_rebalance_at=at if steps else previous.last_rebalance_at,
        last_cause=cause,
        joined=joined,
        left=left,
        recent=(previous.recent + (at,) * min(steps, storm_count + 1))[-(storm_count + 1):]
        if steps else previous.recent,
        exact=exact,
    )
    if changed_state or steps:
        change = StateChange(at, state, updated.generation, len(member_ids), steps,
                             cause if steps else None)
        updated = replace(updated, history=(previous.history + (change,))[-history:])
    return updated

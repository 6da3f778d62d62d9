"""Failover plans kept current: every source group on a mirror's topics, translated to the
destination and verified (:mod:`monitor.ingest.failover.planner`) on ``failover.interval``.

The groups and their committed offsets, and the source's log ends, come from the store (the
collectors of the source cluster fill it); the rest is read from both clusters within
``failover.max_fetches`` reads a round. A topic plan is kept while the group's committed offsets
on the topic stay the same and it is verified; otherwise it is made again, those never made
first, then the oldest. The service's own groups and the mirroring group are left out.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from monitor.config import ClusterConfig, MirrorConfig
from monitor.ingest.base import Collector
from monitor.ingest.failover.planner import Budget, Planner, group_plan
from monitor.ingest.failover.reads import ClusterReads
from monitor.model.failover import STATES, GroupPlan, TopicPlan
from monitor.model.metric_catalogue import Reading
from monitor.rules.failover import NO_TIMESTAMPS
from monitor.store.store import Store

_log = logging.getLogger("monitor.collector.failover")

OWN_GROUPS = "kafka-monitor-"
"""Groups of the service itself (canaries, readers): never planned."""

_Key = tuple[tuple[int, int], ...]  # the committed offsets a topic plan was made for


class FailoverCollector(Collector):
    kind = "failover"

    def __init__(self, mirror: MirrorConfig, source: ClusterConfig,
                 destination: ClusterConfig, store: Store) -> None:
        super().__init__(mirror.name, mirror.failover.interval)
        self.mirror = mirror
        self.store = store
        timeout = mirror.failover.fetch_timeout
        self.planner = Planner(mirror, ClusterReads(source, timeout, "failover"),
                               ClusterReads(destination, timeout, "failover"))
        self._topic_plans: dict[tuple[str, str], tuple[_Key, float, TopicPlan]] = {}
        self._plans: dict[str, GroupPlan] = {}
        self.results: dict[str, int] = dict.fromkeys((*STATES, "no_timestamp", "budget"), 0)

    def close(self) -> None:
        self.planner.source.close()
        self.planner.destination.close()

    def counters(self) -> list[Reading]:
        return [Reading("kafka_monitor_failover_checks", (self.cluster, result), n)
                for result, n in self.results.items()]

    def plans(self) -> dict[str, GroupPlan]:
        return dict(self._plans)

    def plan(self, group: str) -> GroupPlan | None:
        return self._plans.get(group)

    def collect(self) -> None:
        m = self.mirror
        now = time.time()
        log_ends: dict[str, dict[int, int]] = {}
        for (topic, p), o in self.store.broker_offsets(m.source).items():
            if topic in m.topics:
                log_ends.setdefault(topic, {})[p] = o.log_end
        wanted: dict[tuple[str, str], _Key] = {}
        for group in self.store.groups(m.source):
            if group == m.group or group.startswith(OWN_GROUPS):
                continue
            snapshot = self.store.group(m.source, group)
            if snapshot is None:
                continue
            by_topic: dict[str, dict[int, int]] = {}
            for (topic, p), commit in snapshot.commits.items():
                if topic in m.topics:
                    by_topic.setdefault(topic, {})[p] = commit.offset
            for topic, committed in by_topic.items():
                wanted[(group, topic)] = tuple(sorted(committed.items()))
        self._topic_plans = {k: v for k, v in self._topic_plans.items() if k in wanted}
        self.planner.begin_round()
        budget = Budget(m.failover.max_fetches)
        todo = [k for k, key in wanted.items()
                if k not in self._topic_plans or self._topic_plans[k][0] != key
                or self._topic_plans[k][2].state != "verified"]
        todo.sort(key=lambda k: self._topic_plans[k][1] if k in self._topic_plans else 0.0)
        for group, topic in todo:
            key = wanted[(group, topic)]
            plan = self.planner.plan_topic(topic, dict(key), log_ends.get(topic, {}), budget)
            if plan is None:
                self.results["budget"] += 1
                continue
            self._topic_plans[(group, topic)] = (key, time.time(), plan)
            self.results[plan.state] += 1
            if any(s.reason == NO_TIMESTAMPS for s in plan.source):
                self.results["no_timestamp"] += 1
        self.planner.keep_anchors({(t, p, o - d) for (_, t), key in wanted.items()
                                   for p, o in key for d in (0, 1)})
        plans: dict[str, GroupPlan] = {}
        for group in sorted({g for g, _ in wanted}):
            topics = [t for g, t in wanted if g == group]
            current = [self._topic_plans[(group, t)] for t in topics
                       if (group, t) in self._topic_plans
                       and self._topic_plans[(group, t)][0] == wanted[(group, t)]]
            if not current:
                continue
            # Checked now when every topic's plan is for today's offsets; else as before.
            previous = self._plans.get(group)
            checked = now if len(current) == len(topics) or previous is None \
                else previous.checked_at
            plans[group] = group_plan(m, group, [plan for _, _, plan in current],
                                      min(at for _, at, _ in current), checked)
        self._plans = plans

    def snapshot(self) -> dict[str, Any]:
        now = time.time()
        return {"mirror": self.mirror.name, "source": self.mirror.source,
                "destination": self.mirror.destination,
                "margin_seconds": self.mirror.failover.margin,
                "groups": [p.as_dict(now) for p in sorted(self._plans.values(),
                                                           key=lambda p: p.group)]}

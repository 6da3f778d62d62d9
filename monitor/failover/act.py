"""``kafka-monitor failover plan|apply`` (parsed in ``commands.py``): the disaster-recovery
step, made safe.

``plan`` translates groups now, from both clusters (the same planner the service runs).
``apply`` commits one group's plan on the destination. In a disaster the source is gone, so
``apply`` takes the plan made before it: the running service's (kept current and verified,
``GET /v3/mirror/<name>/failover/<group>``) or one saved with ``plan --json``. It refuses,
committing nothing, a plan that is not for this mirror and group, older than its age limit,
not verified (``mirror_behind`` alone is accepted: the mirror's unsent records are lost
whatever the plan, and everything it did send is after the translated offsets), a group with
live members on the destination (named), a destination topic or partition missing, or a
destination that does not answer. Without ``--yes`` it shows what it would commit.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from confluent_kafka import KafkaException

from monitor.config import MirrorConfig, MonitorConfig, load_config
from monitor.ingest.failover.collector import OWN_GROUPS
from monitor.ingest.failover.planner import Budget, Planner, group_plan
from monitor.ingest.failover.reads import ClusterReads
from monitor.logs import setup_logging
from monitor.model.failover import GroupPlan
from monitor.serve.http.tls import local_client

_log = logging.getLogger("monitor.failover")

EXIT_REFUSED = 1
EXIT_USAGE = 2
_UNBOUNDED = 1_000_000


class Refused(Exception):
    """A reason to change nothing, for the operator."""


def _mirror(config: MonitorConfig, name: str) -> MirrorConfig:
    for m in config.mirrors:
        if m.name == name:
            return m
    known = ", ".join(m.name for m in config.mirrors) or "none configured"
    raise Refused(f"no mirror {name!r} in the configuration (mirrors: {known})")


def _reader(config: MonitorConfig, mirror: MirrorConfig, cluster: str) -> ClusterReads:
    return ClusterReads(config.cluster(cluster), mirror.failover.fetch_timeout, "failover-cli")


def make_plans(config: MonitorConfig, mirror: MirrorConfig,
               group: str | None) -> list[GroupPlan]:
    """Plans made now from both clusters (unbounded work: one command, not a round)."""
    source = _reader(config, mirror, mirror.source)
    destination = _reader(config, mirror, mirror.destination)
    planner = Planner(mirror, source, destination)
    try:
        try:
            if group is not None:
                groups = [group]
            else:
                listed = source.admin().list_consumer_groups(
                    request_timeout=source.timeout).result()
                groups = sorted(g.group_id for g in listed.valid
                                if g.group_id != mirror.group
                                and not g.group_id.startswith(OWN_GROUPS))
            sizes = {t: source.partitions(t) for t in mirror.topics}
        except KafkaException as exc:
            raise Refused(f"source cluster {mirror.source!r} unreachable: {exc}") from exc
        ends = {t: source.log_ends(t, n) for t, n in sizes.items() if n is not None}
        plans = []
        for g in groups:
            try:
                committed = source.committed(g)
            except KafkaException as exc:
                raise Refused(f"group {g!r} on {mirror.source!r}: {exc}") from exc
            topics = []
            for topic in mirror.topics:
                mine = {p: o for (t, p), o in committed.items() if t == topic}
                if mine:
                    try:
                        made = planner.plan_topic(topic, mine, ends.get(topic, {}),
                                                  Budget(_UNBOUNDED))
                    except KafkaException as exc:
                        raise Refused(f"destination cluster {mirror.destination!r} "
                                      f"unreachable: {exc}") from exc
                    if made is not None:
                        topics.append(made)
            if topics:
                plans.append(group_plan(mirror, g, topics, time.time()))
            elif group is not None:
                raise Refused(f"group {g!r} is unknown on {mirror.source!r} or commits no "
                              f"offsets on the mirrored topics ({', '.join(mirror.topics)})")
        return plans
    finally:
        source.close()
        destination.close()


def render(plan: GroupPlan, now: float) -> str:
    lines = [f"group {plan.group}: {plan.state}"
             + (f" ({plan.reason})" if plan.reason else "")
             + "; reads again " + ("" if all(t.reread_exact for t in plan.topics)
                                       else "at most ") + f"{plan.reread_records} records"
             + (f", {plan.reread_seconds:.1f} s" if plan.reread_seconds is not None else "")
             + f"; margin {plan.margin_seconds:g} s; checked {plan.age(now):.0f} s ago"]
    for t in plan.topics:
        lines.append(f"  {t.topic} -> {t.destination_topic} ({t.mapping} partitions): {t.state}")
        for s in t.source:
            where = (f" found at destination {s.found_partition}:{s.found_offset}"
                     if s.found_offset is not None else "")
            lines.append(f"    source {s.partition}: committed {s.committed}, "
                         f"{s.position}, {s.state}{where}"
                         + (f" ({s.reason})" if s.reason and s.state != "verified" else ""))
        for d in t.destination:
            lines.append(f"    destination {d.partition}: start at {d.offset} "
                         f"(reads again {d.reread_records})")
    return "\n".join(lines)


def plan_command(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    try:
        mirror = _mirror(config, args.mirror)
        plans = make_plans(config, mirror, args.group)
    except Refused as exc:
        print(f"failover plan: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    now = time.time()
    if args.json:
        body: Any = (plans[0].as_dict(now) if args.group else
                     {"mirror": mirror.name, "groups": [p.as_dict(now) for p in plans]})
        print(json.dumps(body, indent=1))
    else:
        print("\n".join(render(p, now) for p in plans) or "no group commits offsets on the "
              f"mirrored topics at {mirror.source}")
    return 0


def _service_plan(config: MonitorConfig, mirror: str, group: str,
                  token: str | None) -> dict[str, Any]:
    base, context = local_client(config.http)
    url = f"{base}/v3/mirror/{mirror}/failover/{group}"
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise Refused(f"the service has no plan to give ({url}: {exc.code} {detail})") from exc
    except OSError as exc:
        raise Refused(f"the service does not answer ({url}: {exc}); pass a plan saved by "
                      "`failover plan --json` with --plan") from exc
    return dict(body["plan"])


def _load(args: argparse.Namespace, config: MonitorConfig) -> GroupPlan:
    if args.plan is None:
        body = _service_plan(config, args.mirror, args.group, args.token)
    else:
        try:
            body = json.loads(args.plan.read_text())
        except (OSError, ValueError) as exc:
            raise Refused(f"cannot read the plan {args.plan}: {exc}") from exc
        if isinstance(body, dict) and "plan" in body:  # the API's reply, saved
            body = body["plan"]
        if isinstance(body, dict) and "groups" in body:  # plan --json of every group
            found = [g for g in body["groups"] if g.get("group") == args.group]
            if not found:
                raise Refused(f"the plan {args.plan} has no group {args.group!r}")
            body = found[0]
    try:
        return GroupPlan.from_dict(body)
    except (KeyError, TypeError) as exc:
        raise Refused(f"not a failover plan: {exc}") from exc


def check(plan: GroupPlan, mirror: MirrorConfig, group: str, max_age: float,
          now: float) -> None:
    """Refusals that need no cluster."""
    if plan.mirror != mirror.name or plan.group != group:
        raise Refused(f"the plan is for mirror {plan.mirror!r}, group {plan.group!r}")
    if plan.age(now) > max_age:
        raise Refused(f"the plan was last checked {plan.age(now):.0f} s ago, more than "
                      f"{max_age:g} s (--max-age to accept an older one)")
    if plan.state not in ("verified", "mirror_behind"):
        raise Refused(f"the plan is {plan.state}: {plan.reason}")
    if not plan.commits():
        raise Refused("the plan has no offsets to commit")


def apply_command(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    setup_logging(config.logging.level, "text")
    try:
        mirror = _mirror(config, args.mirror)
        plan = _load(args, config)
        max_age = args.max_age if args.max_age is not None else mirror.failover.max_plan_age
        check(plan, mirror, args.group, max_age, time.time())
        commits = plan.commits()
        destination = _reader(config, mirror, mirror.destination)
        try:
            members = destination.members(args.group)
            if members:
                raise Refused(f"group {args.group!r} has live members on "
                              f"{mirror.destination!r}: {', '.join(members)}; stop them first")
            for topic in sorted({t for t, _ in commits}):
                n = destination.partitions(topic)
                missing = [p for t, p in commits if t == topic and (n is None or p >= n)]
                if missing:
                    raise Refused(f"destination topic {topic!r} missing or without "
                                  f"partitions {missing} on {mirror.destination!r}")
            if plan.state == "mirror_behind":
                print(f"note: the mirror is behind ({plan.reason}); records it never copied "
                      "cannot be read on the destination whatever the offsets")
            for (topic, p), offset in sorted(commits.items()):
                print(f"{'commit' if args.yes else 'would commit'} {args.group} "
                      f"{topic}[{p}] = {offset} on {mirror.destination}")
            if not args.yes:
                print("dry run: nothing committed (--yes commits)")
                return 0
            destination.commit(args.group, commits)
            for (topic, p), offset in sorted(commits.items()):
                _log.info("failover commit", extra={
                    "mirror": mirror.name, "cluster": mirror.destination, "group": args.group,
                    "topic": topic, "partition": p, "offset": offset,
                    "plan_state": plan.state, "plan_checked_at": plan.checked_at})
        except KafkaException as exc:
            raise Refused(f"destination cluster {mirror.destination!r}: {exc}") from exc
        finally:
            destination.close()
    except Refused as exc:
        print(f"failover apply refused, nothing committed: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"committed {len(commits)} offsets for {args.group} on {mirror.destination}")
    return 0

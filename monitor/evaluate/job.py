"""The evaluation job: the store's windows in, every group's status out, on a short schedule.

Each round takes one consistent copy of a cluster's windows (:meth:`Store.evaluation_input`),
runs the pure rules of :mod:`monitor.rules` over all of its partitions at once, and
replaces the cluster's :class:`ClusterEvaluation`. Views (HTTP, Prometheus) only read that
object: no request ever evaluates or talks to Kafka. Per-group answers are built from the
arrays the first time one is asked for and reused until the next round.

No false STOP from our own blindness: STOP's clock of a group only runs up to the time its
offsets were last known to be current (the Admin API's last good read of the group, or the
last moment the ``__consumer_offsets`` reader was caught up and error-free). During a broker
outage or a monitor-side failure the clocks stand still and the last verdict holds, marked
``stale``; a consumer is judged on the time we could actually see it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from monitor.config import (
    EvaluatorConfig,
    HotPartitionsConfig,
    RebalanceConfig,
    RetentionConfig,
)
from monitor.model.verdicts import (
    CommitPoint,
    GroupRetention,
    GroupStatus,
    PartitionStatus,
    Rates,
    RetentionRisk,
)
from monitor.rules import (
    BurrowStatus,
    GroupIndex,
    GroupResults,
    LagSeconds,
    LeoHistory,
    PartitionResults,
    RuleOptions,
    Status,
    evaluate,
    group_lag_seconds,
    lag_seconds,
    to_burrow,
)
from monitor.rules.retention import (
    REASONS,
    RISK_NAMES,
    RetentionArrays,
    advance_rate,
    retention_risk,
)
from monitor.rules.velocity import CATCH_UP_REASONS, Velocity, velocity
from monitor.store.store import GroupState, Store
from monitor.store.windows import EvaluationInput

_log = logging.getLogger("monitor.evaluation")

_STATUS_NAMES = [s.name for s in sorted(Status, key=int)]


def rule_options(config: EvaluatorConfig) -> RuleOptions:
    """The rules' parameters from the ``evaluator`` section of the configuration."""
    return RuleOptions(
        allowed_lag=config.allowed_lag,
        idle_aware_stop=config.idle_aware_stop,
        idle_grace_ms=config.idle_stop_grace * 1000.0,
        marker_tolerance=config.marker_tolerance,
        burrow_err=config.burrow_status,
        live_member_stall=config.live_member_stall,
        young_window_stop_ms=config.young_window_stop * 1000.0,
        warn_lag_gaps=config.warn_lag_gaps,
        gone_stop_ms=config.gone_stop * 1000.0,
    )


@dataclass(frozen=True, slots=True)
class RoundArrays:
    """What the rules computed in one round, over every partition of the cluster."""

    parts: PartitionResults
    groups: GroupResults
    lag: LagSeconds
    group_lag: npt.NDArray[np.float64]
    retention: RetentionArrays | None = None
    velocity: Velocity | None = None


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """Every group of a round in columns: what an overview lists and the recorder stores."""

    group: list[str]
    status: list[str]
    lag_seconds: list[float]
    totallag: list[int]
    partitions: list[int]
    members: list[int]
    stale: list[bool]


class ClusterEvaluation:
    """One round's results for one cluster: arrays for bulk readers (Prometheus), and
    :meth:`group` for per-group views, built on first use and cached. ``data`` is the store's
    snapshot the round judged, ``arrays`` what the rules made of it (None when there was
    nothing to judge), ``states`` each group's membership and freshness."""

    def __init__(
        self,
        cluster: str,
        evaluated_at: float,
        duration: float,
        *,
        data: EvaluationInput | None = None,
        arrays: RoundArrays | None = None,
        states: dict[str, GroupState] | None = None,
        stale_groups: set[str] | None = None,
        burrow: bool = False,
        rebalance: RebalanceConfig | None = None,
    ) -> None:
        states = {} if states is None else states
        self.rebalance = rebalance or RebalanceConfig()
        self.cluster = cluster
        self.evaluated_at = evaluated_at
        self.duration = duration
        self.data = data
        self.partitions = arrays.parts if arrays is not None else None
        self.groups = arrays.groups if arrays is not None else None
        self.lag = arrays.lag if arrays is not None else None
        self.group_lag_seconds = arrays.group_lag if arrays is not None else None
        self.retention = arrays.retention if arrays is not None else None
        self.velocity = arrays.velocity if arrays is not None else None
        self.states = states
        self.stale_groups = set() if stale_groups is None else stale_groups
        self._index = (
            {name: i for i, name in enumerate(data.group_names)} if data is not None else {}
        )
        self._names = sorted(set(self._index) | set(states))
        self.burrow = burrow
        self._cache: dict[str, GroupStatus] = {}
        self._forgotten: dict[str, set[str] | None] = {}  # group -> topics (None: all)
        self._lock = threading.Lock()
        self.views: dict[tuple[str, ...], bytes] = {}
        """Rendered responses of this round, keyed by the view (the HTTP layer's cache)."""
        self.asked: dict[str, tuple[str, bool]] = {}
        """Status views asked for this round: path -> (group, only non-OK partitions); the
        next round renders these before it is served (``Evaluator.before_publish``)."""

    def group_names(self) -> list[str]:
        return [n for n in self._names if self._forgotten.get(n, ()) is not None]

    def __contains__(self, group: str) -> bool:
        if self._forgotten.get(group, ()) is None:
            return False
        return group in self._index or group in self.states

    def forget(self, group: str, topic: str | None = None) -> None:
        """An operator deleted the group (or its offsets for one topic) from the store: stop
        reporting it from this round's results too, without waiting for the next round."""
        with self._lock:
            if topic is None:
                self._forgotten[group] = None
            else:
                topics = self._forgotten.setdefault(group, set())
                if topics is not None:
                    topics.add(topic)
            self._cache.pop(group, None)
            self.views.clear()

    def built(self, name: str) -> GroupStatus | None:
        """The group's status as :meth:`group`, without keeping it (for a caller that keeps
        what it renders of it instead)."""
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        return self._build(name) if name in self else None

    def group(self, name: str) -> GroupStatus | None:
        """The group's status, or None (NOTFOUND) for a group this round does not know."""
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        if name not in self:
            return None
        built = self._build(name)
        with self._lock:
            return self._cache.setdefault(name, built)

    def summary(self) -> GroupSummary:
        """Every group this round reports, one entry per column, from the round's arrays (no
        :class:`GroupStatus` per group, so an overview of 100,000 groups stays cheap). Groups
        outside the arrays (membership only, or published verdicts) come from :meth:`group`.
        Stale and member figures are the API's."""
        out = GroupSummary([], [], [], [], [], [], [])
        index: dict[str, int] = {}
        if self.data is not None and self.groups is not None \
                and self.group_lag_seconds is not None:
            names = list(self.data.group_names)
            index = {n: i for i, n in enumerate(names)}
            status = self.groups.status_names()
            secs = np.round(np.nan_to_num(self.group_lag_seconds), 3).tolist()
            total = self.groups.totallag.tolist()
            parts = self.groups.partition_count.tolist()
        for name in self.group_names():
            i = index.get(name)
            if i is not None and name not in self._forgotten:
                word, lag, tot, n = status[i], secs[i], total[i], parts[i]
            else:
                g = self.group(name)
                if g is None:
                    continue
                word, lag, tot, n = g.status, g.lag_seconds, g.totallag, g.partition_count
            state = self.states.get(name)
            m = state.membership if state is not None else None
            out.group.append(name)
            out.status.append(word)
            out.lag_seconds.append(lag)
            out.totallag.append(tot)
            out.partitions.append(n)
            out.members.append(len(m.members) if m is not None else 0)
            out.stale.append(name in self.stale_groups)
        return out

    def lagging_positions(self) -> list[tuple[str, int, int]]:
        """(topic, partition, committed offset) of every partition with lag, most behind in
        seconds first, each once (the record-timestamp reader's work list)."""
        d, lag = self.data, self.lag
        if d is None or lag is None or not d.windows.size:
            return []
        w = d.windows
        rows = np.flatnonzero(w.current_lag > 0)
        rows = rows[np.argsort(-lag.seconds[rows], kind="stable")]
        committed = w.offsets[rows, np.maximum(w.counts[rows] - 1, 0)].tolist()
        out: dict[tuple[str, int, int], None] = {}
        for r, offset in zip(rows.tolist(), committed, strict=True):
            topic, partition = d.topic_partition(r)
            out[(topic, partition, offset)] = None
        return list(out)

    def status_counts(self) -> dict[str, int]:
        """Groups per status word (the group status as reported)."""
        counts: dict[str, int] = {}
        for name in self.group_names():
            g = self.group(name)
            if g is not None:
                counts[g.status] = counts.get(g.status, 0) + 1
        return counts

    def _build(self, name: str) -> GroupStatus:
        state = self.states.get(name)
        membership = state.membership if state is not None else None
        offsets_age = (
            round(self.evaluated_at - state.offsets_at, 3)
            if state is not None and state.offsets_at > 0
            else None
        )
        lifecycle = state.lifecycle if state is not None else None
        rb = self.rebalance
        common = dict(
            lifecycle=lifecycle.status(self.evaluated_at, rb.storm_count, rb.storm_window)
            if lifecycle is not None else None,
            cluster=self.cluster,
            group=name,
            state=membership.state if membership is not None else None,
            generation=membership.generation if membership is not None else None,
            member_list=membership.members if membership is not None else (),
            stale=name in self.stale_groups,
            offsets_age_seconds=offsets_age,
            evaluated_at=self.evaluated_at,
        )
        i = self._index.get(name)
        if i is None or self.data is None or self.groups is None:
            # Known (members, or offsets outside any window) but nothing to judge: Burrow's
            # empty group, OK with complete 0.
            return GroupStatus(
                status="OK", complete=0.0, partitions=(), partition_count=0, maxlag=None,
                totallag=0, lag_seconds=0.0, **common,  # type: ignore[arg-type]
            )
        d, parts, lag, ret, vel = (self.data, self.partitions, self.lag, self.retention,
                                   self.velocity)
        assert parts is not None and lag is not None
        lo, hi = (int(x) for x in np.searchsorted(d.group_ids, [i, i + 1]))
        owners = membership.owners() if membership is not None else {}
        w = d.windows
        skip = self._forgotten.get(name) or set()
        # The group's rows as Python lists, one conversion per column (numpy scalars, read
        # one at a time, made this the cost of every first /status of a group in a round).
        sl = slice(lo, hi)
        counts = w.counts[sl]
        last = np.maximum(counts - 1, 0)
        at = np.arange(lo, hi)
        status = parts.status[sl].tolist()
        starts = zip(w.offsets[sl, 0].tolist(), w.timestamps_ms[sl, 0].tolist(),
                     d.first_observed_ms[sl].tolist(), w.lags[sl, 0].tolist(), strict=True)
        ends = zip(w.offsets[at, last].tolist(), w.timestamps_ms[at, last].tolist(),
                   d.last_observed_ms[sl].tolist(), w.lags[at, last].tolist(), strict=True)
        columns = zip(
            range(lo, hi), counts.tolist(), status, starts, ends,
            w.current_lag[sl].tolist(), lag.seconds[sl].tolist(), lag.lower_bound[sl].tolist(),
            parts.complete[sl].tolist(), _retentions(ret, lo, hi), _lag_sources(lag, lo, hi),
            _rates(vel, lo, hi),
            vel.hot[sl].tolist() if vel is not None else [False] * (hi - lo),
            strict=True,
        )
        entries: list[PartitionStatus] = []
        codes: list[int] = []
        for (r, n, code, start, end, current, seconds, lower, complete, retention, source,
             rates, hot) in columns:
            topic, partition = d.topic_partition(r)
            if topic in skip:
                continue
            codes.append(code)
            member = owners.get((topic, partition))
            entries.append(
                PartitionStatus(
                    topic=topic,
                    partition=partition,
                    status=_STATUS_NAMES[code],
                    start=_point(*start) if n else None,
                    end=_point(*end) if n else None,
                    current_lag=current,
                    lag_seconds=round(seconds, 3),
                    lag_seconds_lower_bound=lower,
                    complete=complete,
                    owner=member.host if member is not None else "",
                    client_id=member.client_id if member is not None else "",
                    retention=retention,
                    lag_seconds_source=source,
                    velocity=rates,
                    hot=hot,
                )
            )
        # The group rules (as evaluate_groups, over this group's partitions: few, and this
        # way a topic deleted since the round is left out).
        worst = max(codes, default=int(Status.OK))
        word = (
            BurrowStatus(int(to_burrow([worst], group=True)[0])).name
            if self.burrow
            else Status(worst).name
        )
        lags = [e.current_lag for e in entries]
        top = lags.index(max(lags)) if lags else -1
        risks = [e.retention for e in entries if e.retention is not None]
        ttls = [r.time_to_loss_seconds for r in risks if r.time_to_loss_seconds is not None]
        group_risk = GroupRetention(
            risk=RISK_NAMES[max((RISK_NAMES.index(r.risk) for r in risks), default=0)],
            lost_records=sum(r.lost_records for r in risks),
            time_to_loss_seconds=min(ttls) if ttls else None,
            partitions_at_risk=sum(1 for r in risks if r.risk != "OK"),
        ) if risks else None
        return GroupStatus(
            velocity=_group_rates([e.velocity for e in entries], lags),
            lag_seconds_source=max(entries, key=lambda e: e.lag_seconds).lag_seconds_source
            if entries else None,
            hot_partitions=sum(1 for e in entries if e.hot),
            retention=group_risk,
            status=word,
            complete=(
                sum(1 for e in entries if e.complete >= 1.0) / len(entries) if entries else 0.0
            ),
            partitions=tuple(entries),
            partition_count=len(entries),
            maxlag=entries[top] if top >= 0 else None,
            totallag=sum(lags),
            lag_seconds=max((e.lag_seconds for e in entries), default=0.0),
            **common,  # type: ignore[arg-type]
        )


def _retentions(ret: RetentionArrays | None, lo: int, hi: int) -> list[RetentionRisk | None]:
    """Rows ``lo:hi``'s retention risk (None where the log start is not known)."""
    if ret is None:
        return [None] * (hi - lo)
    sl = slice(lo, hi)
    return [
        RetentionRisk(
            risk=RISK_NAMES[risk],
            lead=lead,
            lost_records=lost,
            time_to_loss_seconds=_finite(ttl),
            time_to_loss_reason=REASONS[reason],
            log_start_rate=round(rate, 3),
        ) if known else None
        for known, risk, lead, lost, ttl, reason, rate in zip(
            ret.known[sl].tolist(), ret.risk[sl].tolist(), ret.lead[sl].tolist(),
            ret.lost[sl].tolist(), ret.time_to_loss[sl].tolist(), ret.reason[sl].tolist(),
            ret.log_start_rate[sl].tolist(), strict=True)
    ]


def _exact(lag: LagSeconds, data: EvaluationInput, committed: npt.NDArray[np.int64],
           times: Mapping[tuple[str, int, int], int], now_ms: float) -> LagSeconds:
    """The lag in seconds where the record at the committed offset has a known timestamp:
    its age, exactly (``monitor/ingest/record_times.py``); the interpolation elsewhere.
    Matched in arrays: (topic, partition, offset) of the lagging rows against the known."""
    if not times:
        return lag
    w = data.windows
    rows = np.flatnonzero(w.current_lag > 0)
    tindex = {t: i for i, t in enumerate(data.topic_names)}
    known = np.array([(tindex.get(t, -1), p, o, ts) for (t, p, o), ts in times.items()],
                     dtype=np.int64).reshape(-1, 4)
    known = known[known[:, 0] >= 0]
    if not rows.size or not known.size:
        return lag
    keys = np.column_stack((data.topic_ids[rows], data.partitions[rows], committed[rows]))
    _, inverse = np.unique(np.vstack((keys, known[:, :3])), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    stamp_of = np.full(int(inverse.max()) + 1, -1, dtype=np.int64)
    stamp_of[inverse[rows.size:]] = known[:, 3]
    stamps = stamp_of[inverse[: rows.size]]
    hit = rows[stamps >= 0]
    if not hit.size:
        return lag
    exact = np.zeros(w.size, dtype=bool)
    exact[hit] = True
    seconds = lag.seconds.copy()
    seconds[hit] = np.maximum(now_ms - stamps[stamps >= 0].astype(np.float64), 0.0) / 1000.0
    return LagSeconds(seconds, lag.lower_bound & ~exact, lag.known | exact, exact)


def _lag_sources(lag: LagSeconds, lo: int, hi: int) -> list[str | None]:
    """Which method gave rows ``lo:hi``'s lag in seconds: the record's timestamp, or the
    log-end history (interpolated, or a lower bound where the offset is older than it)."""
    sl = slice(lo, hi)
    exact = lag.exact[sl].tolist() if lag.exact is not None else [False] * (hi - lo)
    return [
        "timestamp" if e else None if not k else "lower_bound" if b else "interpolated"
        for e, k, b in zip(exact, lag.known[sl].tolist(), lag.lower_bound[sl].tolist(),
                           strict=True)
    ]


def _finite(value: float, digits: int = 3) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


def _rates(vel: Velocity | None, lo: int, hi: int) -> list[Rates | None]:
    if vel is None:
        return [None] * (hi - lo)
    sl = slice(lo, hi)
    return [
        Rates(
            consumption_rate=_finite(consumption),
            production_rate=_finite(production),
            lag_velocity=_finite(velocity),
            time_to_catch_up_seconds=_finite(ttc),
            time_to_catch_up_reason=CATCH_UP_REASONS[reason],
        )
        for consumption, production, velocity, ttc, reason in zip(
            vel.consumption_rate[sl].tolist(), vel.production_rate[sl].tolist(),
            vel.velocity[sl].tolist(), vel.time_to_catch_up[sl].tolist(),
            vel.reason[sl].tolist(), strict=True)
    ]


def _group_rates(parts: list[Rates | None], lags: list[int]) -> Rates | None:
    """Rates summed over the group's partitions (None if any is not known); the group has
    caught up when its slowest lagging partition has, so its time is the largest, and there
    is none when a lagging partition has none (that partition's reason)."""
    known = [p for p in parts if p is not None]
    if not known or len(known) != len(parts):
        return None

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else round(
            sum(v for v in values if v is not None), 3)

    lagging = [p for p, lag in zip(known, lags, strict=True) if lag > 0]
    times = [p.time_to_catch_up_seconds for p in lagging]
    blocked = [p.time_to_catch_up_reason for p in lagging if p.time_to_catch_up_seconds is None]
    return Rates(
        consumption_rate=total([p.consumption_rate for p in known]),
        production_rate=total([p.production_rate for p in known]),
        lag_velocity=total([p.lag_velocity for p in known]),
        time_to_catch_up_seconds=max(t for t in times if t is not None)
        if lagging and not blocked else None,
        time_to_catch_up_reason=(blocked[0] if blocked else None) if lagging else "caught up",
    )


def _point(offset: int, ts: int, observed: int, lag: int) -> CommitPoint:
    return CommitPoint(offset, ts, observed, lag if lag >= 0 else None)


_NO_HISTORY = LeoHistory(np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0), dtype=np.int64),
                         np.zeros(0, dtype=np.int64))


class Evaluator:
    """Runs the rules over every cluster in the store and keeps the latest results.

    ``freshness(cluster)``: unix time up to which the cluster's ``__consumer_offsets`` reader
    is known to have seen every commit (None when the cluster is not read that way); the
    Admin API's freshness is per group, from the store. A group whose offsets are older
    than ``stale_after`` seconds is reported ``stale``. ``read_interval``: cluster -> how
    often the Admin API reads its groups' offsets; a read stays current until the next one
    is due, so the STOP clock runs that long past it (as Burrow's would on the same
    observations) and stands only when a read is overdue (an outage).
    """

    def __init__(
        self,
        store: Store,
        config: EvaluatorConfig,
        freshness: Callable[[str], float | None] | None = None,
        stale_after: float = 60.0,
        published_stale_after: Mapping[str, float] | None = None,
        read_interval: Mapping[str, float] | None = None,
        rebalance: RebalanceConfig | None = None,
        retention: RetentionConfig | None = None,
        hot: HotPartitionsConfig | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.rebalance = rebalance or RebalanceConfig()
        self.retention = retention or RetentionConfig()
        self.hot = hot or HotPartitionsConfig()
        self.stale_after = stale_after
        # offsets_source pipeline: cluster -> age at which a published verdict is stale
        self.published_stale_after = dict(published_stale_after or {})
        self.read_interval = dict(read_interval or {})
        self.options = rule_options(config)
        self._freshness = freshness or (lambda _cluster: None)
        self._results: dict[str, ClusterEvaluation] = {}
        self.rounds = 0
        self.before_publish: Callable[[ClusterEvaluation, ClusterEvaluation | None], object] | \
            None = None
        """Called with a cluster's new result and the one it replaces, before the new one is
        served (the HTTP layer renders the views asked of the old one; errors are logged)."""
        self.last_duration: float | None = None
        self.expired_total = 0

    def result(self, cluster: str) -> ClusterEvaluation | None:
        return self._results.get(cluster)

    def results(self) -> dict[str, ClusterEvaluation]:
        return dict(self._results)

    def run_once(self, now: float | None = None) -> dict[str, ClusterEvaluation]:
        """Expire silent groups, then evaluate every cluster; the new results replace the
        old ones cluster by cluster (readers see one round or the other, never a mix)."""
        started = time.monotonic()
        now = time.time() if now is None else now
        for cluster, group in self.store.expire_groups(now):
            self.expired_total += 1
            _log.info("group expired", extra={"cluster": cluster, "group": group})
        for cluster in self.store.clusters():
            new = self.evaluate_cluster(cluster, now)
            if self.before_publish is not None:
                try:
                    self.before_publish(new, self._results.get(cluster))
                except Exception:  # the round stands; views are rendered on demand
                    _log.exception("preparing the round's views failed",
                                   extra={"cluster": cluster})
            self._results[cluster] = new
        self.rounds += 1
        self.last_duration = time.monotonic() - started
        return dict(self._results)

    def evaluate_cluster(self, cluster: str, now: float | None = None) -> ClusterEvaluation:
        started = time.monotonic()
        now = time.time() if now is None else now
        published = self.store.published(cluster)
        if published is not None:
            max_age = self.published_stale_after.get(cluster, self.stale_after)
            return PublishedEvaluation(cluster, now, time.monotonic() - started, published,
                                       max_age)
        states, data = self.store.evaluation_snapshot(cluster)
        reader_fresh = self._freshness(cluster)
        stale = {
            name
            for name, st in states.items()
            if st.stale_error is not None
            or _fresh_until(st, reader_fresh) < now - self.stale_after
        }
        if data is None or data.windows.size == 0:
            return ClusterEvaluation(
                cluster, now, time.monotonic() - started, data=data, states=states,
                stale_groups=stale, burrow=self.options.burrow_err, rebalance=self.rebalance,
            )
        names = data.group_names
        due = self.read_interval.get(cluster, 0.0)
        fresh = np.array([_fresh_until(states.get(n), reader_fresh, due) for n in names])
        alive = np.array([bool(states.get(n) and states[n].has_members) for n in names])
        left = np.array([_left_ms(states.get(n)) for n in names], dtype=np.float64)
        g = data.group_ids
        # Each group's clock stops where its offsets were last known current.
        now_ms = np.minimum(now, fresh)[g] * 1000.0
        groups = GroupIndex(g, len(names))
        w = data.windows
        parts, group_results = evaluate(
            w, groups, now_ms, self.options, data.history, alive=alive[g],
            left_ms=left[g] if left.size else None,
        )
        last = np.maximum(w.counts - 1, 0)
        rows = np.arange(w.size)
        committed = w.offsets[rows, last]
        lag = lag_seconds(
            committed, data.history, now * 1000.0,
            commit_times_ms=w.timestamps_ms[rows, last],
            marker_tolerance=self.options.marker_tolerance,
        )
        lag = _exact(lag, data, committed, self.store.record_times(cluster), now * 1000.0)
        idle = np.isin(parts.status, (int(Status.STOP), int(Status.STALL)))
        rates = velocity(w.offsets, w.timestamps_ms, w.counts, w.current_lag, data.history,
                         idle, g, now_ms, self.hot.factor, self.hot.min_lag)
        arrays = RoundArrays(
            parts, group_results, lag, group_lag_seconds(lag.seconds, groups),
            self._retention(data, committed, rates.consumption_rate, parts.status, now),
            rates,
        )
        # The log-end history, gathered per row ([rows, history] x 2: ~90 MB at 100k
        # group-partitions), served nothing after the round: not kept with its results.
        kept = replace(data, history=_NO_HISTORY)
        return ClusterEvaluation(
            cluster, now, time.monotonic() - started, data=kept, arrays=arrays, states=states,
            stale_groups=stale, burrow=self.options.burrow_err, rebalance=self.rebalance,
        )

    def _retention(
        self, data: EvaluationInput, committed: npt.NDArray[np.int64],
        consumed: npt.NDArray[np.float64], status: npt.NDArray[np.int8], now: float,
    ) -> RetentionArrays | None:
        """Retention risk per row (:mod:`monitor.rules.retention`): the log start's advance
        rate up to now against the group's consumption over the commit window (0 where the
        partition is STOP or STALL; not known with a single commit); an OK partition keeps
        pace."""
        if data.log_start is None or data.log_start_first is None \
                or data.log_start_first_ms is None:
            return None
        ls_rate = advance_rate(data.log_start, data.log_start_first, data.log_start_first_ms,
                               now * 1000.0)
        return retention_risk(committed, data.windows.current_lag, data.log_start, ls_rate,
                              consumed, self.retention.warn,
                              keeps_pace=status == int(Status.OK))


class PublishedEvaluation(ClusterEvaluation):
    """A cluster the Spark stream evaluates (``offsets_source: pipeline``): the verdicts it
    published to its compacted topic, served like the service's own. A verdict older than
    ``max_age`` (the stream stopped or fell behind) is held and marked ``stale``."""

    def __init__(
        self, cluster: str, evaluated_at: float, duration: float,
        published: dict[str, GroupStatus], max_age: float,
    ) -> None:
        stale = {g for g, v in published.items()
                 if v.stale or evaluated_at - v.evaluated_at > max_age}
        super().__init__(cluster, evaluated_at, duration, stale_groups=stale)
        self._published = published
        self._names = sorted(published)

    def __contains__(self, group: str) -> bool:
        return self._forgotten.get(group, ()) is not None and group in self._published

    def _build(self, name: str) -> GroupStatus:
        g = self._published[name]
        stale = name in self.stale_groups
        skip = self._forgotten.get(name)
        if not skip and stale == g.stale:
            return g  # the usual case: no copy per group and round
        parts = tuple(p for p in g.partitions if p.topic not in (skip or ()))
        return replace(g, stale=stale, partitions=parts)


def _left_ms(state: GroupState | None) -> float:
    """When the group's consumers left, in ms (NaN: they did not)."""
    return np.nan if state is None or state.left_at is None else state.left_at * 1000.0


def _fresh_until(
    state: GroupState | None, reader_fresh: float | None, read_due: float = 0.0
) -> float:
    """Up to when the group's offsets are known current: the offsets topic reader's last
    clean pass, or the Admin API's last read of the group plus ``read_due`` (until the next
    read is due, nothing new could have been seen). A commit read from the offsets topic
    gets no such allowance: during an outage of that reader, silence is ours."""
    if state is None or state.offsets_at <= 0:
        return reader_fresh or 0.0
    due = read_due if state.polled else 0.0
    return max(state.offsets_at + due, reader_fresh or 0.0)

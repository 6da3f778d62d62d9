"""Consumer lag, group status and the monitor's own health as Prometheus metrics.

Exported from what is already cached: each cluster's latest
:class:`~monitor.evaluate.job.ClusterEvaluation`, the store's log start/end offsets, and the
collectors' health and counters (two parts, below). A scrape never talks to Kafka and never
evaluates.

Names follow kafka-lag-exporter (``kafka_consumergroup_group_*``) and kafka_exporter
(``kafka_consumergroup_members``, ``kafka_topic_partition_*_offset``) where they fit, so
existing dashboards and alerts carry over; what only this monitor has is ``kafka_monitor_*``.
Labels are ``cluster``, ``group``, ``topic``, ``partition`` (all strings).

Group-partition series, labels ``cluster, group, topic, partition`` (only with
``exporter.partition_series: true``, the default):

* ``kafka_consumergroup_group_offset`` gauge: the committed offset (newest commit in the window)
* ``kafka_consumergroup_group_lag`` gauge: log end - committed offset, in offsets
* ``kafka_consumergroup_group_lag_seconds`` gauge: how long ago the log end was at the
  committed offset (finite, >= 0, never NaN; 0 when caught up)
* ``kafka_monitor_partition_status`` gauge: the partition's status code (below)
* ``kafka_monitor_partition_owner_info`` gauge, value 1, labels ``cluster, group, topic,
  partition`` plus the owner's ``member_host``, ``consumer_id`` (Kafka's member id) and
  ``client_id`` (kafka-lag-exporter's names for them): one series per partition assigned to a
  member of a group that has live members (members listed, state not Empty or Dead), one owner
  per partition as the HTTP API reports it; none for a group without members. It changes
  labels at each rebalance (a new member id), so it is an info series to join on or to list,
  not one to graph

Group-topic series, labels ``cluster, group, topic`` (always; the per-topic form that bounds
cardinality to groups x topics):

* ``kafka_consumergroup_group_topic_sum_lag`` gauge: summed lag in offsets
* ``kafka_consumergroup_group_topic_max_lag_seconds`` gauge: largest lag in seconds
* ``kafka_monitor_group_topic_status`` gauge: worst partition status code

Group series, labels ``cluster, group``:

* ``kafka_monitor_group_status`` gauge: the status code: 0 NOTFOUND, 1 OK, 2 WARN, 3 REWIND,
  4 STALL, 5 STOP (:class:`monitor.rules.Status`, the worst partition status; always these
  codes, also when the API reports Burrow's ERR under ``evaluator.burrow_status``)
* ``kafka_monitor_group_status_state`` gauge, extra label ``status`` (NOTFOUND, OK, WARN,
  REWIND, STALL, STOP): the state-set form, 1 for the group's status and 0 for the other five
  (``kafka_monitor_group_status_state{status="STOP"} == 1`` alerts without magic numbers)
* ``kafka_consumergroup_group_sum_lag``, ``kafka_consumergroup_group_max_lag`` gauges: offsets
* ``kafka_consumergroup_group_max_lag_seconds`` gauge
* ``kafka_consumergroup_members`` gauge: members of the group (0 when empty or unknown)
* ``kafka_monitor_group_stale`` gauge: 1 when the group's offsets could not be read recently:
  the verdict is held and its clocks stopped (a stale group keeps reporting its last values)
* ``kafka_monitor_group_info`` gauge, value 1, extra label ``state``: Kafka's group state
  (Stable, Empty, ...; ``Unknown`` when no membership is known)

Group lifecycle and retention risk (``monitor/store/lifecycle.py``, ``monitor/rules/retention.py``;
the README's "Group lifecycle and retention risk"):

* per group: ``kafka_consumergroup_rebalances_total``, ``..._rebalancing_seconds_total``,
  ``..._member_changes_total`` (``change``: joined, left) counters (kept across restarts with the
  store); ``kafka_consumergroup_state`` (``state``: a state set, 1 for the current one);
  ``kafka_monitor_group_rebalance_storm``, ``kafka_monitor_group_retention_risk`` (0 OK, 1 WARN,
  2 LOST), ``kafka_consumergroup_group_sum_lost_records`` and
  ``..._group_min_time_to_loss_seconds`` (only where estimable) gauges
* per group-partition (with the partition series): ``kafka_consumergroup_group_lead``,
  ``..._group_lost_records`` (where the log start is known) and
  ``..._group_time_to_loss_seconds`` (only where estimable) gauges

Velocity (``monitor/rules/velocity.py``; the README's "Lag in time, velocity, time to catch up
and hot partitions"), per group: ``kafka_consumergroup_group_lag_velocity`` and
``..._group_consumption_rate`` (where known), ``..._group_time_to_catch_up_seconds`` (only while
the lag shrinks), ``..._group_hot_partitions`` gauges; ``kafka_monitor_group_lag_seconds_source``
(``source``: timestamp, interpolated, lower_bound) with value 1.

Topic series, from the store's latest broker offsets (read once per evaluation round):

* partition series: ``kafka_topic_partition_current_offset`` (log end) and
  ``kafka_topic_partition_oldest_offset`` (log start) gauges, labels ``cluster, topic,
  partition``;
* per-topic form instead: ``kafka_topic_current_offset_sum``, ``kafka_topic_oldest_offset_sum``
  and ``kafka_topic_partitions`` gauges, labels ``cluster, topic``.

The monitor itself:

* ``kafka_monitor_evaluation_timestamp_seconds``, ``kafka_monitor_evaluation_duration_seconds``
  gauges (``cluster``): when the exported results were computed and how long that took;
  ``kafka_monitor_exporter_render_duration_seconds`` (``cluster``): building this text
* ``kafka_monitor_evaluation_rounds_total``, ``kafka_monitor_groups_expired_total`` counters
* per collector, labels ``cluster, collector`` (metadata, broker_offsets, group_offsets,
  offsets_topic, jmx): ``kafka_monitor_collector_last_success_timestamp_seconds`` (absent
  before the first success), ``kafka_monitor_collector_last_duration_seconds``,
  ``kafka_monitor_collector_consecutive_errors``, ``kafka_monitor_collector_ready`` gauges;
  ``kafka_monitor_collector_runs_total``, ``kafka_monitor_collector_errors_total`` counters
* ``__consumer_offsets`` reader, label ``cluster``: ``kafka_monitor_offsets_topic_records_total``,
  ``..._records_skipped_total`` (``reason``), ``..._commits_stored_total``,
  ``..._commits_filtered_total``, ``..._events_total`` (``kind``), ``..._consume_errors_total``
  (``error``), ``..._handler_errors_total``, ``..._reader_restarts_total`` counters
* statuses-topic reader (``offsets_source: pipeline``), label ``cluster``:
  ``kafka_monitor_pipeline_statuses_records_total``, ``..._records_skipped_total`` (``reason``)

No vanishing series: a stopped group stays in every evaluation, and so here, until the store
expires it (``evaluator.expire_group``, by commit time); then all its series go at once.

Two parts, served one after the other by ``/metrics`` (no family is in both):

* the big families above, one series per group, partition or topic, are exposition text
  rendered here (:func:`render_cluster`, :meth:`LagExporter.text`): prometheus_client formats
  every sample in Python, seconds for 4 families x 100,000 partitions, far over a scrape
  budget; list comprehensions over the result arrays take about a tenth of that
  (``bench/bench_metrics.py``).
  The text is rendered once per evaluation round, in the evaluator's thread right after the
  round (:meth:`LagExporter.prerender`), and cached per (cluster, evaluation), compressed
  (:mod:`.deflated`: ~110 MB of text is ~7 MB at 100k group-partitions); a scrape only writes
  cached pieces (as they are to a client that accepts gzip, as Prometheus does), and renders
  itself only when it comes before that (first round, or a round that has just finished).
  ``registry.get_sample_value`` does not see these samples.
* the small families (evaluation time, collector health, decoder counters) are ordinary
  ``prometheus_client`` families, yielded by :class:`LagExporter` as a registry collector.

The rendered text is the Prometheus text format 0.0.4 (HELP and TYPE lines, label values
escaped as prometheus_client escapes them, labels in its sorted order); integers are written as
integers, exact beyond 2**53, where prometheus_client would write ``1.2345678e+07``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from monitor.config import ExporterConfig
from monitor.evaluate.job import ClusterEvaluation, Evaluator
from monitor.ingest.base import Collector as MonitorCollector
from monitor.model import metric_catalogue as catalogue
from monitor.model.observations import GroupMembership
from monitor.model.verdicts import GroupLifecycleStatus, GroupStatus
from monitor.rules import GroupIndex, Status
from monitor.rules.retention import RISK_NAMES, RetentionArrays
from monitor.serve.metrics.deflated import Deflated, deflate, inflate
from monitor.store.store import PartitionOffsets, Store

STATUS_WORDS = [s.name for s in sorted(Status, key=int)]
_OK = int(Status.OK)
_CODES = {**{s.name: int(s) for s in Status}, "ERR": int(Status.STOP)}  # ERR: Burrow's words


def _status_code(g: GroupStatus | None) -> int:
    return _OK if g is None else _CODES.get(g.status, _OK)

# Families rendered per cluster as text, in exposition order (names, kinds, help and labels
# are the catalogue's).
_PARTITION_FAMILIES = [(f.name, f.help) for f in catalogue.PARTITION_FAMILIES]
_OWNER_FAMILIES = [(f.name, f.help) for f in catalogue.OWNER_FAMILIES]
_GROUP_TOPIC_FAMILIES = [(f.name, f.help) for f in catalogue.GROUP_TOPIC_FAMILIES]
_GROUP_FAMILIES = [(f.name, f.help) for f in catalogue.GROUP_FAMILIES]
_TOPIC_PARTITION_FAMILIES = [(f.name, f.help) for f in catalogue.TOPIC_PARTITION_FAMILIES]
_TOPIC_FAMILIES = [(f.name, f.help) for f in catalogue.TOPIC_FAMILIES]
_RETENTION_FAMILIES = [(f.name, f.help) for f in catalogue.RETENTION_PARTITION_FAMILIES]
_LIFECYCLE_FAMILIES = [(f.name, f.help) for f in catalogue.GROUP_LIFECYCLE_FAMILIES]
_VELOCITY_FAMILIES = [(f.name, f.help) for f in catalogue.GROUP_VELOCITY_FAMILIES]
_STATE_ALIASES = {"AwaitingSync": "CompletingRebalance"}  # 0.9's name for it


def rendered_family_names(partition_series: bool) -> list[tuple[str, str]]:
    """The text-rendered families (name, help) for the chosen form, in exposition order."""
    if partition_series:
        return [*_PARTITION_FAMILIES, *_RETENTION_FAMILIES, *_OWNER_FAMILIES,
                *_GROUP_TOPIC_FAMILIES, *_GROUP_FAMILIES, *_LIFECYCLE_FAMILIES,
                *_VELOCITY_FAMILIES, *_TOPIC_PARTITION_FAMILIES]
    return [*_GROUP_TOPIC_FAMILIES, *_GROUP_FAMILIES, *_LIFECYCLE_FAMILIES,
            *_VELOCITY_FAMILIES, *_TOPIC_FAMILIES]


def _sample_name(name: str) -> str:
    """The name samples carry: counters end in ``_total`` (the catalogue's names do not)."""
    return f"{name}_total" if catalogue.entry(name).kind == "counter" else name


def _esc(value: str) -> str:
    """A label value escaped for the text format (group names may hold anything)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _help(text: str) -> str:
    """A HELP text escaped for the text format (backslash and newline only)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _lines(name: str, labels: Sequence[str], values: Iterable[object]) -> str:
    return "".join([f"{name}{{{lab}}} {v}\n" for lab, v in zip(labels, values, strict=True)])


def _seconds(values: npt.NDArray[np.float64]) -> list[float]:
    """Lag seconds as exported: finite, >= 0, millisecond resolution."""
    finite = np.where(np.isfinite(values), values, 0.0)
    return np.round(np.maximum(finite, 0.0), 3).tolist()  # type: ignore[no-any-return]


def render_cluster(
    ev: ClusterEvaluation,
    offsets: Mapping[tuple[str, int], PartitionOffsets],
    partition_series: bool = True,
) -> dict[str, str]:
    """One cluster's rendered families: name -> sample lines (no HELP/TYPE, which
    :func:`exposition_chunks` writes once for all clusters). Pure: arrays in, text out.
    Labels are in prometheus_client's sorted order, so the text reads as its own would."""
    cluster = f'cluster="{_esc(ev.cluster)}"'
    out: dict[str, str] = {}
    d, parts, lag, groups, group_secs = (
        ev.data, ev.partitions, ev.lag, ev.groups, ev.group_lag_seconds
    )
    names: list[str] = []
    status_g = sum_lag = max_lag = np.zeros(0, dtype=np.int64)
    max_secs = np.zeros(0, dtype=np.float64)
    if d is not None and parts is not None and lag is not None and groups is not None \
            and group_secs is not None and d.windows.size:
        names = list(d.group_names)
        gid = d.group_ids
        cur = d.windows.current_lag
        status_rows = parts.status.astype(np.int64)
        # Status codes always (GroupResults holds Burrow's under evaluator.burrow_status).
        status_g = np.full(len(names), _OK, dtype=np.int64)
        np.maximum.at(status_g, gid, status_rows)
        sum_lag = groups.totallag.astype(np.int64)
        max_lag = np.where(groups.maxlag >= 0, cur[np.maximum(groups.maxlag, 0)], 0)
        max_secs = group_secs
    known = set(names)
    extra = [n for n in ev.group_names() if n not in known]  # members, no window: OK, no lag
    all_names = names + extra
    glabels = [f'{cluster},group="{_esc(n)}"' for n in all_names]
    # Groups outside the arrays: known by membership only (OK, no lag), or verdicts the
    # Spark stream published (offsets_source pipeline): their own figures.
    extra_status = [ev.group(n) for n in extra]
    codes = status_g.tolist() + [_status_code(g) for g in extra_status]
    members: list[int] = []
    kafka_states: list[str] = []
    owner_lines: list[str] = []
    (f_owner, _), = _OWNER_FAMILIES
    for n in all_names:
        st = ev.states.get(n)
        m = st.membership if st is not None else None
        members.append(len(m.members) if m is not None else 0)
        kafka_states.append(_esc(m.state) if m is not None else "Unknown")
        if partition_series and m is not None and st is not None and st.has_members:
            owner_lines.extend(_owner_lines(f_owner, cluster, _esc(n), m))
    if owner_lines:
        out[f_owner] = "".join(owner_lines)

    if names:
        assert d is not None and parts is not None and lag is not None
        tnames = [_esc(t) for t in d.topic_names]
        secs = _seconds(lag.seconds)
        n_topics = max(len(tnames), 1)
        key = gid * n_topics + d.topic_ids
        uniq, inv = np.unique(key, return_inverse=True)
        t_sum = np.zeros(uniq.size, dtype=np.int64)
        np.add.at(t_sum, inv, cur)
        t_secs = np.zeros(uniq.size, dtype=np.float64)
        np.maximum.at(t_secs, inv, np.asarray(secs))
        t_status = np.full(uniq.size, _OK, dtype=np.int64)
        np.maximum.at(t_status, inv, status_rows)
        tl = [f'{glabels[g]},topic="{tnames[t]}"'
              for g, t in zip((uniq // n_topics).tolist(), (uniq % n_topics).tolist(),
                              strict=True)]
        (f_sum, _), (f_secs, _), (f_status, _) = _GROUP_TOPIC_FAMILIES
        out[f_sum] = _lines(f_sum, tl, t_sum.tolist())
        out[f_secs] = _lines(f_secs, tl, t_secs.tolist())
        out[f_status] = _lines(f_status, tl, t_status.tolist())
        if partition_series:
            w = d.windows
            committed = w.offsets[np.arange(w.size), np.maximum(w.counts - 1, 0)]
            pl = [f'{glabels[g]},partition="{p}",topic="{tnames[t]}"'
                  for g, t, p in zip(gid.tolist(), d.topic_ids.tolist(), d.partitions.tolist(),
                                     strict=True)]
            (f_off, _), (f_lag, _), (f_lsec, _), (f_pst, _) = _PARTITION_FAMILIES
            out[f_off] = _lines(f_off, pl, committed.tolist())
            out[f_lag] = _lines(f_lag, pl, cur.tolist())
            out[f_lsec] = _lines(f_lsec, pl, secs)
            out[f_pst] = _lines(f_pst, pl, status_rows.tolist())
            if ev.retention is not None:
                out.update(_retention_partition_lines(ev.retention, pl))

    extra_sum = [g.totallag if g is not None else 0 for g in extra_status]
    extra_max = [g.maxlag.current_lag if g is not None and g.maxlag is not None else 0
                 for g in extra_status]
    extra_secs = np.array([g.lag_seconds if g is not None else 0.0 for g in extra_status])
    (f_gst, _), (f_set, _), (f_gsum, _), (f_gmax, _), (f_gsec, _), (f_mem, _), (f_stale, _), \
        (f_info, _) = _GROUP_FAMILIES
    out[f_gst] = _lines(f_gst, glabels, codes)
    out[f_set] = "".join([
        f'{f_set}{{{lab},status="{word}"}} {1 if code == k else 0}\n'
        for lab, code in zip(glabels, codes, strict=True)
        for k, word in enumerate(STATUS_WORDS)
    ])
    out[f_gsum] = _lines(f_gsum, glabels, sum_lag.tolist() + extra_sum)
    out[f_gmax] = _lines(f_gmax, glabels, max_lag.tolist() + extra_max)
    out[f_gsec] = _lines(f_gsec, glabels, [*_seconds(max_secs), *_seconds(extra_secs)])
    out[f_mem] = _lines(f_mem, glabels, members)
    out[f_stale] = _lines(f_stale, glabels, [int(n in ev.stale_groups) for n in all_names])
    out[f_info] = "".join([f'{f_info}{{{lab},state="{s}"}} 1\n'
                           for lab, s in zip(glabels, kafka_states, strict=True)])
    out.update(_lifecycle_lines(ev, all_names, glabels, extra_status))
    out.update(_retention_group_lines(ev, names, glabels, extra_status))
    out.update(_velocity_group_lines(ev, names, glabels, extra_status))
    out.update(_render_topics(cluster, offsets, partition_series))
    return {k: v for k, v in out.items() if v}


def _retention_partition_lines(ret: RetentionArrays, pl: list[str]) -> dict[str, str]:
    """Lead and lost records where the log start is known; time to loss where estimable."""
    (f_lead, _), (f_lost, _), (f_ttl, _) = _RETENTION_FAMILIES
    known = np.flatnonzero(ret.known).tolist()
    lead, lost = ret.lead.tolist(), ret.lost.tolist()
    ttl = np.round(ret.time_to_loss, 3)
    est = np.flatnonzero(np.isfinite(ttl)).tolist()
    ttl_list = ttl.tolist()
    return {
        f_lead: "".join([f"{f_lead}{{{pl[i]}}} {lead[i]}\n" for i in known]),
        f_lost: "".join([f"{f_lost}{{{pl[i]}}} {lost[i]}\n" for i in known]),
        f_ttl: "".join([f"{f_ttl}{{{pl[i]}}} {ttl_list[i]}\n" for i in est]),
    }


def _retention_group_lines(
    ev: ClusterEvaluation, names: list[str], glabels: list[str],
    extra: list[GroupStatus | None],
) -> dict[str, str]:
    """Per group: the worst partition's risk, lost records summed, the soonest loss. Groups
    in the round's arrays from them; the others (published verdicts) from their status."""
    _, _, _, _, _, (f_risk, _), (f_lost, _), (f_ttl, _) = _LIFECYCLE_FAMILIES
    ret, d = ev.retention, ev.data
    risk: list[int] = []
    lost: list[int] = []
    ttl: list[float] = []
    if names and ret is not None and d is not None:
        n = len(names)
        gid = d.group_ids
        r = np.zeros(n, dtype=np.int64)
        np.maximum.at(r, gid, ret.risk.astype(np.int64))
        lo = np.zeros(n, dtype=np.int64)
        np.add.at(lo, gid, ret.lost)
        t = np.full(n, np.inf)
        np.minimum.at(t, gid, np.where(np.isfinite(ret.time_to_loss), ret.time_to_loss, np.inf))
        risk, lost, ttl = r.tolist(), lo.tolist(), np.round(t, 3).tolist()
    else:
        risk, lost, ttl = [0] * len(names), [0] * len(names), [math.inf] * len(names)
    for g in extra:
        gr = g.retention if g is not None else None
        risk.append(RISK_NAMES.index(gr.risk) if gr is not None else 0)
        lost.append(gr.lost_records if gr is not None else 0)
        soonest = gr.time_to_loss_seconds if gr is not None else None
        ttl.append(math.inf if soonest is None else soonest)
    return {
        f_risk: _lines(f_risk, glabels, risk),
        f_lost: _lines(f_lost, glabels, lost),
        f_ttl: "".join([f"{f_ttl}{{{lab}}} {v}\n"
                        for lab, v in zip(glabels, ttl, strict=True) if v != math.inf]),
    }


def _velocity_group_lines(
    ev: ClusterEvaluation, names: list[str], glabels: list[str],
    extra: list[GroupStatus | None],
) -> dict[str, str]:
    """Per group, as its API object says (``_group_rates``), from the round's arrays: rates
    summed where every partition's is known, the time until its slowest lagging partition
    has caught up where every lagging partition shrinks, hot partitions counted, and the
    method of its worst partition's lag seconds."""
    (f_vel, _), (f_cons, _), (f_ttc, _), (f_hot, _), (f_src, _) = _VELOCITY_FAMILIES
    vel, d, lag = ev.velocity, ev.data, ev.lag
    velocity: list[float] = []
    consumed: list[float] = []
    ttc: list[float] = []
    hot: list[int] = []
    source: list[str | None] = []
    if names and vel is not None and d is not None and lag is not None:
        n = len(names)
        gid = d.group_ids
        index = GroupIndex(gid, n)
        v = index.sum(vel.velocity)  # NaN where a partition's is not known
        c = index.sum(vel.consumption_rate)
        lagging = d.windows.current_lag > 0
        blocked = index.max(lagging & ~np.isfinite(vel.time_to_catch_up), empty=False)
        t = index.max(np.where(lagging, np.nan_to_num(vel.time_to_catch_up, nan=-1.0), -1.0),
                      empty=-1.0)
        t = np.where(blocked | (t < 0), np.nan, t)
        worst = index.argmax(lag.seconds)
        velocity, consumed, ttc = (np.round(a, 3).tolist() for a in (v, c, t))
        hot = index.sum(vel.hot.astype(np.int64)).tolist()
        known, lower = lag.known.tolist(), lag.lower_bound.tolist()
        exact = lag.exact.tolist() if lag.exact is not None else [False] * len(known)
        source = [None if w < 0 else "timestamp" if exact[w] else None if not known[w]
                  else "lower_bound" if lower[w] else "interpolated" for w in worst.tolist()]
    else:
        velocity, consumed, ttc = ([math.nan] * len(names) for _ in range(3))
        hot, source = [0] * len(names), [None] * len(names)
    for g in extra:
        r = g.velocity if g is not None else None
        velocity.append(math.nan if r is None or r.lag_velocity is None else r.lag_velocity)
        consumed.append(math.nan if r is None or r.consumption_rate is None
                        else r.consumption_rate)
        ttc.append(math.nan if r is None or r.time_to_catch_up_seconds is None
                   else r.time_to_catch_up_seconds)
        hot.append(g.hot_partitions if g is not None else 0)
        source.append(g.lag_seconds_source if g is not None else None)

    def known_only(name: str, values: list[float]) -> str:
        return "".join([f"{name}{{{lab}}} {v}\n"
                        for lab, v in zip(glabels, values, strict=True) if not math.isnan(v)])

    return {
        f_vel: known_only(f_vel, velocity),
        f_cons: known_only(f_cons, consumed),
        f_ttc: known_only(f_ttc, ttc),
        f_hot: _lines(f_hot, glabels, hot),
        f_src: "".join([f'{f_src}{{{lab},source="{s}"}} 1\n'
                        for lab, s in zip(glabels, source, strict=True) if s is not None]),
    }


def _lifecycle_lines(
    ev: ClusterEvaluation, all_names: list[str], glabels: list[str],
    extra: list[GroupStatus | None],
) -> dict[str, str]:
    """Rebalance counters, member changes, the state set and the storm flag per group, from
    the store's lifecycle (a group without one: zeros, state Unknown); published verdicts
    (``offsets_source: pipeline``) from their own lifecycle."""
    (f_reb, _), (f_secs, _), (f_chg, _), (f_state, _), (f_storm, _), *_ = _LIFECYCLE_FAMILIES
    n_arrays = len(all_names) - len(extra)
    published = dict(zip(all_names[n_arrays:], extra, strict=True))
    now = ev.evaluated_at
    rb = ev.rebalance
    reb: list[int] = []
    secs: list[float] = []
    joined: list[int] = []
    left: list[int] = []
    states: list[str] = []
    storm: list[int] = []
    for name in all_names:
        st = ev.states.get(name)
        lc = st.lifecycle if st is not None else None
        status: GroupLifecycleStatus | None
        if lc is not None:
            status = lc.status(now, rb.storm_count, rb.storm_window)
        else:
            g = published.get(name)
            status = g.lifecycle if g is not None else None
        if status is None:
            reb.append(0)
            secs.append(0.0)
            joined.append(0)
            left.append(0)
            storm.append(0)
        else:
            reb.append(status.rebalances)
            secs.append(status.rebalancing_seconds)
            joined.append(status.members_joined)
            left.append(status.members_left)
            storm.append(int(status.storm))
        m = st.membership if st is not None else None
        state = m.state if m is not None else "Unknown"  # as kafka_monitor_group_info
        states.append(_STATE_ALIASES.get(state, state))
    reb_name, secs_name, chg_name = (_sample_name(f) for f in (f_reb, f_secs, f_chg))
    return {
        f_reb: _lines(reb_name, glabels, reb),
        f_secs: _lines(secs_name, glabels, secs),
        f_chg: "".join([
            f'{chg_name}{{change="joined",{lab}}} {j}\n{chg_name}{{change="left",{lab}}} {lv}\n'
            for lab, j, lv in zip(glabels, joined, left, strict=True)
        ]),
        f_state: "".join([
            f'{f_state}{{{lab},state="{k}"}} {1 if k == state else 0}\n'
            for lab, state in zip(glabels, states, strict=True)
            for k in catalogue.GROUP_STATES
        ]),
        f_storm: _lines(f_storm, glabels, storm),
    }


def _owner_lines(name: str, cluster: str, group: str, m: GroupMembership) -> list[str]:
    """A group's owner info lines, one per owned partition (the owner as
    :meth:`GroupMembership.owners` picks it), by topic and partition, labels in
    prometheus_client's sorted order (``client_id`` before ``cluster``). ``cluster`` and
    ``group`` come escaped."""
    owned: dict[tuple[str, int], str] = {}
    for member in m.members:
        who = (f'client_id="{_esc(member.client_id)}",{cluster},'
               f'consumer_id="{_esc(member.member_id)}",group="{group}",'
               f'member_host="{_esc(member.host)}"')
        for tp in member.assignment:
            owned[tp] = who
    return [f'{name}{{{owned[(t, p)]},partition="{p}",topic="{_esc(t)}"}} 1\n'
            for t, p in sorted(owned)]


def _render_topics(
    cluster: str, offsets: Mapping[tuple[str, int], PartitionOffsets], partition_series: bool
) -> dict[str, str]:
    """Log end/start per partition, or summed per topic. Stale values (last fetch failed) are
    kept, as the store keeps them."""
    if partition_series:
        labels = [f'{cluster},partition="{p}",topic="{_esc(t)}"' for t, p in offsets]
        (f_end, _), (f_start, _) = _TOPIC_PARTITION_FAMILIES
        return {
            f_end: _lines(f_end, labels, [o.log_end for o in offsets.values()]),
            f_start: _lines(f_start, labels, [o.log_start for o in offsets.values()]),
        }
    sums: dict[str, list[int]] = {}
    for (topic, _), o in offsets.items():
        acc = sums.get(topic)
        if acc is None:
            acc = sums[topic] = [0, 0, 0]
        acc[0] += o.log_end
        acc[1] += o.log_start
        acc[2] += 1
    labels = [f'{cluster},topic="{_esc(t)}"' for t in sums]
    return {
        name: _lines(name, labels, [acc[i] for acc in sums.values()])
        for i, (name, _) in enumerate(_TOPIC_FAMILIES)
    }


@dataclass(frozen=True, slots=True, eq=False)
class RenderedCluster:
    """One cluster's big families for one evaluation (compared by identity, never by text),
    each family's sample lines compressed on its own."""

    evaluation: ClusterEvaluation
    families: dict[str, Deflated]
    seconds: float


@dataclass(frozen=True, slots=True, eq=False)
class _Exposition:
    clusters: tuple[RenderedCluster, ...]
    chunks: tuple[Deflated, ...]


def exposition_chunks(
    families: Sequence[tuple[str, str]], clusters: Sequence[RenderedCluster]
) -> tuple[Deflated, ...]:
    """The rendered families of every cluster as exposition text, in compressed pieces that
    are written one after the other (never joined): per family (name, help), one HELP and
    one TYPE line, then every cluster's samples; families without samples are left out."""
    parts: list[Deflated] = []
    for name, documentation in families:
        bodies = [c.families[name] for c in clusters if name in c.families]
        if bodies:
            kind = catalogue.entry(name).kind
            shown = _sample_name(name)
            parts.append(deflate(
                f"# HELP {shown} {_help(documentation)}\n# TYPE {shown} {kind}\n".encode()))
            parts.extend(bodies)
    return tuple(parts)


class LagExporter(Collector):
    """Both parts of the exporter (see the module docstring): registered in the service's
    registry for the small families, and :meth:`text` for the rendered big ones."""

    def __init__(
        self,
        evaluator: Evaluator,
        store: Store,
        collectors: Sequence[MonitorCollector],
        config: ExporterConfig | None = None,
    ) -> None:
        self._evaluator = evaluator
        self._store = store
        self._collectors = list(collectors)
        self.partition_series = (config or ExporterConfig()).partition_series
        self._families = rendered_family_names(self.partition_series)  # never in the registry
        self._cache: dict[str, RenderedCluster] = {}
        self._exposition = _Exposition((), ())
        self._lock = threading.Lock()

    def describe(self) -> Iterator[Metric]:
        """The registry part's names, so the registry refuses a clashing collector."""
        return self._monitor_families(())

    def collect(self) -> Iterator[Metric]:
        """The registry part, for the same rounds as :meth:`text`."""
        return self._monitor_families(self._current().clusters)

    def chunks(self) -> tuple[Deflated, ...]:
        """The rendered part: exposition text of the big families of every cluster, in the
        compressed pieces the ``/metrics`` handler writes in turn (the same tuple all round
        long)."""
        return self._current().chunks

    def text(self) -> bytes:
        """The rendered part inflated and joined (a copy: for tests and tools, not the
        handler)."""
        return b"".join(map(inflate, self.chunks()))

    def prerender(self) -> None:
        """Render the latest round now, so that scrapes only join cached bytes. The service
        calls it in the evaluator's thread right after each round."""
        self._current()

    def rendered(self, ev: ClusterEvaluation) -> RenderedCluster:
        """The cluster's families for this evaluation, rendered once and reused until the
        next round (scrapes may come far more often than rounds)."""
        with self._lock:
            return self._rendered(ev)

    def _rendered(self, ev: ClusterEvaluation) -> RenderedCluster:
        cached = self._cache.get(ev.cluster)
        if cached is not None and cached.evaluation is ev:
            return cached
        started = time.perf_counter()
        families = {
            name: deflate(text.encode())
            for name, text in render_cluster(
                ev, self._store.broker_offsets(ev.cluster), self.partition_series
            ).items()
        }
        cached = RenderedCluster(ev, families, time.perf_counter() - started)
        self._cache[ev.cluster] = cached
        return cached

    def _current(self) -> _Exposition:
        """Text for the latest evaluation of every cluster, re-rendering what is outdated
        and reassembling only when some cluster changed."""
        results = self._evaluator.results()
        with self._lock:
            clusters = tuple(self._rendered(ev) for _, ev in sorted(results.items()))
            for gone in self._cache.keys() - results.keys():
                del self._cache[gone]
            current = self._exposition
            if len(current.clusters) != len(clusters) or any(
                a is not b for a, b in zip(current.clusters, clusters, strict=True)
            ):
                current = _Exposition(clusters, exposition_chunks(self._families, clusters))
                self._exposition = current
            return current

    def _monitor_families(self, rendered: Sequence[RenderedCluster]) -> Iterator[Metric]:
        evaluated = catalogue.gauge("kafka_monitor_evaluation_timestamp_seconds")
        duration = catalogue.gauge("kafka_monitor_evaluation_duration_seconds")
        render = catalogue.gauge("kafka_monitor_exporter_render_duration_seconds")
        for r in rendered:
            ev = r.evaluation
            evaluated.add_metric([ev.cluster], ev.evaluated_at)
            duration.add_metric([ev.cluster], ev.duration)
            render.add_metric([ev.cluster], r.seconds)
        yield from (evaluated, duration, render)
        yield catalogue.counter("kafka_monitor_evaluation_rounds", self._evaluator.rounds)
        yield catalogue.counter("kafka_monitor_groups_expired", self._evaluator.expired_total)
        yield from collector_families(self._collectors)


def collector_families(collectors: Iterable[MonitorCollector]) -> list[Metric]:
    """Every collector's health, and the counters collectors report about themselves
    (:meth:`~monitor.ingest.base.Collector.counters`: the offsets-topic readers' decoder
    counts, the statuses-topic readers' record counts)."""
    last_ok = catalogue.gauge("kafka_monitor_collector_last_success_timestamp_seconds")
    last_dur = catalogue.gauge("kafka_monitor_collector_last_duration_seconds")
    consecutive = catalogue.gauge("kafka_monitor_collector_consecutive_errors")
    ready = catalogue.gauge("kafka_monitor_collector_ready")
    runs = catalogue.counter("kafka_monitor_collector_runs")
    errors = catalogue.counter("kafka_monitor_collector_errors")
    own = {f.name: catalogue.counter(f.name) for f in catalogue.COLLECTOR_COUNTERS}
    for col in collectors:
        h = col.health
        labels = [col.cluster, col.kind]
        if h.last_success is not None:
            last_ok.add_metric(labels, h.last_success)
        if h.last_duration is not None:
            last_dur.add_metric(labels, h.last_duration)
        consecutive.add_metric(labels, h.consecutive_errors)
        ready.add_metric(labels, 1 if col.ready else 0)
        runs.add_metric(labels, h.runs)
        errors.add_metric(labels, h.errors)
        for reading in col.counters():
            own[reading.family].add_metric(list(reading.labels), reading.value)
    return [last_ok, last_dur, consecutive, ready, runs, errors, *own.values()]

"""Every metric family the service exports: its name, kind, help and labels, in one place.

Dashboards and alert rules are written against these names, so they are a contract like the
API's paths: this table is what they may use, and the tests hold every part of the service to
it (a family on ``/metrics`` that is not here, or that differs from its entry, fails them, as
does a dashboard or rule naming a metric that is not here).

Producers never spell a name, help or label list themselves: they ask for a family here
(:func:`gauge`, :func:`counter` for the families built at scrape time; :func:`entry` for the
canaries' live ``prometheus_client`` objects) and fill it. Counter names are written as
``prometheus_client`` takes them, without ``_total``; their samples end in ``_total``.
Collectors report their own counters as :class:`Reading` values keyed by these names, so the
exporter reads them without knowing the collector classes.

What each family means in detail is said where it is computed (``monitor/serve/metrics/``,
``monitor/ingest/canary/metrics.py``, ``monitor/store/snapshot.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from monitor.model.jmx_metrics import CATALOGUE as JMX_CATALOGUE

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

Kind = Literal["gauge", "counter", "histogram"]


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Reading:
    """One sample of a collector's own counter: the family's name, its label values in the
    family's order, the value."""

    family: str
    labels: tuple[str, ...]
    value: float


_STATUS_CODES = "0 NOTFOUND, 1 OK, 2 WARN, 3 REWIND, 4 STALL, 5 STOP"
_CGTP = ("cluster", "group", "topic", "partition")
_CGT = ("cluster", "group", "topic")
_CG = ("cluster", "group")
_CTP = ("cluster", "topic", "partition")
_CT = ("cluster", "topic")
_C = ("cluster",)
_CB = ("cluster", "broker")
_CC = ("cluster", "collector")
_MT = ("mirror", "topic")
_MG = ("mirror", "group")


def _g(name: str, help: str, labels: tuple[str, ...]) -> Family:
    return Family(name, "gauge", help, labels)


def _c(name: str, help: str, labels: tuple[str, ...]) -> Family:
    return Family(name, "counter", help, labels)


#: The per-partition, per-topic and per-group lag families, rendered as text per cluster
#: (``monitor/serve/metrics/lag.py``), in exposition order within each part.
PARTITION_FAMILIES = (
    _g("kafka_consumergroup_group_offset",
       "Committed offset of the group on the partition (newest commit in the window).", _CGTP),
    _g("kafka_consumergroup_group_lag", "Log-end offset minus committed offset (0 caught up).",
       _CGTP),
    _g("kafka_consumergroup_group_lag_seconds",
       "Seconds since the log end was at the committed offset (0 caught up; never NaN).",
       _CGTP),
    _g("kafka_monitor_partition_status", f"Partition status: {_STATUS_CODES}.", _CGTP),
)
OWNER_FAMILIES = (
    _g("kafka_monitor_partition_owner_info",
       "The member that owns the partition, in its labels (value 1; groups with live members).",
       (*_CGTP, "member_host", "consumer_id", "client_id")),
)
GROUP_TOPIC_FAMILIES = (
    _g("kafka_consumergroup_group_topic_sum_lag", "Lag in offsets summed over the topic.", _CGT),
    _g("kafka_consumergroup_group_topic_max_lag_seconds",
       "Largest lag in seconds among the topic's partitions.", _CGT),
    _g("kafka_monitor_group_topic_status",
       "Worst partition status of the topic (codes as kafka_monitor_group_status).", _CGT),
)
GROUP_FAMILIES = (
    _g("kafka_monitor_group_status",
       f"Group status: {_STATUS_CODES} (worst partition).", _CG),
    _g("kafka_monitor_group_status_state", "1 for the group's status, 0 for the others.",
       (*_CG, "status")),
    _g("kafka_consumergroup_group_sum_lag", "Lag in offsets summed over the group's partitions.",
       _CG),
    _g("kafka_consumergroup_group_max_lag", "Largest lag in offsets among the partitions.", _CG),
    _g("kafka_consumergroup_group_max_lag_seconds",
       "Largest lag in seconds among the partitions (never NaN).", _CG),
    _g("kafka_consumergroup_members", "Members of the group (0 when empty or unknown).", _CG),
    _g("kafka_monitor_group_stale",
       "1 when the group's offsets are not current: last verdict held, clocks stopped.", _CG),
    _g("kafka_monitor_group_info", "Kafka's group state in the state label (value 1).",
       (*_CG, "state")),
)
#: Retention risk per group-partition (``monitor/rules/retention.py``), rendered with the
#: partition families.
RETENTION_PARTITION_FAMILIES = (
    _g("kafka_consumergroup_group_lead",
       "Committed offset minus log-start offset: records retention keeps behind the group "
       "(negative: records were deleted unread).", _CGTP),
    _g("kafka_consumergroup_group_lost_records",
       "Records deleted by retention before the group read them (log start past the "
       "committed offset).", _CGTP),
    _g("kafka_consumergroup_group_time_to_loss_seconds",
       "Estimated seconds until retention deletes the group's next unread record (only where "
       "estimable: lag, an advancing log start, a consumer slower than it).", _CGTP),
)
GROUP_STATES = ("Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Dead",
                "Assigning", "Reconciling", "Unknown")
"""The states of ``kafka_consumergroup_state`` (0.9's AwaitingSync is CompletingRebalance)."""
#: Group lifecycle and retention risk per group (``monitor/store/lifecycle.py``), rendered
#: with the group families.
GROUP_LIFECYCLE_FAMILIES = (
    _c("kafka_consumergroup_rebalances",
       "Rebalances the group completed (exact from generations; from Admin API reads, at "
       "least this many).", _CG),
    _c("kafka_consumergroup_rebalancing_seconds",
       "Time the group was seen rebalancing (Admin API reads; read-interval resolution).", _CG),
    _c("kafka_consumergroup_member_changes",
       "Members that joined or left the group (change: joined, left).", (*_CG, "change")),
    _g("kafka_consumergroup_state",
       f"1 for the group's Kafka state, 0 for the others ({', '.join(GROUP_STATES)}).",
       (*_CG, "state")),
    _g("kafka_monitor_group_rebalance_storm",
       "1 when the group rebalanced more than rebalance.storm_count times within "
       "rebalance.storm_window.", _CG),
    _g("kafka_monitor_group_retention_risk",
       "Retention risk, worst partition: 0 OK, 1 WARN (time to loss below retention.warn), "
       "2 LOST (records deleted unread).", _CG),
    _g("kafka_consumergroup_group_sum_lost_records",
       "Records deleted unread, summed over the group's partitions.", _CG),
    _g("kafka_consumergroup_group_min_time_to_loss_seconds",
       "Soonest estimated loss among the group's partitions (only where estimable).", _CG),
)
#: Lag velocity, time to catch up, hot partitions and the lag-seconds method per group
#: (``monitor/rules/velocity.py``), rendered with the group families.
GROUP_VELOCITY_FAMILIES = (
    _g("kafka_consumergroup_group_lag_velocity",
       "Records/s the group's lag grows (> 0) or shrinks (< 0): production minus consumption "
       "over the commit window, summed over its partitions (only where known).", _CG),
    _g("kafka_consumergroup_group_consumption_rate",
       "Records/s the group's commits advanced over the commit window, summed over its "
       "partitions (0 where STOP or STALL; only where known).", _CG),
    _g("kafka_consumergroup_group_time_to_catch_up_seconds",
       "Estimated seconds until the group's slowest lagging partition has caught up at the "
       "current pace (only where every lagging partition's lag shrinks).", _CG),
    _g("kafka_consumergroup_group_hot_partitions",
       "Partitions lagging more than hot_partitions.factor times the group's median lag (and "
       "at least hot_partitions.min_lag records).", _CG),
    _g("kafka_monitor_group_lag_seconds_source",
       "1 for the method that gave the group's lag in seconds (source: timestamp of the first "
       "unread record, interpolated from the log-end history, or lower_bound: older than the "
       "history).", (*_CG, "source")),
)
TOPIC_PARTITION_FAMILIES = (
    _g("kafka_topic_partition_current_offset",
       "Log-end offset (high watermark) of the partition.", _CTP),
    _g("kafka_topic_partition_oldest_offset", "Log-start offset of the partition.", _CTP),
)
TOPIC_FAMILIES = (
    _g("kafka_topic_current_offset_sum", "Log-end offsets summed over the topic's partitions.",
       _CT),
    _g("kafka_topic_oldest_offset_sum", "Log-start offsets summed over the topic's partitions.",
       _CT),
    _g("kafka_topic_partitions", "Partitions of the topic with known offsets.", _CT),
)

_EVALUATION = (
    _g("kafka_monitor_evaluation_timestamp_seconds",
       "When the exported results were evaluated.", _C),
    _g("kafka_monitor_evaluation_duration_seconds", "How long the cluster's evaluation took.",
       _C),
    _g("kafka_monitor_exporter_render_duration_seconds",
       "How long rendering these metrics from it took.", _C),
    _c("kafka_monitor_evaluation_rounds", "Evaluation rounds run.", ()),
    _c("kafka_monitor_groups_expired", "Groups forgotten after expire_group without a commit.",
       ()),
)
_COLLECTORS = (
    _g("kafka_monitor_collector_last_success_timestamp_seconds",
       "When the collector last completed a round.", _CC),
    _g("kafka_monitor_collector_last_duration_seconds",
       "How long the collector's last round took.", _CC),
    _g("kafka_monitor_collector_consecutive_errors", "Failed rounds since the last success.",
       _CC),
    _g("kafka_monitor_collector_ready", "1 when the collector's data can be served.", _CC),
    _c("kafka_monitor_collector_runs", "Collector rounds run.", _CC),
    _c("kafka_monitor_collector_errors", "Collector rounds failed.", _CC),
)
#: Counters collectors report about themselves (:meth:`monitor.ingest.base.Collector.counters`).
COLLECTOR_COUNTERS = (
    _c("kafka_monitor_offsets_topic_records", "__consumer_offsets records decoded.", _C),
    _c("kafka_monitor_offsets_topic_records_skipped",
       "__consumer_offsets records skipped, by reason.", (*_C, "reason")),
    _c("kafka_monitor_offsets_topic_commits_stored", "Commits handed to the store.", _C),
    _c("kafka_monitor_offsets_topic_commits_filtered",
       "Commits dropped by the group or topic filter.", _C),
    _c("kafka_monitor_offsets_topic_events", "Group events handed to the store.",
       (*_C, "kind")),
    _c("kafka_monitor_offsets_topic_consume_errors", "Consume errors, by error.",
       (*_C, "error")),
    _c("kafka_monitor_offsets_topic_handler_errors",
       "Batches whose handling raised (a bug; the reader goes on).", _C),
    _c("kafka_monitor_offsets_topic_reader_restarts", "Reader thread restarts.", _C),
    _c("kafka_monitor_group_describe_failures",
       "Groups whose offsets were read but whose description (state, members) failed, summed "
       "over rounds (e.g. KIP-848 groups on a broker without ConsumerGroupDescribe).", _C),
    _c("kafka_monitor_failover_checks",
       "Failover topic plans made, by result: verified, mirror_behind, unverifiable, "
       "would_skip, no_timestamp (records without timestamps: Kafka before 0.10), budget "
       "(left for a later round).", ("mirror", "result")),
    _c("kafka_monitor_lag_time_fetches",
       "Records fetched for their timestamp (the exact lag in seconds), by result: timestamp, "
       "or the fallback's reason (no_timestamp, deleted, compacted, denied, log_end, timeout, "
       "error).", (*_C, "result")),
    _c("kafka_monitor_pipeline_statuses_records",
       "Records read from the Spark stream's statuses topic.", _C),
    _c("kafka_monitor_pipeline_statuses_records_skipped",
       "Statuses-topic records left out, by reason (key, value: undecodable; other_cluster, "
       "filtered: not this cluster's or not an allowed group).", (*_C, "reason")),
)
_HTTP = (
    _c("kafka_monitor_http_auth_failures",
       "HTTP requests refused for credentials, by reason (missing, invalid; refused: a "
       "state-changing request while no credentials are configured).", ("reason",)),
)
_PROCESS = (
    _c("kafka_monitor_crash_restarts",
       "Times the service process died of a signal (a native crash: SIGSEGV, SIGABRT; or "
       "SIGKILL) and kafka-monitor run's supervisor started it again, by signal.",
       ("signal",)),
)
_STATE = (
    _c("kafka_monitor_state_saves", "State snapshots written.", ()),
    _c("kafka_monitor_state_save_failures", "State snapshots that could not be written.", ()),
    _g("kafka_monitor_state_last_save_timestamp_seconds", "When the last snapshot was written.",
       ()),
    _g("kafka_monitor_state_snapshot_bytes", "Size of the last snapshot written.", ()),
    _g("kafka_monitor_state_last_save_duration_seconds",
       "How long writing the last snapshot took.", ()),
    _g("kafka_monitor_state_restored_age_seconds",
       "Age of the snapshot restored at start (absent: none).", ()),
)
_HEALTH = (
    *(Family(f"kafka_broker_{m.name}", m.kind, m.help, _CB) for m in JMX_CATALOGUE),
    _g("kafka_broker_jmx_value", "A configured MBean attribute.", (*_CB, "mbean", "attribute")),
    _g("kafka_monitor_broker_jmx_up", "1 when the broker's last JMX scrape answered.", _CB),
    _g("kafka_monitor_broker_jmx_scrape_duration_seconds",
       "How long the broker's last JMX scrape took.", _CB),
    _g("kafka_monitor_broker_jmx_last_success_timestamp_seconds",
       "When the broker's JMX last answered.", _CB),
    _g("kafka_monitor_broker_in_metadata",
       "1 when a known broker is in the cluster's metadata.", _CB),
    _g("kafka_monitor_broker_replicas", "Partition replicas assigned to the broker (metadata).",
       _CB),
    _g("kafka_monitor_broker_leaders", "Partitions the broker leads (metadata).", _CB),
    _g("kafka_monitor_broker_suspect",
       "1 on the broker missing from every under-replicated partition's ISR.", _CB),
    _g("kafka_monitor_cluster_status", "Cluster status: 0 OK, 1 WARN, 2 ERR.", _C),
    _g("kafka_monitor_cluster_under_replicated_partitions",
       "Partitions whose ISR lacks an assigned replica (metadata).", _C),
    _g("kafka_monitor_cluster_offline_partitions", "Partitions without a leader (metadata).",
       _C),
    _g("kafka_monitor_cluster_non_preferred_leaders",
       "Partitions not led by their preferred replica.", _C),
    _g("kafka_monitor_cluster_replica_skew", "Replicas per live broker, max/mean - 1.", _C),
    _g("kafka_monitor_cluster_leader_skew", "Leaders per live broker, max/mean - 1.", _C),
    _g("kafka_monitor_cluster_active_controllers",
       "ActiveControllerCount summed over brokers answering JMX.", _C),
)
_MIRROR = (
    _g("kafka_mirror_lag", "Source minus destination log-end offset.", (*_MT, "partition")),
    _g("kafka_mirror_topic_lag", "Source minus destination log-end offsets, summed.", _MT),
    _g("kafka_mirror_group_status", f"Mirroring group status: {_STATUS_CODES}.", ("mirror",)),
    _g("kafka_mirror_group_lag", "Mirroring group's total lag.", ("mirror",)),
    _g("kafka_mirror_group_lag_seconds", "Mirroring group's largest lag in seconds.",
       ("mirror",)),
    _g("kafka_mirror_window_source_records",
       "Records written at the source in the last closed window.", _MT),
    _g("kafka_mirror_window_destination_records",
       "Records written at the destination in the last closed window (shifted by count_delay).",
       _MT),
    _g("kafka_mirror_window_difference",
       "Source minus destination records in the last closed window.", _MT),
    _g("kafka_mirror_window_difference_sum",
       "Source minus destination records over every closed window since start.", _MT),
    _g("kafka_mirror_failover_ready",
       "1 when the group's failover plan to the destination is verified (skips nothing).",
       _MG),
    _g("kafka_mirror_failover_state",
       "1 for the plan's state: verified, mirror_behind, unverifiable, would_skip.",
       (*_MG, "state")),
    _g("kafka_mirror_failover_reread_records",
       "Records a failover would read again (exact when verified with equal partitions, "
       "else at most).", _MG),
    _g("kafka_mirror_failover_reread_seconds",
       "Seconds of records a failover would read again.", _MG),
    _g("kafka_mirror_failover_age_seconds",
       "Seconds since the plan was last checked against the group's committed offsets.", _MG),
)

#: Canary probes: one set per (prefix, scope label): the per-cluster canaries and the canaries
#: across mirrors (there the end-to-end latency is the replication latency).
CANARY_SCOPES = (("kafka_canary", "cluster"), ("kafka_mirror_canary", "mirror"))


def _canary(prefix: str, scope: str) -> tuple[Family, ...]:
    per_part = (scope, "partition", "broker")

    def hist(name: str, help: str, labels: tuple[str, ...]) -> Family:
        return Family(f"{prefix}_{name}", "histogram", help, labels)

    return (
        _c(f"{prefix}_produce_attempts", "Canary records sent.", per_part),
        _c(f"{prefix}_produce_acks", "Canary records acknowledged by the leader.", per_part),
        _c(f"{prefix}_produce_errors", "Canary records whose produce failed.", per_part),
        _c(f"{prefix}_records_consumed", "Canary records of this run consumed.", per_part),
        _c(f"{prefix}_records_lost",
           "Acknowledged canary records not consumed within the loss SLA.", per_part),
        _c(f"{prefix}_records_duplicated", "Canary records consumed again.", per_part),
        _c(f"{prefix}_records_out_of_order",
           "Canary records consumed after a higher sequence of the same partition.", per_part),
        _c(f"{prefix}_records_late", "Canary records consumed after being counted lost.",
           per_part),
        hist("produce_latency_seconds", "Send to acknowledgement.", (scope, "broker")),
        hist("end_to_end_latency_seconds",
             "Send to consumption (across a mirror: replication latency).", (scope, "broker")),
        hist("commit_latency_seconds", "Offset commit of the canary group.", (scope,)),
        _c(f"{prefix}_commit_attempts", "Canary group commits tried.", (scope,)),
        _c(f"{prefix}_commit_errors", "Canary group commits failed.", (scope,)),
        _g(f"{prefix}_produce_availability",
           "Acknowledged / (acknowledged + failed) over the window.", (scope, "partition")),
        _g(f"{prefix}_consume_availability", "Consumed / (consumed + lost) over the window.",
           (scope, "partition")),
        _g(f"{prefix}_broker_covered", "1 when the broker leads a canary partition.",
           (scope, "broker")),
    )


CATALOGUE: dict[str, Family] = {
    f.name: f
    for f in (
        *PARTITION_FAMILIES, *OWNER_FAMILIES, *GROUP_TOPIC_FAMILIES, *GROUP_FAMILIES,
        *RETENTION_PARTITION_FAMILIES, *GROUP_LIFECYCLE_FAMILIES,
        *GROUP_VELOCITY_FAMILIES,
        *TOPIC_PARTITION_FAMILIES, *TOPIC_FAMILIES, *_EVALUATION, *_COLLECTORS,
        *COLLECTOR_COUNTERS, *_HTTP, *_PROCESS, *_STATE, *_HEALTH, *_MIRROR,
        *(f for prefix, scope in CANARY_SCOPES for f in _canary(prefix, scope)),
    )
}


def entry(name: str) -> Family:
    """The catalogue's entry for ``name`` (KeyError: a family nobody declared)."""
    return CATALOGUE[name]


def gauge(name: str) -> GaugeMetricFamily:
    """An empty gauge family for a scrape, as the catalogue declares it."""
    from prometheus_client.core import GaugeMetricFamily

    f = CATALOGUE[name]
    if f.kind != "gauge":
        raise TypeError(f"{name} is a {f.kind}, not a gauge")
    return GaugeMetricFamily(f.name, f.help, labels=list(f.labels))


def counter(name: str, value: float | None = None) -> CounterMetricFamily:
    """An empty counter family for a scrape (or, without labels, one holding ``value``)."""
    from prometheus_client.core import CounterMetricFamily

    f = CATALOGUE[name]
    if f.kind != "counter":
        raise TypeError(f"{name} is a {f.kind}, not a counter")
    if value is not None:
        return CounterMetricFamily(f.name, f.help, value=value)
    return CounterMetricFamily(f.name, f.help, labels=list(f.labels))


def family(name: str) -> GaugeMetricFamily | CounterMetricFamily:
    """A gauge or counter family for ``name``, whichever the catalogue says it is."""
    return counter(name) if CATALOGUE[name].kind == "counter" else gauge(name)

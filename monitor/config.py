"""The service's configuration: one pydantic model tree, loaded from a YAML or TOML file.

Everything the service does is decided here, validated once at start-up. Errors name the file,
the key path (``clusters[0].sasl.password``) and the reason, so an operator can fix a broken
file without reading code. Secrets are never written in the file itself if the operator does
not want to: any secret field takes ``{env: NAME}`` or ``{file: PATH}`` instead of a literal,
and is held as a ``SecretStr`` that prints masked.
"""

from __future__ import annotations

import difflib
import os
import re
import socket
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from monitor.model.jmx_metrics import DEFAULT_MBEANS

# --------------------------------------------------------------------------------------------
# Field types
# --------------------------------------------------------------------------------------------

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: Any, zero_allowed: bool = False) -> float:
    """Durations are written as operators write them (``500ms``, ``10s``, ``5m``, ``7d``) or as
    plain numbers of seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 10s, 5m or 7d")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION_RE.match(value)):
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2) or "s"]
    else:
        raise ValueError(f"expected a duration such as 10s, 5m or 7d, got {value!r}")
    if seconds < 0 or (seconds == 0 and not zero_allowed):
        raise ValueError("a duration must be greater than zero")
    return seconds


def parse_duration_or_off(value: Any) -> float:
    """A duration where 0 turns the option off (Burrow's behaviour)."""
    return parse_duration(value, zero_allowed=True)


def format_duration(seconds: float) -> str:
    """Inverse of :func:`parse_duration`, choosing the largest unit that divides exactly."""
    if seconds == 0:
        return "0s"
    for unit in ("d", "h", "m", "s"):
        size = _DURATION_UNITS[unit]
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{round(seconds * 1000, 3):g}ms"


Duration = Annotated[
    float, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)
]
DurationOrOff = Annotated[
    float, BeforeValidator(parse_duration_or_off),
    PlainSerializer(format_duration, return_type=str),
]


def resolve_secret(value: Any) -> SecretStr:
    """A secret is a literal string, ``{env: NAME}`` or ``{file: PATH}`` (trailing newline
    stripped, as written by Kubernetes secret mounts and ``echo``)."""
    if isinstance(value, SecretStr):
        return value
    if isinstance(value, str):
        return SecretStr(value)
    if isinstance(value, dict) and len(value) == 1:
        ((kind, ref),) = value.items()
        if kind == "env" and isinstance(ref, str):
            if ref not in os.environ:
                raise ValueError(f"environment variable {ref} is not set")
            return SecretStr(os.environ[ref])
        if kind == "file" and isinstance(ref, str):
            try:
                return SecretStr(Path(ref).read_text().rstrip("\n"))
            except OSError as exc:
                raise ValueError(f"cannot read secret file {ref}: {exc.strerror}") from None
    raise ValueError("a secret is a string, {env: VARIABLE} or {file: PATH}")


Secret = Annotated[
    SecretStr,
    BeforeValidator(resolve_secret),
    PlainSerializer(lambda s: "**********" if s else None, return_type=str | None),
]


def _compile_regex(value: Any) -> re.Pattern[str]:
    if isinstance(value, re.Pattern):
        return value
    if not isinstance(value, str):
        raise ValueError("expected a regular expression string")
    try:
        return re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from None


Regex = Annotated[
    re.Pattern[str],
    BeforeValidator(_compile_regex),
    PlainSerializer(lambda p: p.pattern, return_type=str),
]

_HOST_PORT_RE = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")
_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_MBEAN_QUERY_RE = re.compile(r"^[^:;/=,]+:[^:;/=,]+=[^;/]+(/[^;/]+)?$")


class _Model(BaseModel):
    """Unknown keys are errors: a typo must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------------------------
# Clusters
# --------------------------------------------------------------------------------------------


class SaslConfig(_Model):
    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"] = (
        "PLAIN"
    )
    username: str | None = None
    password: Secret | None = None

    @model_validator(mode="after")
    def _credentials(self) -> SaslConfig:
        if self.mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
            self.username and self.password
        ):
            raise ValueError(f"SASL mechanism {self.mechanism} needs username and password")
        return self


class TlsConfig(_Model):
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: Secret | None = None
    verify_hostname: bool = True

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _exists(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_file():
            raise ValueError(f"file not found: {path}")
        return path

    @model_validator(mode="after")
    def _pair(self) -> TlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together (client certificate)")
        return self


class JmxEndpoint(_Model):
    """Where one broker's JMX agent listens. Brokers are named by their Kafka broker id so that
    JMX and metadata findings about the same broker can be joined."""

    broker_id: int = Field(ge=0)
    host: str = Field(min_length=1)
    port: int = Field(ge=1, le=65535)
    username: str | None = None
    password: Secret | None = None
    tls: bool = False

    @property
    def service_url(self) -> str:
        return f"service:jmx:rmi:///jndi/rmi://{self.host}:{self.port}/jmxrmi"


class NameFilter(_Model):
    """Allow/deny regular expressions (``re.search``). An empty allow list allows everything;
    deny wins over allow."""

    allow: list[Regex] = Field(default_factory=list)
    deny: list[Regex] = Field(default_factory=list)

    def matches(self, name: str) -> bool:
        if any(p.search(name) for p in self.deny):
            return False
        return not self.allow or any(p.search(name) for p in self.allow)


class OffsetsTopicConfig(_Model):
    topic: str = "__consumer_offsets"
    start: Literal["earliest", "latest"] = Field(
        default="earliest",
        description="earliest rebuilds full history (slower start); latest only sees new commits",
    )


class PipelineStatusesConfig(_Model):
    """``offsets_source: pipeline``: the Spark stream evaluates the cluster's groups and
    publishes the verdicts to a compacted topic on the cluster; the service serves them."""

    topic: str = Field(default="kafka-monitor-statuses", pattern=r"^[A-Za-z0-9._-]{1,249}$")
    max_age: Duration = Field(
        default=60.0, gt=0,
        description="a published verdict older than this is served marked stale (the stream "
        "stopped or fell behind); set it above the stream's trigger interval",
    )


class ClusterConfig(_Model):
    name: str = Field(pattern=_NAME_RE, max_length=200)
    bootstrap_servers: list[str] = Field(min_length=1)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl: SaslConfig | None = None
    tls: TlsConfig | None = None
    broker_version_fallback: str | None = Field(
        default=None,
        pattern=r"^\d+\.\d+(\.\d+){0,2}$",
        description="for brokers older than 0.10 (no ApiVersions request), e.g. 0.9.0.1",
    )
    client_properties: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="extra librdkafka properties, applied last"
    )
    request_timeout: Duration = 10.0
    jmx: list[JmxEndpoint] = Field(default_factory=list)
    offsets_source: Literal["admin", "offsets_topic", "both", "pipeline"] = Field(
        default="admin",
        description="where group offsets come from; pipeline: the verdicts the Spark stream "
        "publishes (see pipeline_statuses), for fleets one service cannot evaluate",
    )
    offsets_topic: OffsetsTopicConfig = Field(default_factory=OffsetsTopicConfig)
    pipeline_statuses: PipelineStatusesConfig = Field(default_factory=PipelineStatusesConfig)
    groups: NameFilter = Field(default_factory=NameFilter)
    extra_groups: list[str] = Field(
        default_factory=list,
        description="groups read every round even if Kafka does not list them "
        "(commit-only assign() consumers, ListGroups denied by ACLs)",
    )
    topics: NameFilter = Field(
        default_factory=lambda: NameFilter(deny=[re.compile(r"^__")]),
        description="default: every topic except internal ones (names starting with __)",
    )

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [s.strip() for s in value.split(",") if s.strip()]
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port(cls, servers: list[str]) -> list[str]:
        for server in servers:
            m = _HOST_PORT_RE.match(server)
            if not m or not 1 <= int(m.group(2)) <= 65535:
                raise ValueError(f"expected host:port, got {server!r}")
        return servers

    @field_validator("client_properties")
    @classmethod
    def _no_owned_properties(cls, props: dict[str, Any]) -> dict[str, Any]:
        owned = {"bootstrap.servers", "group.id", "sasl.password", "ssl.key.password"}
        clash = sorted(owned & props.keys())
        if clash:
            raise ValueError(
                f"{', '.join(clash)} must be set through the cluster's own keys "
                "(bootstrap_servers, sasl, tls), not client_properties"
            )
        return props

    @model_validator(mode="after")
    def _security(self) -> ClusterConfig:
        if self.security_protocol.startswith("SASL") and self.sasl is None:
            raise ValueError(f"security_protocol {self.security_protocol} needs a sasl section")
        if self.sasl is not None and not self.security_protocol.startswith("SASL"):
            raise ValueError("a sasl section needs security_protocol SASL_PLAINTEXT or SASL_SSL")
        if self.tls is not None and not self.security_protocol.endswith("SSL"):
            raise ValueError("a tls section needs security_protocol SSL or SASL_SSL")
        ids = [e.broker_id for e in self.jmx]
        if len(ids) != len(set(ids)):
            raise ValueError("jmx: each broker_id may appear only once")
        return self


# --------------------------------------------------------------------------------------------
# Subsystems
# --------------------------------------------------------------------------------------------


class CollectorsConfig(_Model):
    """How often each collector polls. Views never trigger collection: they serve the latest
    results, so these intervals bound how stale an answer can be."""

    metadata_interval: Duration = 60.0
    broker_offsets_interval: Duration = 10.0
    group_offsets_interval: Duration = 10.0
    jmx_interval: Duration = 30.0
    jmx_timeout: Duration = 10.0
    jmx_mbeans: list[str] = Field(
        default_factory=lambda: list(DEFAULT_MBEANS), min_length=1,
        description="jmxquery queries, objectName[/attribute], wildcards allowed; all of them "
        "are read in one call per broker",
    )
    group_concurrency: int = Field(default=8, ge=1, le=256)

    @field_validator("jmx_mbeans")
    @classmethod
    def _mbean_queries(cls, queries: list[str]) -> list[str]:
        for query in queries:
            if not _MBEAN_QUERY_RE.match(query):
                raise ValueError(
                    f"expected domain:key=value[,key=value...][/attribute] without ';', "
                    f"got {query!r}"
                )
        return queries


class EvaluatorConfig(_Model):
    """The sliding-window rules' parameters (Burrow's names in the descriptions)."""

    window: int = Field(default=10, ge=2, le=1000, description="commits kept per partition")
    min_distance: Duration = Field(
        default=1.0, description="a commit closer than this to the previous one replaces it"
    )
    allowed_lag: int = Field(default=0, ge=0, description="lag at or below this is always OK")
    expire_group: Duration = Field(default=7 * 86400.0, description="forget silent groups")
    idle_aware_stop: bool = Field(
        default=True,
        description="STOP's clock starts when the log end was last seen at the committed "
        "offset, not at the last commit: no false STOP on idle or slow topics",
    )
    idle_stop_grace: Duration = Field(
        default=60.0,
        description="least time a consumer seen caught up after its last commit gets to "
        "react to new data before STOP (it commits only on progress)",
    )
    marker_tolerance: int = Field(
        default=1, ge=0,
        description="a lag this small, with no record since the commit, is a transaction "
        "marker, not lag",
    )
    burrow_status: bool = Field(
        default=False, description="report group status as Burrow does (STOP/STALL/REWIND -> ERR)"
    )
    young_window_stop: DurationOrOff = Field(
        default=60.0,
        description="a window with a single commit is STOP only after this much silence; a "
        "young one needs three of its commit gaps (0: Burrow's rule, its span)",
    )
    warn_lag_gaps: float = Field(
        default=2.0, ge=0,
        description="WARN needs the lag to have grown across the window and to exceed this "
        "many commit gaps' worth of production at its last two commits (sampling between "
        "commits, or one burst, explains less); 0: Burrow's rule",
    )
    gone_stop: DurationOrOff = Field(
        default=10.0,
        description="a group whose consumers all left (seen with live members, now none) and "
        "that has lag is STOP after this much silence, not after its window's span (0: "
        "Burrow's rule, the span)",
    )
    live_member_stall: bool = Field(
        default=True,
        description="a partition that would be STOP while the group has live members is "
        "STALL: the consumer is there but does not move",
    )
    interval: Duration = Field(
        default=5.0, gt=0, description="how often every group is re-evaluated"
    )


class RebalanceConfig(_Model):
    """Group lifecycle (``monitor/store/lifecycle.py``): when rebalances count as a storm, and how
    much state history each group keeps for the API."""

    storm_count: int = Field(
        default=5, ge=1,
        description="more rebalances than this within storm_window is a rebalance storm",
    )
    storm_window: Duration = Field(default=600.0, gt=0, description="see storm_count")
    history: int = Field(
        default=20, ge=1, le=1000, description="state transitions kept per group (the API's)"
    )


class RetentionConfig(_Model):
    """Retention risk (``monitor/rules/retention.py``): how soon a group's unread records may be
    deleted before it reads them."""

    warn: Duration = Field(
        default=3600.0, gt=0,
        description="a partition whose unread records are expected to be deleted sooner than "
        "this is WARN (records already deleted unread: LOST)",
    )


class LagTimeConfig(_Model):
    """Exact lag in seconds from record timestamps (``monitor/ingest/record_times.py``): the
    age of the first record a lagging group has not read, where the broker stores one."""

    enabled: bool = Field(
        default=True, description="false: the lag in seconds is always interpolated",
    )
    max_fetches: int = Field(
        default=100, ge=1, le=100_000,
        description="records fetched per round at most (one per lagging partition and "
        "committed offset; a stopped group costs one fetch, not one per round)",
    )
    fetch_timeout: Duration = Field(
        default=5.0, gt=0, description="a round's fetches give up after this",
    )


class HotPartitionsConfig(_Model):
    """Hot partitions (``monitor/rules/velocity.py``): a partition lagging far more than the
    rest of its group."""

    factor: float = Field(
        default=5.0, gt=1,
        description="a partition lagging more than this times its group's median lag is hot",
    )
    min_lag: int = Field(
        default=1000, ge=1, description="... and by at least this many records",
    )


_TOPIC_RE = r"^[A-Za-z0-9._-]{1,249}$"


class CanaryConfig(_Model):
    """Canary probes (``monitor/ingest/canary/``); ``interval``, ``record_size``, timeouts and the
    window also apply to the canaries of ``mirrors``."""

    enabled: bool = False
    topic: str = Field(default="_kafka_monitor_canary", pattern=_TOPIC_RE)
    interval: Duration = 1.0
    partitions_per_broker: int = Field(default=1, ge=1, le=100)
    replication_factor: int | None = Field(default=None, ge=1)
    record_size: int = Field(default=100, ge=32, le=1_000_000)
    loss_sla: Duration = Field(
        default=20.0, description="an acknowledged record not consumed within this is lost"
    )
    instance_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}", min_length=1,
        max_length=200,
        description="set a stable id (e.g. the pod name) so restarts reuse the canary group",
    )
    group: str | None = Field(
        default=None, description="the canary consumer group; default "
        "kafka-monitor-canary-<instance_id> (one group per instance)"
    )
    produce_timeout: Duration = Field(
        default=10.0, description="a send not acknowledged within this failed"
    )
    commit_interval: Duration = Field(default=5.0, description="canary group commit probe")
    window: Duration = Field(
        default=60.0, description="availability and latency quantiles in the API cover this"
    )


class FailoverConfig(_Model):
    """Failover translation of each source group's position to the destination by record
    timestamp (``monitor/ingest/failover/``), kept current and verified record by record."""

    enabled: bool = Field(
        default=True, description="translate and verify each group's position on the mirrored "
        "topics (needs record timestamps: Kafka 0.10 or later at both ends)",
    )
    margin: DurationOrOff = Field(
        default=60.0, ge=0, description="translated offsets look up the group's position time "
        "less this much: records whose timestamps run out of order by up to this much "
        "(producer clocks, batching, retries) are read again rather than skipped",
    )
    interval: Duration = Field(default=30.0, gt=0, description="seconds between rounds")
    max_fetches: int = Field(
        default=200, ge=1, le=100_000,
        description="record fetches and destination scans per round at most (results are "
        "cached per committed offset: a group that does not move costs nothing)",
    )
    scan_records: int = Field(
        default=1000, ge=1, le=1_000_000,
        description="records read from a translated offset on, at most, to find the group's "
        "position there",
    )
    fetch_timeout: Duration = Field(default=10.0, gt=0,
                                    description="a round's reads give up after this")
    destination_prefix: str = Field(
        default="", max_length=200, description="prefix of the mirrored topics' names at the "
        "destination (MirrorMaker 2's default replication policy: '<source alias>.')",
    )
    max_plan_age: Duration = Field(
        default=900.0, gt=0, description="failover apply refuses a plan last checked longer "
        "ago than this (override with --max-age)",
    )


class MirrorConfig(_Model):
    name: str = Field(pattern=_NAME_RE)
    source: str
    destination: str
    topics: list[str] = Field(
        default_factory=list, description="mirrored topics: log-end lag and window counts"
    )
    group: str | None = Field(default=None, description="the mirroring consumer group")
    canary: bool = Field(
        default=True, description="produce canary records at the source, consume them at the "
        "destination (the mirror must mirror canary_topic)",
    )
    canary_topic: str = Field(default="_kafka_monitor_mirror_canary", pattern=_TOPIC_RE)
    destination_canary_topic: str | None = Field(
        default=None, pattern=_TOPIC_RE,
        description="the canary topic's name at the destination (default: the same; "
        "MirrorMaker 2 writes <source alias>.<topic>)",
    )
    count_window: Duration = Field(
        default=60.0, description="records written at source and destination are compared "
        "per window of this length"
    )
    count_delay: Duration = Field(
        default=10.0, description="the destination's window is shifted by this much (the "
        "expected replication latency)"
    )
    failover: FailoverConfig = Field(default_factory=FailoverConfig)


class HttpTlsConfig(_Model):
    """TLS for the HTTP server; with ``client_ca_file``, mutual TLS: every client must present
    a certificate signed by that CA."""

    cert_file: Path
    key_file: Path
    key_password: Secret | None = None
    client_ca_file: Path | None = None

    @field_validator("cert_file", "key_file", "client_ca_file")
    @classmethod
    def _exists(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_file():
            raise ValueError(f"file not found: {path}")
        return path


class HttpAuthConfig(_Model):
    """Who may call the HTTP API. Requests that change state (DELETE a group or its topic,
    POST the log level) always need credentials, and are refused (403) while none are
    configured; reads (the v3 API and the status page) and ``/metrics`` need them only when
    asked. ``/healthz`` and ``/ready`` stay open for probes."""

    tokens: list[Secret] = Field(default_factory=list,
                                 description="bearer tokens (Authorization: Bearer ...)")
    users: dict[str, Secret] = Field(default_factory=dict,
                                     description="basic-auth users: name -> password")
    reads: bool = Field(default=False,
                        description="the v3 API's reads and the status page need credentials")
    metrics: bool = Field(default=False, description="/metrics needs credentials")

    @property
    def configured(self) -> bool:
        return bool(self.tokens or self.users)

    @model_validator(mode="after")
    def _credentials(self) -> HttpAuthConfig:
        for name in ("reads", "metrics"):
            if getattr(self, name) and not self.configured:
                raise ValueError(f"{name}: true needs tokens or users to check against")
        if any(not t.get_secret_value() for t in self.tokens):
            raise ValueError("tokens: an empty token would let anyone in")
        if any(not p.get_secret_value() for p in self.users.values()):
            raise ValueError("users: an empty password would let anyone in")
        return self


class HttpConfig(_Model):
    host: str = "0.0.0.0"
    port: int = Field(default=8000, ge=0, le=65535, description="0 picks a free port")
    tls: HttpTlsConfig | None = None
    auth: HttpAuthConfig = Field(default_factory=HttpAuthConfig)


class LoggingConfig(_Model):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["json", "text"] = "json"


class HealthConfig(_Model):
    """Broker and cluster health thresholds (request-handler idle is a fraction, 0..1)."""

    request_handler_idle_warn: float = Field(default=0.20, gt=0, lt=1)
    request_handler_idle_err: float = Field(default=0.10, gt=0, lt=1)

    @model_validator(mode="after")
    def _order(self) -> HealthConfig:
        if self.request_handler_idle_err > self.request_handler_idle_warn:
            raise ValueError("request_handler_idle_err must not exceed request_handler_idle_warn")
        return self


class ExporterConfig(_Model):
    """Prometheus ``/metrics``. Group-partition series multiply groups by partitions; on big
    clusters ``partition_series: false`` bounds the series count to groups x topics."""

    partition_series: bool = Field(
        default=True,
        description="per-partition lag, offset and status series; false exports per-topic "
        "aggregates only (sum of lag, max lag seconds, worst status, summed log offsets)",
    )


class RecorderConfig(_Model):
    """Observations written to Parquet for backtests (``monitor/record/recorder.py``), under
    ``path/{observations,statuses}/cluster=<name>/date=<YYYY-MM-DD>/``."""

    enabled: bool = False
    path: Path = Path("recordings")
    flush_interval: Duration = Field(
        default=10.0, description="buffered observations are written this often"
    )
    max_file_bytes: int = Field(
        default=128 * 1024 * 1024, ge=1024, description="a file is closed past this size"
    )
    max_file_age: Duration = Field(
        default=600.0, description="a file is closed (and readable) after this long"
    )
    retention: Duration = Field(default=7 * 86400.0, description="files older are deleted")
    max_total_bytes: int = Field(
        default=10 * 1024**3, ge=1024, description="oldest files are deleted past this total"
    )
    max_buffered_rows: int = Field(
        default=5_000_000, ge=1000,
        description="rows held between flushes; beyond, observations are dropped and counted",
    )
    canary: bool = Field(default=True, description="also record canary probe snapshots")


class StateConfig(_Model):
    """What the verdicts need (windows, log-end history, group offsets and memberships),
    saved to ``path`` so that a restart resumes instead of starting blind
    (``monitor/store/snapshot.py``). Off unless ``path`` is set: a default directory would land in
    whatever the working directory is (read-only in most containers, shared between
    instances started from one checkout); the Helm chart sets it to a mounted volume."""

    path: Path | None = Field(
        default=None, description="directory of the snapshot (created if missing); unset: "
        "nothing is saved or loaded"
    )
    interval: Duration = Field(
        default=30.0, description="saved this often, and once at shutdown"
    )
    max_age: Duration = Field(
        default=3600.0, description="an older snapshot is ignored at start"
    )


class MonitorConfig(_Model):
    clusters: list[ClusterConfig] = Field(min_length=1)
    collectors: CollectorsConfig = Field(default_factory=CollectorsConfig)
    evaluator: EvaluatorConfig = Field(default_factory=EvaluatorConfig)
    rebalance: RebalanceConfig = Field(default_factory=RebalanceConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    hot_partitions: HotPartitionsConfig = Field(default_factory=HotPartitionsConfig)
    lag_time: LagTimeConfig = Field(default_factory=LagTimeConfig)
    canary: CanaryConfig = Field(default_factory=CanaryConfig)
    mirrors: list[MirrorConfig] = Field(default_factory=list)
    http: HttpConfig = Field(default_factory=HttpConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)
    exporter: ExporterConfig = Field(default_factory=ExporterConfig)
    recorder: RecorderConfig = Field(default_factory=RecorderConfig)
    state: StateConfig = Field(default_factory=StateConfig)

    @model_validator(mode="after")
    def _references(self) -> MonitorConfig:
        names = [c.name for c in self.clusters]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"clusters: duplicate name(s) {', '.join(dupes)}")
        for mirror in self.mirrors:
            for end in (mirror.source, mirror.destination):
                if end not in names:
                    raise ValueError(f"mirror {mirror.name}: unknown cluster {end!r}")
        return self

    def cluster(self, name: str) -> ClusterConfig:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


class ConfigError(Exception):
    """A configuration file that cannot be used; ``str()`` is one line per problem, each
    ``FILE: KEY.PATH: reason``."""

    def __init__(self, path: Path | str, problems: list[tuple[str, str]]) -> None:
        self.path = str(path)
        self.problems = problems
        super().__init__(
            "\n".join(f"{self.path}: {key}: {reason}" if key else f"{self.path}: {reason}"
                      for key, reason in problems)
        )


def _key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fields_at(loc: tuple[int | str, ...]) -> list[str]:
    """The field names valid where an unknown key was found, for a did-you-mean hint."""
    model: type[BaseModel] | None = MonitorConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return []
        candidates = [field.annotation, *getattr(field.annotation, "__args__", ())]
        model = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
    return list(model.model_fields) if model is not None else []


def _reason(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        known = _fields_at(tuple(error["loc"]))
        hint = difflib.get_close_matches(str(error["loc"][-1]), known, n=1)
        return "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def parse_config(data: Any, source: Path | str = "<config>") -> MonitorConfig:
    """Validate already-parsed data; raises :class:`ConfigError` naming every bad key."""
    if not isinstance(data, dict):
        raise ConfigError(source, [("", "the top level must be a mapping of keys")])
    try:
        return MonitorConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not str(p).startswith("function-"))
            problems.append((_key_path(loc), _reason(error)))
        raise ConfigError(source, problems) from None


def load_config(path: Path | str) -> MonitorConfig:
    """Read and validate a ``.yaml``/``.yml`` or ``.toml`` file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(path, [("", f"cannot read file: {exc.strerror}")]) from None
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(path, [("", f"TOML syntax error: {exc}")]) from None
    elif path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(path, [("", f"YAML syntax error: {where}{problem}")]) from None
    else:
        raise ConfigError(path, [("", "expected a .yaml, .yml or .toml file")])
    return parse_config(data, path)


def effective_config(config: MonitorConfig) -> dict[str, Any]:
    """The configuration with every default filled in and secrets masked, as check-config
    prints it."""
    data = config.model_dump(mode="json")
    for cluster in data["clusters"]:
        props = cluster["client_properties"]
        for key in props:
            if _SECRET_PROPERTY_RE.search(key):
                props[key] = "**********"
    return data


_SECRET_PROPERTY_RE = re.compile(r"password|secret|token|credential", re.IGNORECASE)

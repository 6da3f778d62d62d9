"""Building confluent-kafka (librdkafka) clients from a cluster's configuration.

Every Kafka client the service creates goes through here, so security settings, the old-broker
fallback and the operator's extra properties are applied the same way everywhere.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka.admin import AdminClient

from monitor.config import ClusterConfig
from monitor.ingest.connection_errors import connection_errors
from monitor.logs import RepeatLimit

_log = logging.getLogger("monitor.kafka")


class DropFallbackDeprecation(logging.Filter):
    """librdkafka warns at every client creation that ``api.version.request`` and
    ``broker.version.fallback`` are deprecated; brokers older than 0.10 need both, so for a
    cluster configured with a fallback the warning is noise, repeated per client."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("CONFWARN" in message and "is deprecated" in message)


_log.addFilter(DropFallbackDeprecation())
_log.addFilter(RepeatLimit())  # a failing cluster: one line a minute per kind, not dozens a second


def client_config(cluster: ClusterConfig, **overrides: Any) -> dict[str, Any]:
    """librdkafka properties for ``cluster``; ``overrides`` (e.g. ``group.id``) come last but
    one: the operator's ``client_properties`` always win, since they know their cluster."""
    conf: dict[str, Any] = {
        "bootstrap.servers": ",".join(cluster.bootstrap_servers),
        "security.protocol": cluster.security_protocol.lower(),
        "socket.timeout.ms": int(cluster.request_timeout * 1000),
        "logger": _log,
        # Why connections fail (TLS, SASL, refused) reaches us only here: see connection_errors.
        "error_cb": connection_errors.callback(cluster.name),
    }
    if cluster.broker_version_fallback:
        # Brokers before 0.10 do not answer ApiVersions; librdkafka must be told what they speak.
        conf["api.version.request"] = False
        conf["broker.version.fallback"] = cluster.broker_version_fallback
    if cluster.sasl is not None:
        conf["sasl.mechanisms"] = cluster.sasl.mechanism
        if cluster.sasl.username is not None:
            conf["sasl.username"] = cluster.sasl.username
        if cluster.sasl.password is not None:
            conf["sasl.password"] = cluster.sasl.password.get_secret_value()
    if cluster.tls is not None:
        tls = cluster.tls
        if tls.ca_file:
            conf["ssl.ca.location"] = str(tls.ca_file)
        if tls.cert_file and tls.key_file:
            conf["ssl.certificate.location"] = str(tls.cert_file)
            conf["ssl.key.location"] = str(tls.key_file)
        if tls.key_password is not None:
            conf["ssl.key.password"] = tls.key_password.get_secret_value()
        conf["ssl.endpoint.identification.algorithm"] = "https" if tls.verify_hostname else "none"
    conf.update(overrides)
    conf.update(cluster.client_properties)
    return conf


def admin_client(cluster: ClusterConfig) -> AdminClient:
    return AdminClient(client_config(cluster, **{"client.id": f"kafka-monitor-{cluster.name}"}))

"""Why a cluster cannot be reached: librdkafka's error_cb reasons quoted in a failed round's
health (the end-to-end case, a broken TLS handshake, is in
tests/integration/ingest/test_kafka_tls.py)."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError

from monitor.ingest.base import Collector
from monitor.ingest.connection_errors import ConnectionErrors, connection_errors


def test_the_latest_informative_error_per_cluster() -> None:
    errors = ConnectionErrors()
    before = time.time()
    errors.callback("a")(KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify"))
    errors.callback("a")(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert errors.since("a", before) == "_SSL: SSL handshake failed: certificate verify"
    assert errors.since("b", before) is None
    assert errors.since("a", time.time() + 1) is None  # older than the round


class Failing(Collector):
    kind = "failing"

    def collect(self) -> None:
        raise RuntimeError("Failed to get metadata: Local: Broker transport failure")


class FailingJmx(Failing):
    kind = "jmx"
    kafka_client = False


def test_a_failed_round_quotes_the_reason_only_for_kafka_client_collectors() -> None:
    connection_errors.callback("quoted")(
        KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9/bootstrap: Connection refused"))
    kafka, jmx = Failing("quoted", 10.0), FailingJmx("quoted", 10.0)
    assert not kafka.run_once() and not jmx.run_once()
    assert kafka.health.last_error == (
        "RuntimeError: Failed to get metadata: Local: Broker transport failure; "
        "connection: _TRANSPORT: 127.0.0.1:9/bootstrap: Connection refused")
    assert jmx.health.last_error == (
        "RuntimeError: Failed to get metadata: Local: Broker transport failure")

"""Kafka over TLS, proven on a real 0.9 broker with an SSL listener that requires client
certificates (keystores made with keytool: ``tests/harness/kafka_tls.py``).

The service runs on its default intervals with ``security_protocol: SSL``, a CA file and a
client certificate, reading offsets through both the Admin API and ``__consumer_offsets``.
Broken TLS (a CA that did not sign the broker's certificate, no client certificate, an
expired one) is a clear reason in ``/healthz``, collectors that keep retrying, and no crash;
a broker whose certificate is rotated to a CA the monitor does not trust leaves the verdicts
held and marked stale until it is put right. JMX over TLS is not covered: the harness's
brokers expose plain JMX only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.config import parse_config
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import HealthyConsumer, ProducerLoad, librdkafka_logger
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.kafka_tls import KafkaTls, make_kafka_tls
from tests.harness.net import http, wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = [pytest.mark.kafka, pytest.mark.own_cluster, pytest.mark.slow(180)]


@pytest.fixture(scope="module")
def tls_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, KafkaTls]]:
    tls = make_kafka_tls(tmp_path_factory.mktemp("kafka-tls"))
    with LocalKafka(1, ssl=tls.broker_props) as kafka:
        yield kafka, tls


def monitor_config(kafka: LocalKafka, prefix: str, **tls: Path) -> Any:
    """The defaults but for what TLS needs (and an HTTP port of its own)."""
    return parse_config({
        "clusters": [{
            "name": "secure",
            "bootstrap_servers": kafka.ssl_bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "security_protocol": "SSL",
            "tls": {k: str(v) for k, v in tls.items()},
            "offsets_source": "both",
            "groups": {"allow": [f"^{prefix}"]},
        }],
        "http": {"host": "127.0.0.1", "port": 0},
    })


def group_status(base: str, group: str) -> dict[str, Any] | None:
    code, body = http("GET", f"{base}/v3/kafka/secure/consumer/{group}/status")
    return body["status"] if code == 200 else None


def collector_errors(base: str) -> dict[str, str]:
    collectors = http("GET", f"{base}/healthz")[1]["collectors"]
    return {name: c["last_error"] or "" for name, c in collectors.items()}


def test_monitored_over_tls_and_held_stale_while_the_brokers_certificate_is_untrusted(
    tls_kafka: tuple[LocalKafka, KafkaTls],
) -> None:
    kafka, tls = tls_kafka
    prefix = make_unique_name("tls")
    topic, group = f"{prefix}-orders", f"{prefix}-healthy"
    kafka.create_topic(topic, partitions=2)
    # The workload uses the PLAINTEXT listener; only the monitor speaks TLS.
    cfg: dict[str, Any] = {**kafka.client_config(), "logger": librdkafka_logger}
    config = monitor_config(kafka, prefix, ca_file=tls.ca, cert_file=tls.client_cert,
                            key_file=tls.client_key)
    with ProducerLoad(cfg, topic, rate=20), HealthyConsumer(cfg, topic, group), \
            ServiceThread(config) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"
        wait_for(lambda: http("GET", f"{base}/ready")[0] == 200, 90, "ready over TLS")
        # Judged on its offsets: a group known by its members alone, before its first commit
        # was read, is OK with no partitions (nothing to judge yet).
        ok = wait_for(lambda: (st := group_status(base, group)) and st["partition_count"] > 0
                      and st["status"] == "OK" and st, 120, "the group OK over TLS")
        assert ok["partition_count"] == 2 and not ok["stale"]
        assert not any(collector_errors(base).values()), collector_errors(base)

        # The broker's certificate is rotated to one of a CA the monitor does not trust.
        kafka.stop_broker(0)
        kafka.ssl_props = {k: str(v) for k, v in tls.rogue_broker_props.items()}
        kafka.start_broker(0)
        wait_for(lambda: "certificate verify failed" in
                 collector_errors(base).get("broker_offsets/secure", ""),
                 60, "the TLS reason in /healthz")
        held = wait_for(lambda: (st := group_status(base, group)) and st["stale"] and st, 120,
                        "the group's verdict held and marked stale")
        assert held["status"] == "OK"  # held: not turned into STOP by the outage of ours
        assert http("GET", f"{base}/healthz")[0] == 200

        # Put right: the verdicts are current again.
        kafka.stop_broker(0)
        kafka.ssl_props = {k: str(v) for k, v in tls.broker_props.items()}
        kafka.start_broker(0)
        back = wait_for(lambda: (st := group_status(base, group)) and not st["stale"]
                        and st["status"] == "OK" and st, 120, "the group current again")
        assert back["partition_count"] == 2


REFUSED = "client SSL authentication might be required|SSL routines::unexpected message"
"""A broker refusing the client's certificate, as OpenSSL tells it: by the alert, or (TLS 1.3,
the alert racing the client's first request) as a message it did not expect then."""


@pytest.mark.parametrize("case", ["wrong-ca", "no-client-certificate", "expired-certificate"])
def test_broken_tls_is_a_clear_error_retried_without_a_crash(
    tls_kafka: tuple[LocalKafka, KafkaTls], case: str
) -> None:
    kafka, tls = tls_kafka
    files, reason = {
        "wrong-ca": ({"ca_file": tls.other_ca, "cert_file": tls.client_cert,
                      "key_file": tls.client_key}, "certificate verify failed"),
        "no-client-certificate": ({"ca_file": tls.ca}, REFUSED),
        # The broker refuses it: the client learns only that its certificate was not taken.
        "expired-certificate": ({"ca_file": tls.ca, "cert_file": tls.expired_cert,
                                 "key_file": tls.expired_key}, REFUSED),
    }[case]
    with ServiceThread(monitor_config(kafka, make_unique_name("tls"), **files)) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"

        def retried() -> bool:
            collectors = http("GET", f"{base}/healthz")[1]["collectors"]
            return collectors["broker_offsets/secure"]["errors"] >= 2

        wait_for(retried, 60, "the broker offsets collector failing and retrying")
        errors = collector_errors(base)
        for name in ("metadata/secure", "broker_offsets/secure"):
            # librdkafka files it under _SSL or _TRANSPORT; the reason is the same.
            assert "; connection: " in errors[name], errors
            assert any(r in errors[name] for r in reason.split("|")), errors
        code, ready = http("GET", f"{base}/ready")
        assert code == 503 and "metadata/secure" in ready["waiting_for"]

"""TLS material for a Kafka broker's SSL listener, made with the JDK's keytool (CAs, the
broker's JKS keystores and truststore) and openssl (the clients' PEM keys, as librdkafka reads
them): a client certificate, one already expired, a CA that signed none of them, and a broker
keystore signed by that other CA (a certificate rotated to a CA the monitor does not trust)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.harness.tools import require

PASSWORD = "kafka-monitor-test"


@dataclass(frozen=True)
class KafkaTls:
    ca: Path  # PEM of the CA that signed the broker's and the clients' certificates
    other_ca: Path  # PEM of a CA that signed only the rogue broker keystore
    client_cert: Path
    client_key: Path
    expired_cert: Path  # a client certificate of the CA that expired yesterday
    expired_key: Path
    broker_props: dict[str, object]  # ssl.* for server.properties (client auth required)
    rogue_broker_props: dict[str, object]  # the same with the other CA's broker certificate


def make_kafka_tls(d: Path) -> KafkaTls:
    keytool, openssl = require("keytool"), require("openssl")

    def run(*args: str) -> None:
        subprocess.run(list(args), check=True, capture_output=True, cwd=d, timeout=120)

    store = ["-storepass", PASSWORD]

    def make_ca(name: str) -> list[str]:
        ca_store = ["-keystore", f"{name}.p12", "-storetype", "PKCS12", *store]
        run(keytool, "-genkeypair", "-alias", "ca", "-dname", f"CN=kafka-monitor test {name}",
            "-keyalg", "RSA", "-keysize", "2048", "-ext", "bc:c", "-validity", "3", *ca_store)
        run(keytool, "-exportcert", "-rfc", "-alias", "ca", "-file", f"{name}.pem", *ca_store)
        return ca_store

    def broker_keystore(name: str, ca: str, ca_store: list[str]) -> dict[str, object]:
        keystore = ["-keystore", f"{name}.jks", "-storetype", "JKS", *store]
        run(keytool, "-genkeypair", "-alias", "broker", "-dname", "CN=127.0.0.1", "-keyalg",
            "RSA", "-keysize", "2048", "-keypass", PASSWORD, "-validity", "3", *keystore)
        run(keytool, "-certreq", "-alias", "broker", "-file", f"{name}.csr", *keystore)
        run(keytool, "-gencert", "-alias", "ca", "-infile", f"{name}.csr", "-outfile",
            f"{name}.pem", "-rfc", "-ext", "SAN=IP:127.0.0.1", "-validity", "2", *ca_store)
        run(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", f"{ca}.pem", *keystore)
        run(keytool, "-importcert", "-alias", "broker", "-file", f"{name}.pem", *keystore)
        return {
            "ssl.keystore.location": d / f"{name}.jks", "ssl.keystore.password": PASSWORD,
            "ssl.key.password": PASSWORD,
            "ssl.truststore.location": d / "trust.jks", "ssl.truststore.password": PASSWORD,
            "ssl.client.auth": "required",
        }

    ca_store = make_ca("ca")
    other_store = make_ca("other-ca")
    # The brokers trust client certificates of the first CA only.
    run(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
        "-keystore", "trust.jks", "-storetype", "JKS", *store)
    for name, validity in (("client", ["-validity", "2"]),
                           ("expired", ["-startdate", "-3d", "-validity", "1"])):
        run(openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN=kafka-monitor-{name}")
        run(keytool, "-gencert", "-alias", "ca", "-infile", f"{name}.csr",
            "-outfile", f"{name}.pem", "-rfc", *validity, *ca_store)
    return KafkaTls(
        ca=d / "ca.pem", other_ca=d / "other-ca.pem",
        client_cert=d / "client.pem", client_key=d / "client.key",
        expired_cert=d / "expired.pem", expired_key=d / "expired.key",
        broker_props=broker_keystore("broker", "ca", ca_store),
        rogue_broker_props=broker_keystore("rogue-broker", "other-ca", other_store),
    )

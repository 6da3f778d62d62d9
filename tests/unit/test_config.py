"""Configuration: every shipped example loads, and broken files are rejected with the file, the
key path and the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import (
    ConfigError,
    effective_config,
    format_duration,
    load_config,
    parse_config,
    parse_duration,
)
from monitor.ingest.kafka_client import client_config
from tests.harness.tools import ROOT

CONFIG_DIR = ROOT / "config"
EXAMPLES = sorted(p for p in CONFIG_DIR.iterdir() if p.suffix in (".yaml", ".yml", ".toml"))
SECRET_ENV = {"KAFKA_MONITOR_SASL_PASSWORD": "example-password"}


def minimal(**cluster: object) -> dict:
    return {"clusters": [{"name": "c", "bootstrap_servers": ["h:9092"], **cluster}]}


def problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "test.yaml")
    return info.value.problems


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_loads(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in SECRET_ENV.items():
        monkeypatch.setenv(key, value)
    config = load_config(path)
    assert config.clusters
    dumped = effective_config(config)
    assert [c["name"] for c in dumped["clusters"]] == [c.name for c in config.clusters]
    if "**********" not in str(dumped):
        # Without masked secrets, the printed configuration is itself a valid configuration
        # meaning the same thing (what check-config prints can be pasted back).
        assert effective_config(parse_config(dumped)) == dumped


def test_secret_from_env_is_used_but_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_MONITOR_SASL_PASSWORD", "hunter2")
    config = load_config(CONFIG_DIR / "secure.yaml")
    cluster = config.cluster("prod-east")
    assert client_config(cluster)["sasl.password"] == "hunter2"
    assert "hunter2" not in str(effective_config(config))
    assert "hunter2" not in repr(config)


def test_secret_from_file(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    config = parse_config(
        minimal(
            security_protocol="SASL_PLAINTEXT",
            sasl={"mechanism": "PLAIN", "username": "u", "password": {"file": str(secret)}},
        )
    )
    assert client_config(config.clusters[0])["sasl.password"] == "from-file"


def test_missing_secret_names_key_and_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    found = problems(
        minimal(
            security_protocol="SASL_SSL",
            sasl={"username": "u", "password": {"env": "NOPE_NOT_SET"}},
        )
    )
    assert found == [("clusters[0].sasl.password", "environment variable NOPE_NOT_SET is not set")]


def test_unknown_key_suggests_the_right_one() -> None:
    found = problems({"clusters": [{"name": "c", "bootstrap_server": ["h:1"]}]})
    assert ("clusters[0].bootstrap_server", "unknown key (did you mean 'bootstrap_servers'?)") in (
        found
    )
    assert ("clusters[0].bootstrap_servers", "Field required") in found


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        (minimal(bootstrap_servers="justahost"), "clusters[0].bootstrap_servers", "host:port"),
        (minimal(offsets_source="zookeeper"), "clusters[0].offsets_source", "admin"),
        (minimal(groups={"deny": ["(unclosed"]}), "clusters[0].groups.deny[0]", "regular"),
        (minimal(security_protocol="SASL_SSL"), "clusters[0]", "needs a sasl section"),
        (minimal(jmx=[{"broker_id": 1, "host": "h", "port": 70000}]), "clusters[0].jmx[0].port",
         "less than or equal"),
        (minimal(client_properties={"bootstrap.servers": "x:1"}),
         "clusters[0].client_properties", "bootstrap_servers"),
        (minimal(tls={"ca_file": __file__}), "clusters[0]", "a tls section needs"),
        ({**minimal(), "collectors": {"broker_offsets_interval": "0s"}},
         "collectors.broker_offsets_interval", "greater than zero"),
        ({**minimal(), "evaluator": {"window": 1}}, "evaluator.window", "greater than or equal"),
        ({**minimal(), "mirrors": [{"name": "m", "source": "c", "destination": "x"}]}, "",
         "unknown cluster 'x'"),
        ({"clusters": []}, "clusters", "at least 1"),
        ({"clusters": [minimal()["clusters"][0]] * 2}, "", "duplicate name(s) c"),
    ],
)
def test_invalid_values_name_key_and_reason(data: dict, key: str, fragment: str) -> None:
    found = problems(data)
    assert any(k == key and fragment in reason for k, reason in found), found


def test_tls_file_must_exist() -> None:
    found = problems(minimal(security_protocol="SSL", tls={"ca_file": "/no/such/ca.pem"}))
    assert found == [("clusters[0].tls.ca_file", "file not found: /no/such/ca.pem")]


def test_durations_round_trip() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("7d") == 7 * 86400
    assert parse_duration(3) == 3.0
    for text in ("500ms", "10s", "5m", "2h", "7d", "90s"):
        assert format_duration(parse_duration(text)) == text
    for bad in ("", "10 parsecs", "-1s", True, None):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_options_that_zero_turns_off_take_zero_and_nothing_else_does() -> None:
    """``gone_stop`` and ``young_window_stop`` at 0 are Burrow's rules; an interval at 0 is a
    mistake that names its key."""
    config = parse_config({**minimal(), "evaluator": {"gone_stop": 0, "young_window_stop": "0s"}})
    assert (config.evaluator.gone_stop, config.evaluator.young_window_stop) == (0.0, 0.0)
    assert effective_config(config)["evaluator"]["gone_stop"] == "0s"
    assert problems({**minimal(), "evaluator": {"gone_stop": "-1s"}})[0][0] == "evaluator.gone_stop"
    assert problems({**minimal(), "evaluator": {"interval": 0}})[0][0] == "evaluator.interval"


def test_old_broker_fallback_reaches_librdkafka() -> None:
    conf = client_config(parse_config(minimal(broker_version_fallback="0.9.0.1")).clusters[0])
    assert conf["api.version.request"] is False
    assert conf["broker.version.fallback"] == "0.9.0.1"
    assert "api.version.request" not in client_config(parse_config(minimal()).clusters[0])


def test_operator_properties_win() -> None:
    conf = client_config(
        parse_config(minimal(client_properties={"socket.timeout.ms": 1234})).clusters[0]
    )
    assert conf["socket.timeout.ms"] == 1234


def test_name_filters() -> None:
    config = parse_config(minimal(groups={"allow": ["^app-"], "deny": ["-test$"]}))
    groups = config.clusters[0].groups
    assert groups.matches("app-orders")
    assert not groups.matches("app-orders-test")
    assert not groups.matches("other")
    assert not config.clusters[0].topics.matches("__consumer_offsets")
    assert config.clusters[0].topics.matches("orders")


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True, text=True, timeout=60, env=env,
    )


def test_check_config_cli_rejects_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "clusters:\n  - name: prod\n    bootstrap_servers: ['k1:9092']\n"
        "    offsets_source: zookeeper\ncollectors:\n  jmx_interval: soon\n"
    )
    result = run_cli("check-config", str(broken))
    assert result.returncode == 2
    assert f"{broken}: clusters[0].offsets_source: Input should be" in result.stderr
    assert f"{broken}: collectors.jmx_interval: expected a duration" in result.stderr
    assert result.stdout == ""


def test_check_config_cli_reports_yaml_syntax_position(tmp_path: Path) -> None:
    broken = tmp_path / "syntax.yaml"
    broken.write_text("clusters:\n  - name: [unclosed\n")
    result = run_cli("check-config", str(broken))
    assert result.returncode == 2
    assert "YAML syntax error: line 3" in result.stderr


def test_check_config_cli_prints_effective_config_masked(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "KAFKA_MONITOR_SASL_PASSWORD": "topsecret-value"}
    result = run_cli("check-config", str(CONFIG_DIR / "secure.yaml"), env=env)
    assert result.returncode == 0, result.stderr
    assert "topsecret-value" not in result.stdout
    assert "password: '**********'" in result.stdout
    assert "group_concurrency: 8" in result.stdout  # defaults filled in


def test_check_config_cli_missing_file(tmp_path: Path) -> None:
    result = run_cli("check-config", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2
    assert "absent.yaml: cannot read file" in result.stderr

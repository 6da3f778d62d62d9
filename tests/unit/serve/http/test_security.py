"""The HTTP API locked down: credentials from ``http.auth`` (bearer tokens, basic-auth users,
secrets from the environment), state-changing requests refused while none is configured, reads
and /metrics guarded on request, refusals counted; and the server over TLS, also mutual TLS,
with certificates made here by the openssl command line. Real sockets throughout."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.config import ConfigError, load_config, parse_config
from tests.harness.api import AUTH, TOKEN, C, Call, run
from tests.harness.certs import client_context, make_certs
from tests.harness.net import free_port
from tests.harness.service_thread import ServiceThread


def config(**http: Any) -> Any:
    return parse_config({
        "clusters": [{"name": C, "bootstrap_servers": ["127.0.0.1:1"]}],
        "http": {"host": "127.0.0.1", "port": 0, **http},
    })


def metric(text: str, reason: str) -> float:
    for line in text.splitlines():
        if line.startswith(f'kafka_monitor_http_auth_failures_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    raise AssertionError(f"no failure counter for {reason}")


def test_writes_need_a_valid_credential_and_refusals_are_counted() -> None:
    async def check(service: Any, call: Call) -> None:
        path = f"/v3/kafka/{C}/consumer/ok"
        status, body = await call("DELETE", path)
        assert status == 401 and body["error"] is True and body["message"] == "unauthorized"
        assert set(body) == {"error", "message", "request"}  # nothing else is told
        status, body = await call("DELETE", path, headers={"Authorization": "Bearer nope"})
        assert status == 401
        status, body = await call("POST", "/v3/admin/loglevel", json={"level": "DEBUG"},
                                  headers={"Authorization": f"Basic {TOKEN}"})
        assert status == 401  # no basic-auth users configured: the scheme does not apply
        assert "ok" in service.store.groups(C)  # nothing was deleted
        status, text = await call("GET", "/metrics")
        assert status == 200  # /metrics is open by default
        assert metric(text, "missing") == 1 and metric(text, "invalid") == 2
        status, body = await call("DELETE", path, headers=AUTH)
        assert status == 200 and "ok" not in service.store.groups(C)
        # Reads stay open by default, and unknown routes still say 404/405.
        assert (await call("GET", f"/v3/kafka/{C}/consumer"))[0] == 200
        assert (await call("PUT", path))[0] == 405

    run(check)


def http(url: str, method: str = "GET", headers: dict[str, str] | None = None,
         context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def test_the_challenge_names_the_configured_schemes() -> None:
    with ServiceThread(config(auth={"tokens": [TOKEN], "users": {"a": "b"}})) as s:
        status, headers, body = http(f"http://127.0.0.1:{s.service.http_port}"
                                     "/v3/admin/loglevel", "POST")
        assert status == 401 and headers["Content-Type"].startswith("application/json")
        assert headers["WWW-Authenticate"] == (
            'Bearer realm="kafka-monitor", Basic realm="kafka-monitor", charset="UTF-8"')


def test_without_credentials_writes_are_refused_not_open() -> None:
    with ServiceThread(config()) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"
        status, _, body = http(f"{base}/v3/admin/loglevel", "POST")
        assert status == 403 and json.loads(body)["message"].startswith("forbidden")
        status, _, _ = http(f"{base}/v3/kafka/{C}/consumer/x", "DELETE")
        assert status == 403
        assert http(f"{base}/v3/kafka/{C}/consumer")[0] == 200
        assert metric(http(f"{base}/metrics")[2], "refused") == 2


def test_reads_and_metrics_guarded_on_request_with_basic_auth_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KM_TEST_PASSWORD", "s3cret:with:colons")
    cfg = config(auth={"users": {"oncall": {"env": "KM_TEST_PASSWORD"}}, "reads": True,
                       "metrics": True})
    assert "s3cret" not in json.dumps(cfg.model_dump(mode="json"))  # masked when shown
    good = "Basic " + base64.b64encode(b"oncall:s3cret:with:colons").decode()
    wrong_user = "Basic " + base64.b64encode(b"nobody:s3cret:with:colons").decode()
    with ServiceThread(cfg) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"
        for path in (f"/v3/kafka/{C}/consumer", "/", "/metrics", "/ui/static/page.css"):
            status, headers, _ = http(f"{base}{path}")
            assert status == 401, path
            assert headers["WWW-Authenticate"].startswith("Basic realm=")  # a browser asks
            assert http(f"{base}{path}", headers={"Authorization": wrong_user})[0] == 401
            assert http(f"{base}{path}", headers={"Authorization": good})[0] == 200, path
        for path in ("/healthz", "/ready"):  # probes never need credentials
            assert http(f"{base}{path}")[0] in (200, 503)
        text = http(f"{base}/metrics", headers={"Authorization": good})[2]
        assert metric(text, "missing") == 4 and metric(text, "invalid") == 4


@pytest.mark.parametrize(("auth", "key"), [
    ({"reads": True}, "reads"),
    ({"metrics": True}, "metrics"),
    ({"tokens": [""]}, "tokens"),
    ({"users": {"a": ""}}, "users"),
    ({"tokens": [{"env": "KM_TEST_UNSET_VARIABLE"}]}, "KM_TEST_UNSET_VARIABLE"),
])
def test_bad_auth_config_names_the_key(auth: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        config(auth=auth)
    assert "auth" in str(exc.value) and key in str(exc.value)


# ------------------------------------------------------------------------------------ TLS


def test_tls_and_mutual_tls(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    tls = {"cert_file": str(certs["server.pem"]), "key_file": str(certs["server.key"])}
    with ServiceThread(config(tls=tls)) as s:
        url = f"https://127.0.0.1:{s.service.http_port}/healthz"
        assert http(url, context=client_context(certs["ca.pem"]))[0] == 200
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            http(url, context=ssl.create_default_context())  # not our CA: refused by client
    mutual = {**tls, "client_ca_file": str(certs["ca.pem"])}
    with ServiceThread(config(tls=mutual)) as s:
        url = f"https://127.0.0.1:{s.service.http_port}/healthz"
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            http(url, context=client_context(certs["ca.pem"]))  # no client certificate
        ok = client_context(certs["ca.pem"], certs["client.pem"], certs["client.key"])
        assert http(url, context=ok)[0] == 200


def test_tls_files_are_checked_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        config(tls={"cert_file": str(tmp_path / "nope.pem"), "key_file": str(tmp_path / "k")})


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
def test_the_healthcheck_command_reads_the_port_and_tls_from_the_config(
    tmp_path: Path, mutual: bool
) -> None:
    """``kafka-monitor healthcheck`` (the image's HEALTHCHECK) asks the configured port over
    HTTPS, presenting the server's own certificate under mutual TLS; 1 when nothing answers."""
    certs = make_certs(tmp_path)
    tls = {"cert_file": str(certs["server.pem"]), "key_file": str(certs["server.key"])}
    if mutual:
        tls["client_ca_file"] = str(certs["ca.pem"])
    port = free_port()
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump({
        "clusters": [{"name": C, "bootstrap_servers": ["127.0.0.1:1"]}],
        "http": {"host": "0.0.0.0", "port": port, "tls": tls},
    }))
    command = [sys.executable, "-m", "monitor", "healthcheck", "--config", str(path)]
    with ServiceThread(load_config(path)):
        answered = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == f"https://127.0.0.1:{port}/healthz: 200"
    down = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert down.returncode == 1
    assert down.stderr.startswith(f"https://127.0.0.1:{port}/healthz: ")

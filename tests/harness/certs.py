"""Certificates for the HTTP server's TLS tests, made with the real ``openssl``."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

from tests.harness.tools import require

__all__ = ["client_context", "make_certs"]


def make_certs(d: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""
    openssl = require("openssl")

    def run_(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=d)

    run_("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
         "-days", "2", "-subj", "/CN=kafka-monitor test CA")
    for name, san in (("server", "IP:127.0.0.1"), ("client", "DNS:oncall")):
        run_("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN={name}")
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        run_("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")
    return {p.stem + p.suffix: p for p in d.iterdir()}


def client_context(ca: Path, cert: Path | None = None, key: Path | None = None
                   ) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None and key is not None:
        context.load_cert_chain(cert, key)
    return context

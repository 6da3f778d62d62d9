"""The HTTP server's TLS context (``http.tls``), shared by the service's own server and the
front of ``kafka-monitor run``; kept apart so the front's process loads nothing else."""

from __future__ import annotations

import ssl

from monitor.config import HttpTlsConfig


def server_ssl_context(tls: HttpTlsConfig) -> ssl.SSLContext:
    """The server's TLS context (TLS 1.2 at least); with a client CA, mutual TLS."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = tls.key_password.get_secret_value() if tls.key_password is not None else None
    context.load_cert_chain(tls.cert_file, tls.key_file, password=password)
    if tls.client_ca_file is not None:
        context.load_verify_locations(cafile=tls.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context

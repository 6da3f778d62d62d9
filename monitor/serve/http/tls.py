"""The HTTP server's TLS context (``http.tls``), shared by the service's own server and the
front of ``kafka-monitor run``, and how a command on the same host reaches that server (the
image's health check, ``failover apply``); kept apart so the front's process loads nothing
else."""

from __future__ import annotations

import ssl

from monitor.config import HttpConfig, HttpTlsConfig


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


def local_client(http: HttpConfig) -> tuple[str, ssl.SSLContext | None]:
    """The base URL and TLS context for a client of this service on its own host. Over TLS the
    server's certificate is not verified (it is our own, asked by loopback); with mutual TLS
    the server's own certificate and key are presented as the client's."""
    host = "127.0.0.1" if http.host in ("0.0.0.0", "", "::") else http.host
    if http.tls is None:
        return f"http://{host}:{http.port}", None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if http.tls.client_ca_file is not None:
        password = (http.tls.key_password.get_secret_value()
                    if http.tls.key_password is not None else None)
        context.load_cert_chain(http.tls.cert_file, http.tls.key_file, password)
    return f"https://{host}:{http.port}", context

"""Who may call what: bearer tokens and basic-auth users from ``http.auth``, checked in
constant time, before any handler runs.

Three kinds of request (:func:`kind`): ``write`` (any method but GET/HEAD/OPTIONS: deleting a
group from the monitor's view, changing the log level) always needs credentials, and is refused
with 403 while none are configured, so a fresh install is never open to them; ``read`` (the v3
API, the status page) and ``metrics`` need them only with ``http.auth.reads`` /
``http.auth.metrics``; ``open`` (``/healthz``, ``/ready``) never. A wrong or missing credential
is a 401 in Burrow's JSON envelope that says no more than that, with ``WWW-Authenticate`` for
the configured schemes, and is counted by reason
(``kafka_monitor_http_auth_failures_total``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterator
from typing import Any, Literal

from aiohttp import web
from prometheus_client.core import Metric
from prometheus_client.registry import Collector as MetricsCollector

from monitor.config import HttpAuthConfig
from monitor.model import metric_catalogue as catalogue

Kind = Literal["open", "read", "metrics", "write"]
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
_OPEN_PATHS = {"/healthz", "/ready"}
_REASONS = ("missing", "invalid", "refused")
_DUMMY = b"\x00" * 32  # compared against when the user is unknown, so timing does not tell


def kind(request: web.Request) -> Kind:
    if request.method not in _SAFE_METHODS:
        return "write"
    if request.path in _OPEN_PATHS:
        return "open"
    if request.path == "/metrics":
        return "metrics"
    return "read"


def _equal_any(given: bytes, secrets: list[bytes]) -> bool:
    """Whether ``given`` equals one of ``secrets``, comparing against all of them."""
    found = False
    for secret in secrets:
        found |= hmac.compare_digest(given, secret)
    return found


class AuthGuard(MetricsCollector):
    """The configured credentials and the failure counts (a Prometheus collector)."""

    def __init__(self, config: HttpAuthConfig) -> None:
        self.config = config
        self._tokens = [t.get_secret_value().encode() for t in config.tokens]
        self._users = {u: p.get_secret_value().encode() for u, p in config.users.items()}
        self.failures = dict.fromkeys(_REASONS, 0)
        schemes = []
        if self._tokens:
            schemes.append('Bearer realm="kafka-monitor"')
        if self._users:
            schemes.append('Basic realm="kafka-monitor", charset="UTF-8"')
        self._challenge = ", ".join(schemes)

    def needs_credentials(self, request: web.Request) -> bool:
        if request.match_info.http_exception is not None:
            return False  # no such route or method: its 404/405 says nothing worth guarding
        k = kind(request)
        return k == "write" or (k == "read" and self.config.reads) or (
            k == "metrics" and self.config.metrics)

    def check(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries a configured credential."""
        if header is None:
            return False
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self._tokens:
            return _equal_any(value.encode(), self._tokens)
        if scheme.lower() == "basic" and self._users:
            try:
                user, sep, password = base64.b64decode(value, validate=True).decode().partition(
                    ":")
            except (binascii.Error, UnicodeDecodeError):
                return False
            expected = self._users.get(user)
            ok = hmac.compare_digest(password.encode(), expected or _DUMMY)
            return bool(sep) and expected is not None and ok
        return False

    def refusal(self, request: web.Request) -> tuple[int, str, dict[str, str]] | None:
        """None when the request may go on; otherwise (status, message, headers), counted."""
        if not self.needs_credentials(request):
            return None
        if not self.config.configured:
            self.failures["refused"] += 1
            return 403, "forbidden: no credentials are configured (http.auth)", {}
        header = request.headers.get("Authorization")
        if self.check(header):
            return None
        self.failures["missing" if header is None else "invalid"] += 1
        return 401, "unauthorized", {"WWW-Authenticate": self._challenge}

    def collect(self) -> Iterator[Metric]:
        family = catalogue.counter("kafka_monitor_http_auth_failures")
        for reason, n in self.failures.items():
            family.add_metric([reason], n)
        yield family


def middleware(guard: AuthGuard, reply: Any) -> Any:
    """The aiohttp middleware enforcing ``guard``; ``reply`` writes the JSON envelope."""

    @web.middleware
    async def auth(request: web.Request, handler: Any) -> web.StreamResponse:
        refused = guard.refusal(request)
        if refused is None:
            return await handler(request)
        status, message, headers = refused
        response = reply(request, {"message": message}, status=status)
        response.headers.update(headers)
        return response

    return auth

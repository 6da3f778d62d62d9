"""What every HTTP handler shares (``app`` and ``v3`` both import it): the read-only view of the
service they serve from (:class:`Served`, under ``SERVICE_KEY``), and Burrow's JSON envelope,
written in one place."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

if TYPE_CHECKING:  # types only: the HTTP front's process imports this module and no more
    from prometheus_client import CollectorRegistry

    from monitor.config import MonitorConfig
    from monitor.evaluate.history import LagHistory
    from monitor.evaluate.job import Evaluator
    from monitor.ingest.base import Collector
    from monitor.serve.http.auth import AuthGuard
    from monitor.serve.metrics.lag import LagExporter
    from monitor.store.store import Store

HOSTNAME = socket.gethostname()


class Served(Protocol):
    """What the handlers may read of the running service (``monitor.service.Service`` is
    one): the configuration, the store and the evaluation's cached results, the collectors'
    health and probe views, the lag history, and the metrics to render. Read-only: no
    handler starts, stops or schedules anything."""

    @property
    def config(self) -> MonitorConfig: ...
    @property
    def store(self) -> Store: ...
    @property
    def evaluator(self) -> Evaluator: ...
    @property
    def collectors(self) -> Sequence[Collector]: ...
    @property
    def evaluated_clusters(self) -> set[str]: ...
    @property
    def registry(self) -> CollectorRegistry: ...
    @property
    def exporter(self) -> LagExporter: ...
    @property
    def started_at(self) -> float: ...
    @property
    def history(self) -> LagHistory: ...
    @property
    def http_guard(self) -> AuthGuard: ...


SERVICE_KEY: web.AppKey[Served] = web.AppKey("service")


def envelope_body(
    path: str, message: str, fields: Iterable[tuple[str, bytes]], status: int = 200
) -> bytes:
    """Burrow's envelope: ``error``, ``message``, the payload's fields (already rendered JSON,
    e.g. a cached status), then ``request`` (its ``url`` is the request's path)."""
    parts = [b'{"error": ', b"true" if status >= 400 else b"false",
             b', "message": ', json.dumps(message).encode()]
    for key, fragment in fields:
        parts += [b', ', json.dumps(key).encode(), b": ", fragment]
    parts += [b', "request": ', json.dumps({"url": path, "host": HOSTNAME}).encode(), b"}"]
    return b"".join(parts)


def envelope(
    request: web.Request, message: str, fields: Iterable[tuple[str, bytes]], status: int = 200
) -> web.Response:
    """:func:`envelope_body` as the response to ``request``."""
    return web.Response(body=envelope_body(request.path, message, fields, status),
                        status=status, content_type="application/json")


def reply(request: web.Request, payload: dict[str, Any], status: int = 200) -> web.Response:
    """A JSON body in Burrow's envelope: ``payload["message"]`` (default OK) and its other
    fields."""
    message = str(payload.pop("message", "OK"))
    return envelope(
        request, message, ((k, json.dumps(v).encode()) for k, v in payload.items()), status
    )

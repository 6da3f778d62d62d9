"""The HTTP server: liveness, readiness and (in later layers) the Burrow v3 API.

Handlers only read what the service already holds; no request ever talks to Kafka. Every error,
including unknown paths and wrong methods, is answered as JSON in Burrow's error shape, so
clients can always parse the reply.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from monitor.serve.http.auth import middleware as auth_middleware
from monitor.serve.http.envelope import SERVICE_KEY, Served, reply
from monitor.serve.http.v3 import add_v3_routes
from monitor.serve.metrics.deflated import (
    accepts_gzip,
    deflate,
    gzip_size,
    gzip_stream,
    inflate,
)
from monitor.serve.metrics.health import cluster_health, thresholds_for
from monitor.serve.page.routes import add_page_routes

_log = logging.getLogger("monitor.http")


@web.middleware
async def json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return reply(request, {"message": exc.reason}, status=exc.status)
    except Exception:
        _log.exception("request failed", extra={"path": request.path})
        return reply(request, {"message": "internal server error"}, status=500)


async def healthz(request: web.Request) -> web.Response:
    """Liveness: answers while the service runs, even when every Kafka cluster is down (a
    monitor restarted for its cluster's outage would go blind exactly when it is needed)."""
    service = request.app[SERVICE_KEY]
    clusters = {}
    for cluster in service.config.clusters:
        meta = service.store.metadata(cluster.name)
        clusters[cluster.name] = (
            None
            if meta is None
            else {
                "brokers": len(meta.brokers),
                "topics": len(meta.topics),
                "partitions": meta.partition_count,
                "metadata_age_seconds": round(time.time() - meta.observed_at, 3),
            }
        )
    return reply(
        request,
        {
            "message": "healthy",
            "status": "ok",
            "uptime_seconds": round(time.time() - service.started_at, 3),
            "collectors": {c.name: c.health.as_dict() for c in service.collectors},
            "clusters": clusters,
        },
    )


async def ready(request: web.Request) -> web.Response:
    """Readiness: 200 once every collector has data to serve and every cluster has been
    evaluated on it, 503 (naming what is still awaited) before, so a load balancer never sends
    traffic to an empty monitor and no first answer is a premature verdict."""
    service = request.app[SERVICE_KEY]
    waiting = sorted(c.name for c in service.collectors if not c.ready)
    waiting += [
        f"evaluator/{c.name}"
        for c in service.config.clusters
        if c.name not in service.evaluated_clusters
    ]
    if waiting:
        return reply(request, {"message": "not ready", "waiting_for": waiting}, status=503)
    return reply(request, {"message": "ready", "waiting_for": []})


async def metrics(request: web.Request) -> web.StreamResponse:
    """Prometheus exposition: the registry's small families, then the exporter's big ones as
    text rendered after the evaluation round (see :mod:`..metrics.lag`; no family in both),
    kept compressed and written piece by piece: as they are, in one gzip stream, to a client
    that accepts gzip (Prometheus always does), else inflated one at a time. Registry first:
    collecting it brings the exporter's text up to date if it is not yet."""
    service = request.app[SERVICE_KEY]
    head = generate_latest(service.registry)
    chunks = service.exporter.chunks()
    response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE_LATEST,
                                           "Vary": "Accept-Encoding"})
    if accepts_gzip(request.headers.get("Accept-Encoding", "")):
        pieces = (deflate(head), *chunks)
        response.headers["Content-Encoding"] = "gzip"
        response.content_length = gzip_size(pieces)
        await response.prepare(request)
        for part in gzip_stream(pieces):
            await response.write(part)
    else:
        response.content_length = len(head) + sum(c.size for c in chunks)
        await response.prepare(request)
        await response.write(head)
        for chunk in chunks:
            await response.write(inflate(chunk))
    await response.write_eof()
    return response


async def cluster_health_view(request: web.Request) -> web.Response:
    """Our extension to the v3 API: broker and cluster health (status, reasons, metadata
    diagnosis, per-broker JMX) of one cluster."""
    service = request.app[SERVICE_KEY]
    name = request.match_info["cluster"]
    if name not in {c.name for c in service.config.clusters}:
        return reply(request, {"message": "cluster not found"}, status=404)
    health = cluster_health(service.store, name, thresholds_for(service.config))
    return reply(request, {"message": "cluster health returned", "health": health.as_dict()})


def build_app(service: Served) -> web.Application:
    app = web.Application(
        middlewares=[json_errors, auth_middleware(service.http_guard, reply)],
        client_max_size=64 * 1024,
    )
    app[SERVICE_KEY] = service
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/ready", ready)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v3/kafka/{cluster}/health", cluster_health_view)
    add_v3_routes(app)
    add_page_routes(app)
    return app

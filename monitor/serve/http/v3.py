"""Burrow's v3 HTTP API, served from the evaluation job's cached results.

Same paths, field names and types as Burrow (``burrow-reference.md``), so its clients and
dashboards work unchanged; additive fields carry what Burrow lacks (lag in seconds, group
state, members, staleness). No handler talks to Kafka or evaluates: they read the latest
:class:`~monitor.evaluate.job.ClusterEvaluation`, and a group's status body is rendered once
per evaluation round and reused (``ClusterEvaluation.views``).

Names in paths are checked before use: longer than Kafka allows (249 characters, group ids
are capped at 255 here), or with control characters, is a JSON 400; unknown clusters, topics
and groups are Burrow-shaped 404s.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from importlib import resources
from typing import Any

import yaml
from aiohttp import web

from monitor.config import effective_config
from monitor.evaluate.job import ClusterEvaluation
from monitor.ingest.canary.probe import CanaryProbe
from monitor.ingest.failover.collector import FailoverCollector
from monitor.ingest.mirror import MirrorCollector
from monitor.model.observations import ClusterMetadata, OffsetsDeleted
from monitor.model.status_json import notfound_json, status_json
from monitor.serve.http.envelope import SERVICE_KEY, Served, envelope, envelope_body, reply
from monitor.serve.probe_views import mirror_view
from monitor.serve.reply_table import TableWriter

_MAX_NAME = 255
_BAD_NAME = re.compile(r"[\x00-\x1f\x7f]")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _name(request: web.Request, key: str) -> str:
    value = request.match_info[key]
    if not value or len(value) > _MAX_NAME or _BAD_NAME.search(value):
        raise web.HTTPBadRequest(reason=f"invalid {key} name")
    return value


def _cluster(request: web.Request) -> tuple[Served, str]:
    service = request.app[SERVICE_KEY]
    name = _name(request, "cluster")
    if name not in {c.name for c in service.config.clusters}:
        raise web.HTTPNotFound(reason="cluster not found")
    return service, name


def _result(service: Served, cluster: str) -> ClusterEvaluation | None:
    return service.evaluator.result(cluster)


def _envelope(request: web.Request, message: str, key: str, fragment: bytes,
              status: int = 200) -> web.Response:
    """Burrow's envelope around an already-rendered payload (the cached part)."""
    return envelope(request, message, ((key, fragment),), status)


# ----------------------------------------------------------------------------- handlers


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document (``openapi.yaml`` beside it), loaded once."""
    text = resources.files(__package__).joinpath("openapi.yaml").read_text(encoding="utf-8")
    document: dict[str, Any] = yaml.safe_load(text)
    return document


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def burrow_admin(request: web.Request) -> web.Response:
    return web.Response(text="GOOD")


async def clusters(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    names = [c.name for c in service.config.clusters]
    return reply(request, {"message": "cluster list returned", "clusters": names})


async def cluster_detail(request: web.Request) -> web.Response:
    service, name = _cluster(request)
    cfg = next(c for c in service.config.clusters if c.name == name)
    module = {
        "class-name": "kafka",
        "servers": cfg.bootstrap_servers,
        "client-profile": {
            "name": name,
            "client-id": f"kafka-monitor-{name}",
            "kafka-version": cfg.broker_version_fallback or "auto",
            "tls": cfg.tls is not None,
            "sasl": cfg.sasl is not None,
        },
        "topic-refresh": int(service.config.collectors.metadata_interval),
        "offset-refresh": int(service.config.collectors.broker_offsets_interval),
        "offsets-source": cfg.offsets_source,
    }
    return reply(request, {"message": "cluster module detail returned", "module": module})


async def topics(request: web.Request) -> web.Response:
    service, name = _cluster(request)
    meta = service.store.metadata(name)
    names = sorted(meta.topics) if meta is not None else []
    return reply(request, {"message": "topic list returned", "topics": names})


def _topic(request: web.Request) -> tuple[Served, str, str, ClusterMetadata]:
    """The cluster and a topic its metadata lists, or a 404."""
    service, name = _cluster(request)
    topic = _name(request, "topic")
    meta = service.store.metadata(name)
    if meta is None or topic not in meta.topics:
        raise web.HTTPNotFound(reason="topic not found")
    return service, name, topic, meta


async def topic_detail(request: web.Request) -> web.Response:
    service, name, topic, meta = _topic(request)
    offsets = service.store.broker_offsets(name)
    ends = [
        offsets[(topic, p.partition)].log_end if (topic, p.partition) in offsets else -1
        for p in sorted(meta.topics[topic], key=lambda p: p.partition)
    ]
    return reply(request, {"message": "topic offsets returned", "offsets": ends})


async def topic_consumers(request: web.Request) -> web.Response:
    service, name, topic, _meta = _topic(request)
    result = _result(service, name)
    groups: list[str] = []
    if result is not None and result.data is not None:
        d = result.data
        if topic in d.topic_names:
            tid = d.topic_names.index(topic)
            gids = sorted(set(d.group_ids[d.topic_ids == tid].tolist()))
            groups = [d.group_names[g] for g in gids if d.group_names[g] in result]
    return reply(request, {"message": "consumers of topic returned", "consumers": groups})


async def consumers(request: web.Request) -> web.Response:
    service, name = _cluster(request)
    result = _result(service, name)
    groups = result.group_names() if result is not None else service.store.groups(name)
    return reply(request, {"message": "consumer list returned", "consumers": groups})


async def consumer_detail(request: web.Request) -> web.Response:
    service, name = _cluster(request)
    group = _name(request, "group")
    windows = service.store.group_windows(name, group)
    if windows is None:
        raise web.HTTPNotFound(reason="consumer group not found")
    result = _result(service, name)
    status = result.group(group) if result is not None else None
    by_tp = {(p.topic, p.partition): p for p in status.partitions} if status else {}
    out: dict[str, list[dict[str, Any] | None]] = {}
    for (topic, partition), entries in sorted(windows.items()):
        slots = out.setdefault(topic, [])
        slots.extend([None] * (partition + 1 - len(slots)))
        p = by_tp.get((topic, partition))
        slots[partition] = {
            "offsets": entries,
            "owner": p.owner if p else "",
            "client_id": p.client_id if p else "",
            "current-lag": p.current_lag if p else 0,
        }
    return reply(request, {"message": "consumer detail returned", "topics": out})


async def consumer_status(request: web.Request) -> web.Response:
    return _status(request, only_non_ok=True)


async def consumer_lag(request: web.Request) -> web.Response:
    return _status(request, only_non_ok=False)


def _status(request: web.Request, only_non_ok: bool) -> web.Response:
    service = request.app[SERVICE_KEY]
    result = _result(service, request.match_info["cluster"])
    # Hot path: the whole reply of this round, by path (the envelope's url is the path).
    path = request.path
    if result is not None:
        cached = result.views.get(("reply", path))
        if cached is not None:
            if path not in result.asked:  # rendered before it was served: asked now
                result.asked[path] = (request.match_info["group"], only_non_ok)
            return web.Response(body=cached, content_type="application/json")
    name = _name(request, "cluster")
    group = _name(request, "group")
    body = status_reply(result, path, group, only_non_ok) if result is not None else None
    if body is None:
        body = json.dumps(notfound_json(name, group)).encode()
        return _envelope(request, "consumer group not found", "status", body, status=404)
    return web.Response(body=body, content_type="application/json")


def render_status_reply(result: ClusterEvaluation, path: str, group: str,
                        only_non_ok: bool) -> bytes | None:
    """The whole ``/status`` (``only_non_ok``) or ``/lag`` reply for ``path`` (None: the
    round does not know the group), not kept."""
    g = result.built(group)
    if g is None:
        return None
    fragment = json.dumps(status_json(g, only_non_ok)).encode()
    return envelope_body(path, "consumer status returned", (("status", fragment),))


def status_reply(result: ClusterEvaluation, path: str, group: str,
                 only_non_ok: bool, asked: bool = True) -> bytes | None:
    """:func:`render_status_reply`, rendered once per round and kept in the round's views.
    A path ``asked`` by a client is remembered, so that the next round has it ready
    (:func:`prepare_status_replies`); one nobody asks again is not prepared again."""
    body = render_status_reply(result, path, group, only_non_ok)
    if body is None:
        return None
    result.views[("reply", path)] = body
    if asked:
        result.asked[path] = (group, only_non_ok)
    return body


def prepare_status_replies(new: ClusterEvaluation, old: ClusterEvaluation | None,
                           budget: float, table: TableWriter | None = None,
                           every_group: bool = False) -> int:
    """Render in the evaluation thread, before ``new`` is served, the ``/status`` and
    ``/lag`` replies that were asked of ``old`` (pollers ask for the same groups every
    round), so that requests find them ready instead of building them on the event loop,
    where every other request would wait. Kept in ``new``'s views, or, behind the HTTP front,
    written to the round's reply ``table`` (the front answers from it; this process keeps no
    copy), with ``every_group`` then every group's ``/status`` too. At most ``budget``
    seconds; the rest are rendered when asked. Returns how many were rendered."""
    deadline = time.monotonic() + budget
    done = 0
    wanted = list(old.asked.items()) if old is not None else []
    if table is not None and every_group:
        prefix = f"/v3/kafka/{new.cluster}/consumer/"
        wanted += [(f"{prefix}{group}/status", (group, True))
                   for group in new.group_names() if _routable(group)]
    for path, (group, only_non_ok) in wanted:
        if time.monotonic() > deadline:
            break
        if table is None:
            body = status_reply(new, path, group, only_non_ok, asked=False)
        elif path in table:
            continue
        else:
            body = render_status_reply(new, path, group, only_non_ok)
            if body is not None:
                table.add(path, body)
        done += body is not None
    return done


def _routable(group: str) -> bool:
    """Whether a request can name the group in one path segment (as the routes match it)."""
    return "/" not in group and len(group) <= _MAX_NAME and not _BAD_NAME.search(group)


async def delete_consumer(request: web.Request) -> web.Response:
    service, name = _cluster(request)
    group = _name(request, "group")
    if name not in service.store.clusters() or group not in service.store.groups(name):
        raise web.HTTPNotFound(reason="consumer group not found")
    service.store.remove_group(name, group)
    result = _result(service, name)
    if result is not None:
        result.forget(group)
    return reply(request, {"message": "consumer group removed"})


async def delete_consumer_topic(request: web.Request) -> web.Response:
    service, name = _cluster(request)
    group = _name(request, "group")
    topic = _name(request, "topic")
    snapshot = service.store.group(name, group)
    if snapshot is None:
        raise web.HTTPNotFound(reason="consumer group not found")
    parts = [p for (t, p) in snapshot.commits if t == topic]
    if not parts:
        raise web.HTTPNotFound(reason="topic not found for consumer group")
    for p in parts:
        service.store.put_offsets_deleted(OffsetsDeleted(name, group, topic, p, 0.0))
    result = _result(service, name)
    if result is not None:
        result.forget(group, topic)
    return reply(request, {"message": "consumer group topic removed"})


async def config_general(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    data = effective_config(service.config)
    general = {k: v for k, v in data.items() if k != "clusters"}
    return reply(request, {"message": "general config returned", "general": general})


async def config_clusters(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    names = [c.name for c in service.config.clusters]
    return reply(request, {"message": "cluster config list returned", "cluster": names})


async def config_cluster(request: web.Request) -> web.Response:
    service, name = _cluster(request)
    data = effective_config(service.config)
    module = next(c for c in data["clusters"] if c["name"] == name)
    return reply(request, {"message": "cluster config returned", "module": module})


async def config_evaluator(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    module = service.config.evaluator.model_dump(mode="json")
    return reply(request, {"message": "evaluator config returned", "module": module})


async def loglevel_get(request: web.Request) -> web.Response:
    level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
    return reply(request, {"message": "log level returned", "level": level})


async def loglevel_set(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise web.HTTPBadRequest(reason="body must be JSON: {\"level\": \"DEBUG\"}") from exc
    level = body.get("level") if isinstance(body, dict) else None
    if not isinstance(level, str) or level.upper() not in _LEVELS:
        raise web.HTTPBadRequest(reason=f"level must be one of {', '.join(_LEVELS)}")
    logging.getLogger().setLevel(level.upper())
    return reply(request, {"message": "log level set", "level": level.upper()})


async def canary(request: web.Request) -> web.Response:
    """Our extension: the cluster's canary probe, as its last round rendered it."""
    service, name = _cluster(request)
    probe = next(
        (c for c in service.collectors if isinstance(c, CanaryProbe) and c.kind == "canary"
         and c.cluster == name),
        None,
    )
    if probe is None:
        raise web.HTTPNotFound(reason="canary not enabled")
    return reply(request, {"message": "canary returned", "canary": probe.snapshot()})


async def mirror(request: web.Request) -> web.Response:
    """Our extension: a mirror's lag, group status, window counts and canary."""
    service = request.app[SERVICE_KEY]
    name = _name(request, "mirror")
    found = next(
        (c for c in service.collectors if isinstance(c, MirrorCollector) and c.cluster == name),
        None,
    )
    if found is None:
        raise web.HTTPNotFound(reason="mirror not found")
    return reply(request, {"message": "mirror returned",
                           "mirror": mirror_view(found, service.evaluator)})


def _failover(request: web.Request) -> FailoverCollector:
    service = request.app[SERVICE_KEY]
    name = _name(request, "mirror")
    if name not in {m.name for m in service.config.mirrors}:
        raise web.HTTPNotFound(reason="mirror not found")
    found = next((c for c in service.collectors
                  if isinstance(c, FailoverCollector) and c.cluster == name), None)
    if found is None:
        raise web.HTTPNotFound(reason="failover not enabled for this mirror")
    return found


async def failover(request: web.Request) -> web.Response:
    """Our extension: every source group's failover plan (:mod:`monitor.model.failover`)."""
    found = _failover(request)
    return reply(request, {"message": "failover plans returned", "failover": found.snapshot()})


async def failover_group(request: web.Request) -> web.Response:
    """Our extension: one group's failover plan, as ``kafka-monitor failover apply`` reads it."""
    found = _failover(request)
    group = _name(request, "group")
    plan = found.plan(group)
    if plan is None:
        raise web.HTTPNotFound(reason="no failover plan for this group (it commits no offsets "
                               "on the mirror's topics at the source, or not yet)")
    return reply(request, {"message": "failover plan returned",
                           "plan": plan.as_dict(time.time())})


def add_v3_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/burrow/admin", burrow_admin)
    r.add_get("/v3/openapi.json", openapi)
    r.add_get("/v3/kafka", clusters)
    r.add_get("/v3/kafka/{cluster}", cluster_detail)
    r.add_get("/v3/kafka/{cluster}/topic", topics)
    r.add_get("/v3/kafka/{cluster}/topic/{topic}", topic_detail)
    r.add_get("/v3/kafka/{cluster}/topic/{topic}/consumers", topic_consumers)
    r.add_get("/v3/kafka/{cluster}/consumer", consumers)
    r.add_get("/v3/kafka/{cluster}/consumer/{group}", consumer_detail)
    r.add_delete("/v3/kafka/{cluster}/consumer/{group}", delete_consumer)
    r.add_get("/v3/kafka/{cluster}/consumer/{group}/status", consumer_status)
    r.add_get("/v3/kafka/{cluster}/consumer/{group}/lag", consumer_lag)
    r.add_delete("/v3/kafka/{cluster}/consumer/{group}/topic/{topic}", delete_consumer_topic)
    r.add_get("/v3/config", config_general)
    r.add_get("/v3/config/cluster", config_clusters)
    r.add_get("/v3/config/cluster/{cluster}", config_cluster)
    r.add_get("/v3/config/evaluator", config_evaluator)
    r.add_get("/v3/admin/loglevel", loglevel_get)
    r.add_post("/v3/admin/loglevel", loglevel_set)
    r.add_get("/v3/kafka/{cluster}/canary", canary)
    r.add_get("/v3/mirror/{mirror}", mirror)
    r.add_get("/v3/mirror/{mirror}/failover", failover)
    r.add_get("/v3/mirror/{mirror}/failover/{group}", failover_group)

"""The status page's routes: ``/`` (and ``/ui``) the overview, ``/ui/group/<cluster>/<group>``,
``/ui/canary``, ``/ui/mirror/<name>`` and the page's own script and style under
``/ui/static/``. Server-rendered with Jinja2 (autoescaped: group names are anyone's text) from
:mod:`.views`; rendering runs off the event loop so the API is not held up behind a page."""

from __future__ import annotations

import asyncio
import functools
import time
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2
from aiohttp import web

from monitor.ingest.canary.probe import CanaryProbe
from monitor.ingest.mirror import MirrorCollector
from monitor.serve.http.envelope import SERVICE_KEY, Served
from monitor.serve.page import views

_STATIC_TYPES = {"page.css": "text/css", "page.js": "text/javascript"}
_HEADERS = {
    # Everything the page loads is its own: no CDN, no inline script.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_MAX_NAME = 512


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("monitor.serve.page", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["urlpart"] = lambda s: quote(str(s), safe="")
    return env


@functools.cache
def _static(name: str) -> bytes:
    return (resources.files("monitor.serve.page") / "static" / name).read_bytes()


def _nav(service: Served) -> dict[str, Any]:
    return {
        "has_canary": any(isinstance(c, CanaryProbe) for c in service.collectors),
        "mirrors": sorted(c.cluster for c in service.collectors
                          if isinstance(c, MirrorCollector)),
    }


def render(service: Served, template: str, context: dict[str, Any]) -> str:
    refresh = max(5.0, min(60.0, service.config.evaluator.interval))
    stamp = datetime.fromtimestamp(time.time(), UTC).strftime("%H:%M:%S UTC")
    return environment().get_template(template).render(
        nav=_nav(service), refresh=f"{refresh:g}", generated=stamp, **context
    )


def _html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                        headers=_HEADERS)


def _not_found(service: Served, what: str) -> web.Response:
    body = render(service, "missing.html", {"title": "Not found", "what": what})
    return _html(body, status=404)


def _part(request: web.Request, key: str) -> str:
    value = request.match_info[key]
    if not value or len(value) > _MAX_NAME or any(ord(ch) < 32 for ch in value):
        raise web.HTTPBadRequest(reason=f"invalid {key} name")
    return value


async def overview(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    query = request.query.get("q", "")[:_MAX_NAME]

    def page() -> str:
        return render(service, "overview.html", views.overview(service, query))

    return _html(await asyncio.to_thread(page))


async def group(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    cluster, name = _part(request, "cluster"), _part(request, "group")

    def page() -> web.Response:
        context = views.group_page(service, cluster, name)
        if context is None:
            return _not_found(service, f"consumer group {name!r} on cluster {cluster!r}")
        return _html(render(service, "group.html", context))

    return await asyncio.to_thread(page)


async def canary(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    return _html(await asyncio.to_thread(
        lambda: render(service, "canary.html", views.canary_page(service))))


async def mirror(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    name = _part(request, "mirror")
    context = views.mirror_page(service, name)
    if context is None:
        return _not_found(service, f"mirror {name!r}")
    return _html(render(service, "mirror.html", context))


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    kind = _STATIC_TYPES.get(name)
    if kind is None:
        raise web.HTTPNotFound(reason="no such file")
    return web.Response(body=_static(name), content_type=kind,
                        headers={"Cache-Control": "max-age=300",
                                 "X-Content-Type-Options": "nosniff"})


def add_page_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/", overview)
    r.add_get("/ui", overview)
    r.add_get("/ui/", overview)
    r.add_get("/ui/group/{cluster}/{group}", group)
    r.add_get("/ui/canary", canary)
    r.add_get("/ui/mirror/{mirror}", mirror)
    r.add_get("/ui/static/{name}", static)

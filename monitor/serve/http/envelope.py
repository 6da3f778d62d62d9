"""What every HTTP handler shares (``httpserver`` and the v3 ``api`` both import it, neither
imports the other's internals): the application key the service is stored under, and Burrow's
JSON envelope, written in one place."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from monitor.service import Service

HOSTNAME = socket.gethostname()
SERVICE_KEY: web.AppKey[Service] = web.AppKey("service")


def envelope(
    request: web.Request, message: str, fields: Iterable[tuple[str, bytes]], status: int = 200
) -> web.Response:
    """Burrow's envelope: ``error``, ``message``, the payload's fields (already rendered JSON,
    e.g. a cached status), then ``request``."""
    parts = [b'{"error": ', b"true" if status >= 400 else b"false",
             b', "message": ', json.dumps(message).encode()]
    for key, fragment in fields:
        parts += [b', ', json.dumps(key).encode(), b": ", fragment]
    parts += [b', "request": ', json.dumps({"url": request.path, "host": HOSTNAME}).encode(),
              b"}"]
    return web.Response(body=b"".join(parts), status=status, content_type="application/json")


def reply(request: web.Request, payload: dict[str, Any], status: int = 200) -> web.Response:
    """A JSON body in Burrow's envelope: ``payload["message"]`` (default OK) and its other
    fields."""
    message = str(payload.pop("message", "OK"))
    return envelope(
        request, message, ((k, json.dumps(v).encode()) for k, v in payload.items()), status
    )

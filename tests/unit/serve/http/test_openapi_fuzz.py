"""Fuzz the HTTP API from its own OpenAPI document (schemathesis): over a real socket, every
generated request (odd names, huge names, percent-encoding, wrong bodies) must get an answer
that the document describes — never a 5xx, never a non-JSON error. Run with the bearer token
the document's security schemes describe, and once without credentials."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from monitor.serve.http.app import build_app
from monitor.serve.http.v3 import openapi_document
from tests.harness.api import AUTH, TOPIC, C, make_service


def narrowed(document: dict[str, Any]) -> dict[str, Any]:
    """The same document with the cluster pinned to the served one and known group and topic
    names mixed into the strings, so generated requests also reach the code past the
    "unknown cluster" 404s."""
    doc = copy.deepcopy(document)
    params = doc["components"]["parameters"]
    params["cluster"]["schema"] = {"type": "string", "enum": [C]}
    known = {"group": ["ok", "gone"], "topic": [TOPIC]}
    for name, values in known.items():
        params[name]["schema"] = {"anyOf": [{"type": "string", "enum": values}, {"type": "string"}]}
    return doc


schema = schemathesis.openapi.from_dict(openapi_document())
schema_known = schemathesis.openapi.from_dict(narrowed(openapi_document()))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SESSION = requests.Session()


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The real app on a loopback port, in its own thread and event loop."""
    service = make_service()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        runner = web.AppRunner(build_app(service), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    assert started.wait(10)
    yield f"http://127.0.0.1:{holder['port']}"
    runner = holder["runner"]
    assert isinstance(runner, web.AppRunner)
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@schema.parametrize()
@SETTINGS
def test_api_answers_as_documented(case: schemathesis.Case, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, session=SESSION, checks=CHECKS, headers=AUTH)


@schema_known.parametrize()
@SETTINGS
def test_api_answers_as_documented_for_the_known_cluster(
    case: schemathesis.Case, base_url: str
) -> None:
    case.call_and_validate(base_url=base_url, session=SESSION, checks=CHECKS, headers=AUTH)


@schema.parametrize()
@SETTINGS
def test_api_answers_as_documented_without_credentials(
    case: schemathesis.Case, base_url: str
) -> None:
    """The same requests with no credentials: state-changing ones get the documented 401."""
    case.call_and_validate(base_url=base_url, session=SESSION, checks=CHECKS,
                           headers={"Authorization": ""})

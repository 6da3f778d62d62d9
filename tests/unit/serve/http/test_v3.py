"""Burrow's v3 API over real HTTP (aiohttp server on a loopback socket), on a service whose
store is fed with observations (no Kafka; the end-to-end tests use the real broker)."""

from __future__ import annotations

import errno
import functools
import json
import logging
from pathlib import Path

import pytest

from monitor.serve import reply_table
from monitor.serve.front import TABLE as FRONT_TABLE
from monitor.serve.http.v3 import prepare_status_replies
from monitor.serve.reply_table import ReplyTable, TableWriter
from monitor.service import Service
from tests.harness.api import AUTH, T0, TOPIC, C, Call, make_service, run


def test_status_of_ok_and_stopped_groups_in_burrow_shape() -> None:
    async def check(service: Service, call: Call) -> None:
        status, body = await call("GET", f"/v3/kafka/{C}/consumer/gone/status")
        assert status == 200 and body["error"] is False
        assert body["message"] == "consumer status returned"
        s = body["status"]
        assert (s["cluster"], s["group"], s["status"]) == (C, "gone", "STOP")
        assert s["partition_count"] == 2 and len(s["partitions"]) == 2
        p = s["partitions"][0]
        assert set(p) >= {"topic", "partition", "owner", "client_id", "status", "start", "end",
                          "current_lag", "complete"}
        assert p["status"] == "STOP" and p["current_lag"] == 500
        assert p["end"] == {"offset": 500, "timestamp": int((T0 + 5) * 1000),
                            "observedAt": int((T0 + 5) * 1000), "lag": 0}
        assert s["totallag"] == 1000 and s["maxlag"]["current_lag"] == 500
        assert s["lag_seconds"] > 0
        assert body["request"]["url"] == f"/v3/kafka/{C}/consumer/gone/status"

        status, body = await call("GET", f"/v3/kafka/{C}/consumer/ok/status")
        assert status == 200
        s = body["status"]
        assert s["status"] == "OK" and s["partitions"] == [] and s["partition_count"] == 2
        assert s["state"] == "Stable" and s["members"] == 1 and s["generation"] == 3
        assert s["member_list"] == [
            {"member_id": "m1", "client_id": "app-1", "host": "/10.1.1.1",
             "partitions": [{"topic": TOPIC, "partition": 0}, {"topic": TOPIC, "partition": 1}]}
        ]
        status, body = await call("GET", f"/v3/kafka/{C}/consumer/ok/lag")
        parts = body["status"]["partitions"]
        assert [p["owner"] for p in parts] == ["/10.1.1.1"] * 2
        assert [p["client_id"] for p in parts] == ["app-1"] * 2

    run(check)


def test_unknown_group_and_cluster_are_notfound_404() -> None:
    async def check(service: Service, call: Call) -> None:
        for path in (f"/v3/kafka/{C}/consumer/nope/status", "/v3/kafka/nope/consumer/ok/lag"):
            status, body = await call("GET", path)
            assert status == 404 and body["error"] is True
            s = body["status"]
            assert s["status"] == "NOTFOUND" and s["complete"] == 1.0
            assert (s["partitions"], s["partition_count"], s["maxlag"], s["totallag"]) == (
                [], 0, None, 0
            )
        for path in ("/v3/kafka/nope", f"/v3/kafka/{C}/topic/nope", f"/v3/kafka/{C}/consumer/x"):
            status, body = await call("GET", path)
            assert status == 404 and body["error"] is True and body["message"]

    run(check)


def test_lists_topics_and_consumer_detail() -> None:
    async def check(service: Service, call: Call) -> None:
        assert (await call("GET", "/v3/kafka"))[1]["clusters"] == [C]
        status, body = await call("GET", f"/v3/kafka/{C}")
        assert status == 200 and body["module"]["servers"] == ["127.0.0.1:1"]
        assert (await call("GET", f"/v3/kafka/{C}/topic"))[1]["topics"] == [TOPIC]
        assert (await call("GET", f"/v3/kafka/{C}/topic/{TOPIC}"))[1]["offsets"] == [1000, 1000]
        consumers = (await call("GET", f"/v3/kafka/{C}/topic/{TOPIC}/consumers"))[1]
        assert consumers["consumers"] == ["gone", "ok"]
        assert (await call("GET", f"/v3/kafka/{C}/consumer"))[1]["consumers"] == ["gone", "ok"]
        status, body = await call("GET", f"/v3/kafka/{C}/consumer/ok")
        assert status == 200
        slots = body["topics"][TOPIC]
        assert len(slots) == 2
        assert len(slots[0]["offsets"]) == 5  # the window
        assert slots[0]["offsets"][-1]["offset"] == 1000
        assert slots[0]["owner"] == "/10.1.1.1" and slots[0]["current-lag"] == 0
        status, text = await call("GET", "/burrow/admin")
        assert (status, text) == (200, "GOOD")

    run(check)


def test_delete_group_and_group_topic() -> None:
    async def check(service: Service, call: Call) -> None:
        status, body = await call("DELETE", f"/v3/kafka/{C}/consumer/gone/topic/{TOPIC}",
                                  headers=AUTH)
        assert status == 200, body
        status, body = await call("GET", f"/v3/kafka/{C}/consumer/gone/lag")
        assert status == 200 and body["status"]["partition_count"] == 0
        assert body["status"]["status"] == "OK"
        status, body = await call("DELETE", f"/v3/kafka/{C}/consumer/ok", headers=AUTH)
        assert status == 200
        status, body = await call("GET", f"/v3/kafka/{C}/consumer/ok/status")
        assert status == 404 and body["status"]["status"] == "NOTFOUND"
        assert "ok" not in service.store.groups(C)
        status, body = await call("DELETE", f"/v3/kafka/{C}/consumer/ok", headers=AUTH)
        assert status == 404 and body["error"] is True

    run(check)


def test_config_and_loglevel() -> None:
    async def check(service: Service, call: Call) -> None:
        status, body = await call("GET", "/v3/config")
        assert status == 200 and "evaluator" in body["general"]
        assert (await call("GET", "/v3/config/cluster"))[1]["cluster"] == [C]
        status, body = await call("GET", f"/v3/config/cluster/{C}")
        assert body["module"]["name"] == C
        status, body = await call("GET", "/v3/config/evaluator")
        assert body["module"]["window"] == 5
        status, body = await call("POST", "/v3/admin/loglevel", json={"level": "debug"},
                                  headers=AUTH)
        assert status == 200 and body["level"] == "DEBUG"
        assert (await call("GET", "/v3/admin/loglevel"))[1]["level"] == "DEBUG"
        status, body = await call("POST", "/v3/admin/loglevel", json={"level": "LOUD"},
                                  headers=AUTH)
        assert status == 400 and body["error"] is True
        status, body = await call("POST", "/v3/admin/loglevel", data=b"\xff{", headers=AUTH)
        assert status == 400 and body["error"] is True
        await call("POST", "/v3/admin/loglevel", json={"level": "INFO"}, headers=AUTH)

    run(check)


def test_bad_requests_are_json_4xx() -> None:
    async def check(service: Service, call: Call) -> None:
        cases = [
            ("GET", f"/v3/kafka/{C}/consumer/{'g' * 300}/status", 400),
            ("GET", f"/v3/kafka/{C}/consumer/%00%01/status", 400),
            ("GET", f"/v3/kafka/{C}/consumer/%ff%fe/status", 404),
            ("GET", f"/v3/kafka/{C}/nothing-here", 404),
            ("PUT", f"/v3/kafka/{C}/consumer/ok/status", 405),
            ("POST", "/v3/kafka", 405),
            ("GET", "/v3/kafka/%2e%2e/consumer", 404),
        ]
        for method, path, want in cases:
            status, body = await call(method, path)
            assert status == want, (method, path, status, body)
            assert isinstance(body, dict) and body["error"] is True, (path, body)

    run(check)


def test_status_body_is_rendered_once_per_round() -> None:
    async def check(service: Service, call: Call) -> None:
        result = service.evaluator.result(C)
        assert result is not None
        await call("GET", f"/v3/kafka/{C}/consumer/gone/status")
        cached = result.views[("reply", f"/v3/kafka/{C}/consumer/gone/status")]
        await call("GET", f"/v3/kafka/{C}/consumer/gone/status")
        assert result.views[("reply", f"/v3/kafka/{C}/consumer/gone/status")] is cached
        service.evaluator.run_once(T0 + 11)  # a new round: a new cache
        new = service.evaluator.result(C)
        assert new is not result
        # What was asked of the last round is rendered before this one is served (pollers
        # ask again), and nothing else.
        path = f"/v3/kafka/{C}/consumer/gone/status"
        assert set(new.views) == {("reply", path)} and new.views[("reply", path)] is not cached
        status, body = await call("GET", path)
        assert status == 200 and body["status"]["status"] == "STOP"
        assert body["status"]["partitions"][0]["end"]["offset"] == 500
        assert json.loads(new.views[("reply", path)]) == body
        # Asked again of this round: prepared for the next; a round nobody asks is the last.
        service.evaluator.run_once(T0 + 11)
        assert set(service.evaluator.result(C).views) == {("reply", path)}  # type: ignore[union-attr]
        service.evaluator.run_once(T0 + 11)
        assert not service.evaluator.result(C).views  # type: ignore[union-attr]
        await call("GET", path)
        service.evaluator.before_publish = None  # without it: built when asked, the same
        service.evaluator.run_once(T0 + 11)
        assert not service.evaluator.result(C).views  # type: ignore[union-attr]
        assert await call("GET", path) == (200, body)

    run(check)


def test_behind_the_front_every_groups_status_is_a_round_reply(tmp_path: Path) -> None:
    """The reply table handed to the HTTP front (``monitor/serve/front.py``): every group's
    ``/status`` and the paths asked of the round before, rendered before the round is served,
    each the handler's own answer; this process keeps no copy of them."""
    async def check(service: Service, call: Call) -> None:
        lag_path = f"/v3/kafka/{C}/consumer/ok/lag"
        assert (await call("GET", lag_path))[0] == 200  # asked: in the next round's table
        table = TableWriter(tmp_path / "replies")
        service.evaluator.before_publish = lambda new, old: prepare_status_replies(
            new, old, 10.0, table, every_group=True)
        service.evaluator.run_once(T0 + 11)
        result = service.evaluator.result(C)
        assert result is not None and len(result.group_names()) == 2
        assert not result.views
        paths = {f"/v3/kafka/{C}/consumer/{g}/status" for g in result.group_names()}
        assert table.commit() == len(paths) + 1
        replies = ReplyTable(tmp_path / "replies")
        try:
            for path in [*paths, lag_path]:
                body = replies.get(path)
                assert body is not None
                assert await call("GET", path) == (200, json.loads(body))
            assert replies.get(f"/v3/kafka/{C}/consumer/nosuch/status") is None
        finally:
            replies.close()

    run(check)


def test_behind_the_front_a_failed_table_is_logged_once_and_no_older_one_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The service's own rounds behind the front: each writes the table; when writing fails
    (a full /dev/shm, stood in for by a failing ``mkstemp``) the old table is removed, so the
    front passes requests on rather than serve an older round, the failure is logged once,
    and the next round that can write does."""
    service = make_service()
    service.front = tmp_path
    service.evaluator.run_once = functools.partial(  # type: ignore[method-assign]
        service.evaluator.run_once, T0 + 11)
    path = f"/v3/kafka/{C}/consumer/ok/status"

    def served() -> bytes | None:
        if not (tmp_path / FRONT_TABLE).exists():
            return None
        table = ReplyTable(tmp_path / FRONT_TABLE)
        try:
            return table.get(path)
        finally:
            table.close()

    service._evaluate_and_render()
    assert served() is not None

    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(reply_table.tempfile, "mkstemp", full)
    with caplog.at_level(logging.ERROR, logger="monitor.service"):
        service._evaluate_and_render()
        service._evaluate_and_render()
    assert served() is None
    assert [r.getMessage() for r in caplog.records] == [
        "writing the replies for the HTTP front failed"]
    monkeypatch.undo()
    service._evaluate_and_render()
    assert served() is not None
    assert list(tmp_path.iterdir()) == [tmp_path / FRONT_TABLE]  # no writer's file left

"""The status page as served (aiohttp, real sockets) from a service's cached results:
worst first, status words next to colour, every name escaped, links that survive any group
name, 404 pages in HTML, its own script and style with a policy that allows nothing else, and
the lag history behind its sparklines (bounded, ring-cleared, carried across a restart).
Rendered in a real browser on the real broker in tests/integration/serve/test_page_browser.py."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

from monitor.evaluate.history import LagHistory
from monitor.model.observations import (
    BrokerOffsets,
    CommitBatch,
    GroupMember,
    GroupMembership,
)
from monitor.service import Service
from tests.harness.api import T0, TOPIC, C, Call, run
from tests.harness.html import parse, parse_counts


def add_odd_group(service: Service) -> str:
    """A group whose name needs escaping in HTML and in a URL path."""
    name = 'a/b <script>alert("x")</script> & ü'
    service.store.put_commits(CommitBatch(
        cluster=C, source="offsets_topic", observed_at=T0 + 10, groups=[name],
        topics=[TOPIC], partitions=[0], offsets=[1000],
        commit_times=[int((T0 + 10) * 1000)], orders=[1000]))
    service.store.put_group(GroupMembership(
        cluster=C, group=name, source="offsets_topic", observed_at=T0 + 10, state="Stable",
        protocol_type="consumer", protocol="range", generation=1,
        members=(GroupMember("m9", "odd-app", "/10.9.9.9", ((TOPIC, 0),)),)))
    for ev in service.evaluator.run_once(T0 + 10.5).values():
        service.history.add(ev)
    return name


def test_overview_lists_the_stopped_group_first_with_its_word_and_lag() -> None:
    async def check(service: Service, call: Call) -> None:
        odd = add_odd_group(service)
        status, html = await call("GET", "/")
        assert status == 200 and isinstance(html, str)
        rows = parse(html, "groups").rows[1:]  # after the header
        assert [r[1] for r in rows][:1] == ["gone"]
        first = rows[0]
        assert first[0].endswith("STOP") and "■" in first[0]  # a word and a symbol
        assert first[3] == "1,000"  # lag in records
        assert {r[1] for r in rows} == {"gone", "ok", odd}
        assert all(r[0].endswith("OK") for r in rows[1:])
        counts = dict(zip(*[iter(parse_counts(html))] * 2, strict=True))
        assert counts["STOP"] == "1" and counts["OK"] == "2"
        clusters = parse(html, "clusters").rows[1:]
        assert clusters[0][0] == C and clusters[0][2] == "1"  # one broker in metadata
        # The group name is text, never markup, and its link survives "/" and spaces.
        assert "<script>alert" not in html and "&lt;script&gt;" in html
        link = f"/ui/group/{C}/{quote(odd, safe='')}"
        assert link in parse(html, "groups").hrefs
        status, page = await call("GET", link)
        assert status == 200 and "odd-app" in page and "&lt;script&gt;" in page

    run(check)


def test_the_filter_narrows_the_list_on_the_server_too() -> None:
    async def check(service: Service, call: Call) -> None:
        _, html = await call("GET", "/?q=GON")
        assert [r[1] for r in parse(html, "groups").rows[1:]] == ["gone"]
        _, html = await call("GET", "/?q=nothing-like-this")
        assert "No consumer groups match" in html

    run(check)


def test_group_page_says_why_and_shows_the_window() -> None:
    async def check(service: Service, call: Call) -> None:
        status, html = await call("GET", f"/ui/group/{C}/gone")
        assert status == 200
        rows = [r for r in parse(html, "partitions").rows[1:] if len(r) >= 10]
        assert [(r[0][-4:], r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
            ("STOP", TOPIC, "0", "500", "1000", "500"),
            ("STOP", TOPIC, "1", "500", "1000", "500"),
        ]
        # The log start stayed at 0: nothing deleted, nothing about to be.
        assert [r[7] for r in rows] == ["lead 500; log start not advancing"] * 2
        why = rows[0][9]
        assert why.startswith("Last commit") and "offset 500" in why and "lag 500" in why
        assert "window: 5 commits" in why  # the five commits the verdict came from
        window = parse(html, "window").rows[1:]
        assert [r[0] for r in window[:5]] == ["500", "400", "300", "200", "100"]

    run(check)


def test_unknown_pages_are_html_404_and_static_files_are_the_packages() -> None:
    async def check(service: Service, call: Call) -> None:
        status, html = await call("GET", f"/ui/group/{C}/no-such-group")
        assert status == 404 and "No consumer group &#39;no-such-group&#39;" in html
        status, html = await call("GET", "/ui/mirror/nope")
        assert status == 404 and "<html" in html
        status, css = await call("GET", "/ui/static/page.css")
        assert status == 200 and ".badge.stop" in css
        status, body = await call("GET", "/ui/static/..%2Fviews.py")
        assert status == 404
        status, body = await call("GET", "/ui/canary")
        assert status == 200 and "No canary is configured" in body

    run(check)


def test_pages_load_nothing_from_elsewhere() -> None:
    async def check(service: Service, call: Call) -> None:
        status, html = await call("GET", "/")
        assert 'src="/ui/static/page.js"' in html and 'href="/ui/static/page.css"' in html
        assert "http://" not in html and "https://" not in html
        assert "<script>" not in html and "style=" not in html

    run(check)


def test_history_is_a_bounded_ring_and_survives_a_restart() -> None:
    class Ev:  # what LagHistory reads of an evaluation
        def __init__(self, at: float, lags: dict[str, float]) -> None:
            self.cluster, self.evaluated_at, self._lags = C, at, lags

        def summary(self) -> Any:
            from monitor.evaluate.job import GroupSummary

            n = len(self._lags)
            return GroupSummary(list(self._lags), ["OK"] * n, list(self._lags.values()),
                                [0] * n, [1] * n, [1] * n, [False] * n)

    h = LagHistory(span=300, step=30)  # 10 buckets
    t = 1_800_000_000.0
    for i in range(10):
        h.add(Ev(t + 30 * i, {"a": float(i), "b": 100.0}))  # type: ignore[arg-type]
        h.add(Ev(t + 30 * i + 10, {"a": float(i) + 0.5}))  # type: ignore[arg-type]
    times, (a, b) = h.series(C, ["a", "b"])
    assert times == [t + 30 * i for i in range(10)]
    assert a == [i + 0.5 for i in range(10)]  # the worst value in each bucket
    assert b == [100.0] * 10
    size = h.nbytes()
    # Eleven minutes on, with only "a": b's values all expire and b is dropped.
    for i in range(10, 22):
        h.add(Ev(t + 30 * i, {"a": 1.0}))  # type: ignore[arg-type]
    times, (a, b) = h.series(C, ["a", "b"])
    assert len(times) == 10 and times[-1] == t + 30 * 21
    assert all(math.isnan(v) for v in b) and a == [1.0] * 10
    assert h.nbytes() < size  # b's row is gone: the memory is bounded by live groups
    # Across a restart: the same series from the saved plain lists.
    saved = h.saved_state(C)
    again = LagHistory(span=300, step=30)
    again.resume(C, saved)
    assert again.series(C, ["a"]) == h.series(C, ["a"])
    again.resume(C, {"step": 60})  # another layout: ignored, nothing broken
    assert again.series(C, ["a"]) == h.series(C, ["a"])
    assert LagHistory().slots * 4 == 480  # the default: one hour in 30 s buckets, per group


def test_group_page_shows_records_lost_to_retention_and_the_state_history() -> None:
    """Retention passes the stopped group's committed offset (500) on partition 0 and a
    member joins the caught-up group (generation 3 -> 4): the stopped group's page says LOST
    with the exact count, the other's lists the rebalance with its cause."""

    async def check(service: Service, call: Call) -> None:
        t = T0 + 11
        service.store.put_broker_offsets(
            BrokerOffsets(C, t, [TOPIC, TOPIC], [0, 1], [620, 0], [1100, 1100]))
        service.store.put_group(GroupMembership(
            cluster=C, group="ok", source="offsets_topic", observed_at=t, state="Stable",
            protocol_type="consumer", protocol="range", generation=4,
            members=(GroupMember("m1", "app-1", "/10.1.1.1", ((TOPIC, 0),)),
                     GroupMember("m2", "app-2", "/10.1.1.2", ((TOPIC, 1),)))))
        service.evaluator.run_once(t + 0.5)
        status, html = await call("GET", f"/ui/group/{C}/gone")
        assert status == 200
        rows = {r[2]: r for r in parse(html, "partitions").rows[1:] if len(r) >= 10}
        assert rows["0"][7] == "LOST: 120 records deleted unread"
        assert rows["1"][7].startswith("lead 500; ")
        assert "120 records deleted before the group read them" in html
        status, html = await call("GET", f"/ui/group/{C}/ok")
        history = parse(html, "states").rows[1:]
        assert [r[1:] for r in history] == [
            ["Stable", "4", "2", "1", "member joined"],
            ["Stable", "3", "1", "0", ""],
        ]
        assert "Rebalances" in html and "1, last" in html

    run(check)

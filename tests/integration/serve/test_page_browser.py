"""The status page in a real browser: ``kafka-monitor run`` on its default configuration
watches the real Kafka 0.9 broker, where a healthy consumer and one that stops for good run;
headless Chromium loads ``/`` and the stopped group's page, and the test reads the rendered
DOM: the stopped group is listed first with STOP and its lag, the filter box narrows the list
as one types and keeps doing so across the page's own refresh, the group page says why, and
nothing is wider than a phone's screen. Screenshots of both pages at 1280x800 and at a
phone's 390x844 are saved in test-artifacts/page/ (look at them)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    HealthyConsumer,
    ProducerLoad,
    StoppedConsumer,
    librdkafka_logger,
)
from tests.harness import processes
from tests.harness.browser import Browser, png_size
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.net import free_port, http, wait_for
from tests.harness.tools import ROOT

pytestmark = [pytest.mark.kafka, pytest.mark.browser]

ARTIFACTS = ROOT / "test-artifacts" / "page"
ROWS = """[...document.querySelectorAll('tr.group-row')].map(r => ({
  name: r.dataset.name, status: r.dataset.status, hidden: r.hidden,
  badge: r.querySelector('.badge').innerText,
  lag: r.querySelector('.lag').innerText, seconds: r.querySelector('.lag-seconds').innerText,
  visible: r.getBoundingClientRect().height > 0}))"""
FITS = "document.documentElement.scrollWidth <= window.innerWidth"


@dataclass
class Stack:
    url: str
    healthy: str
    stopped: str


@pytest.fixture(scope="module")
def stack(kafka: LocalKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("page")
    prefix = make_unique_name("page")
    topic = f"{prefix}-orders"
    kafka.create_topic(topic, partitions=2)
    port = free_port()
    config = {  # the defaults, but for where the broker is and which groups to watch
        "clusters": [{
            "name": "local",
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "groups": {"allow": [f"^{prefix}"]},
        }],
        "http": {"host": "127.0.0.1", "port": port},
    }
    (tmp / "monitor.yaml").write_text(yaml.safe_dump(config))
    cfg: dict[str, Any] = {**kafka.client_config(), "logger": librdkafka_logger}
    with contextlib.ExitStack() as cleanup, (tmp / "monitor.log").open("wb") as log:
        proc = processes.start(
            [sys.executable, "-m", "monitor", "run", "--config", str(tmp / "monitor.yaml")],
            stdout=log, stderr=subprocess.STDOUT,
        )
        cleanup.callback(processes.stop, proc, 30)
        cleanup.enter_context(ProducerLoad(cfg, topic, rate=20))
        healthy, stopped = f"{prefix}-healthy", f"{prefix}-stopped"
        cleanup.enter_context(HealthyConsumer(cfg, topic, healthy))
        cleanup.enter_context(StoppedConsumer(cfg, topic, stopped, stop_after_s=5))
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: urllib.request.urlopen(f"{url}/ready", timeout=2).status == 200,
                     90, "the monitor ready")

            def status(group: str) -> str | None:
                code, body = http("GET", f"{url}/v3/kafka/local/consumer/{group}/status")
                return body["status"]["status"] if code == 200 else None

            # The verdicts the page must show, as the API gives them on the defaults.
            wait_for(lambda: status(stopped) == "STOP", 120, "the stopped group STOP")
            wait_for(lambda: status(healthy) == "OK", 60, "the healthy group OK")
            yield Stack(url, healthy, stopped)
        except BaseException:
            print((tmp / "monitor.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            raise


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    b = Browser(tmp_path / "profile")
    try:
        yield b
    finally:
        b.close()


def shot(browser: Browser, name: str, width: int, height: int) -> None:
    data = browser.screenshot(ARTIFACTS / name)
    assert png_size(data) == (width, height)
    assert len(data) > 10_000, f"{name}: an almost empty picture"


def test_overview_lists_the_stopped_group_first_and_filters(
    stack: Stack, browser: Browser
) -> None:
    browser.viewport(1280, 800)
    browser.open(f"{stack.url}/")
    rows = browser.evaluate(ROWS)
    assert [r["name"] for r in rows][:1] == [stack.stopped], rows
    first = rows[0]
    assert first["status"] == "STOP" and first["visible"]
    assert "STOP" in first["badge"]  # the word is on screen, not only a colour
    assert int(first["lag"].replace(",", "")) > 0, first
    assert first["seconds"] != "0 s", first
    healthy = next(r for r in rows if r["name"] == stack.healthy)
    assert healthy["status"] == "OK" and "OK" in healthy["badge"]
    counts = browser.evaluate("Object.fromEntries([...document.querySelectorAll('.count')]"
                              ".map(c => [c.dataset.status, Number(c.innerText)]))")
    assert counts["STOP"] >= 1 and counts["OK"] >= 1
    assert browser.evaluate("document.querySelector('svg.spark') !== null")
    shot(browser, "overview-1280x800.png", 1280, 800)

    # Typing in the filter box hides the other groups at once, in the page.
    browser.type_into("#q", stack.healthy[-12:])
    shown = [r["name"] for r in browser.evaluate(ROWS) if r["visible"]]
    assert shown == [stack.healthy]
    # The page refreshes itself (every evaluation interval) and keeps the filter applied.
    before = browser.evaluate("document.getElementById('updated').innerText")
    deadline = time.monotonic() + 40
    while browser.evaluate("document.getElementById('updated').innerText") == before:
        assert time.monotonic() < deadline, "the page did not refresh itself"
        time.sleep(0.5)
    assert [r["name"] for r in browser.evaluate(ROWS) if r["visible"]] == [stack.healthy]
    assert browser.evaluate("document.getElementById('q').value") == stack.healthy[-12:]

    browser.viewport(390, 844, mobile=True)
    browser.open(f"{stack.url}/")
    assert browser.evaluate(FITS), "the overview is wider than a phone's screen"
    assert browser.evaluate(ROWS)[0]["visible"]
    shot(browser, "overview-phone-390x844.png", 390, 844)


def test_group_page_says_why_the_group_is_stopped(stack: Stack, browser: Browser) -> None:
    browser.viewport(1280, 800)
    browser.open(f"{stack.url}/")
    href = browser.evaluate(
        f"[...document.querySelectorAll('tr.group-row')].find(r => r.dataset.name === "
        f"'{stack.stopped}').querySelector('a').href")
    browser.open(href)
    parts = browser.evaluate("""[...document.querySelectorAll('tr.partition-row')].map(r => ({
        status: r.dataset.status, cells: [...r.children].map(c => c.innerText)}))""")
    assert len(parts) == 2 and {p["status"] for p in parts} == {"STOP"}, parts
    for p in parts:
        committed, log_end, lag = (int(p["cells"][i].replace(",", "")) for i in (3, 4, 5))
        assert lag == log_end - committed > 0, p
        assert p["cells"][7].startswith("lead "), p  # retention: nothing lost on the demo
        assert p["cells"][9].startswith("Last commit"), p
    heading = browser.evaluate("document.querySelector('h1').innerText")
    assert "STOP" in heading and stack.stopped in heading
    assert browser.evaluate("document.querySelector('svg.chart') !== null")
    # The window of commits the verdict came from, one click away.
    browser.evaluate("document.querySelector('tr.partition-row details').open = true")
    window = browser.evaluate("[...document.querySelectorAll('table.window tbody tr')]"
                              ".length")
    assert window >= 2
    shot(browser, "group-1280x800.png", 1280, 800)
    browser.viewport(390, 844, mobile=True)
    browser.open(href)
    assert browser.evaluate(FITS), "the group page is wider than a phone's screen"
    shot(browser, "group-phone-390x844.png", 390, 844)

"""A real headless Chromium (Debian's ``chromium-headless-shell``) driven over the DevTools
protocol, for the status page's tests: load a URL, run a script in the page, type, resize the
viewport, take a screenshot. The protocol client is aiohttp's websocket, so no browser driver
package is needed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from tests.harness import processes
from tests.harness.net import free_port
from tests.harness.tools import require


class Browser:
    """One Chromium with one tab, used synchronously (its own event loop)."""

    def __init__(self, profile: Path) -> None:
        self.port = free_port()
        # Its own process group: closing it stops its zygotes and renderers too, which a
        # SIGTERM to the browser alone left running, orphaned.
        self.proc = processes.start(
            [require("chromium-headless-shell"), "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--disable-extensions", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--remote-debugging-port={self.port}", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.loop = asyncio.new_event_loop()
        self._ids = itertools.count(1)
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        try:
            self.loop.run_until_complete(self._connect())
        except BaseException:
            self.close()
            raise

    async def _connect(self) -> None:
        deadline = time.monotonic() + 30
        targets: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list",
                                            timeout=2) as r:
                    targets = [t for t in json.loads(r.read()) if t.get("type") == "page"]
                if targets:
                    break
            await asyncio.sleep(0.2)
        if not targets:
            raise RuntimeError("Chromium did not open its DevTools endpoint within 30 s")
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(targets[0]["webSocketDebuggerUrl"],
                                                max_msg_size=0)
        await self._send("Page.enable")
        await self._send("Runtime.enable")

    async def _send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.ws is not None
        msg_id = next(self._ids)
        await self.ws.send_json({"id": msg_id, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(), 60)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})  # type: ignore[no-any-return]

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.loop.run_until_complete(self._send(method, **params))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able values)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def viewport(self, width: int, height: int, mobile: bool = False) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)

    def open(self, url: str, timeout: float = 20) -> None:
        """Navigate and wait until the page has loaded and its deferred script has run."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate("document.readyState === 'complete' && "
                             f"location.href === {json.dumps(url)}"):
                return
            time.sleep(0.1)
        raise TimeoutError(f"{url} did not load within {timeout} s")

    def type_into(self, selector: str, text: str) -> None:
        """Focus an input and type as a person would (input events fire)."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def screenshot(self, path: Path, full_page: bool = False) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return data

    def close(self) -> None:
        async def shut() -> None:
            if self.ws is not None:
                await self.ws.close()
            if self.session is not None:
                await self.session.close()

        with contextlib.suppress(Exception):
            self.loop.run_until_complete(shut())
        self.loop.close()
        processes.stop(self.proc, timeout=10)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")

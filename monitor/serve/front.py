"""The HTTP front of ``kafka-monitor run``: the configured port, in the supervisor's process.

Why: in one interpreter, ``/status`` requests waited behind evaluation, rendering and the
offsets-topic decoder for the interpreter lock (p99 119-207 ms at 100k group-partitions while
ingesting 10k commits/s, ``bench/bench_vs_burrow.py``). Here the service process only
collects, evaluates and renders; this front answers the hot paths, ``GET
/v3/kafka/<cluster>/consumer/<group>/status`` and ``/lag``, from the replies the service wrote
for the current round (:mod:`monitor.serve.reply_table`), in a process that does nothing else.
Every other request, and any reply not in the table, is passed to the service over a Unix
socket and its answer passed back unchanged, so the API is the service's own in every case.

What it guarantees: a reply from the table is the one the service would give for the same
round; no reply outlives the service process that wrote it (the table is dropped when the
child exits, and after any write request, such as a group's deletion, until the next round);
a request that the service refuses for lack of credentials is never answered from the table
(it goes to the service, which refuses and counts it); while the service is down or starting,
passed requests are a JSON 503. TLS for the port (``http.tls``) ends here; the Unix socket is
in a folder only this user can open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

import aiohttp
from aiohttp import web

from monitor.config import MonitorConfig
from monitor.serve.http.auth import AuthGuard
from monitor.serve.http.envelope import envelope_body
from monitor.serve.http.tls import server_ssl_context
from monitor.serve.reply_table import ReplyTable

_log = logging.getLogger("monitor.front")

SOCKET = "service.sock"  # the service's HTTP server, in the front's folder
TABLE = "replies"  # the round's replies (monitor/serve/reply_table.py), same folder
HOT_PATH = re.compile(r"^/v3/kafka/[^/]+/consumer/[^/]+/(status|lag)$")
RELOAD_EVERY = 0.05  # seconds between looks for a new table
CHUNK = 256 * 1024
PASS_TIMEOUT = 60.0  # seconds the service may stay silent on a passed request (then a 504)
MAX_BODY = 64 * 1024  # as the service's own app
_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
        "trailer", "transfer-encoding", "upgrade", "content-length", "host"}


SHM_MIN_FREE = 512 * 2**20
"""``/dev/shm`` is used only with this much room (containers get 64 MB by default, less than
the table of a million group-partitions); else the temporary folder."""


def _runtime_dir() -> Path:
    """A private folder (mode 0700) for the socket and the table: in memory (``/dev/shm``)
    where there is room, else the temporary folder (``TMPDIR``)."""
    base: str | None = None
    with contextlib.suppress(OSError):
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= SHM_MIN_FREE and os.access("/dev/shm", os.W_OK):
            base = "/dev/shm"
    return Path(tempfile.mkdtemp(prefix="kafka-monitor-", dir=base))


class Front:
    """Serves the configured address from its own thread and event loop; the supervisor
    tells it when the service process has exited (:meth:`child_exited`)."""

    def __init__(self, config: MonitorConfig) -> None:
        self.config = config
        self.dir = _runtime_dir()
        self.guard = AuthGuard(config.http.auth)
        self.port: int | None = None
        self.served_from_table = 0
        self.passed_on = 0
        self._table: ReplyTable | None = None
        self._table_id: tuple[int, int] | None = None  # the file last looked at
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None

    @property
    def socket(self) -> Path:
        return self.dir / SOCKET

    @property
    def table(self) -> Path:
        return self.dir / TABLE

    # -- life cycle (called from the supervisor's thread) ---------------------------------

    def start(self) -> None:
        """Listen on the configured address; raises (OSError, ssl.SSLError) if it cannot."""
        started = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                runner = loop.run_until_complete(self._listen())
            except BaseException as exc:  # handed to start()
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_until_complete(self._serve_until_stopped(runner))
            finally:
                loop.close()

        self._thread = threading.Thread(target=main, name="http-front", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        _log.info("http front listening", extra={
            "http": f"http://{self.config.http.host}:{self.port}", "service": str(self.socket)})

    def child_exited(self) -> None:
        """The service process is gone: its replies are no longer served, and its socket and
        table are removed before the next one starts."""
        if self._loop is not None and not self._loop.is_closed():
            # RuntimeError: the loop closed meanwhile; TimeoutError: it is stuck (and serves
            # nothing); either way the supervisor goes on to restart the service.
            with contextlib.suppress(RuntimeError, TimeoutError):
                asyncio.run_coroutine_threadsafe(self._drop_table(), self._loop).result(5)
        for path in (self.socket, self.table):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def close(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(10)
        shutil.rmtree(self.dir, ignore_errors=True)
        _log.info("http front stopped", extra={"served_from_replies": self.served_from_table,
                                               "passed_to_service": self.passed_on})

    # -- the event loop's side -------------------------------------------------------------

    async def _listen(self) -> web.AppRunner:
        self._stopped = asyncio.Event()
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        tls = self.config.http.tls
        site = web.TCPSite(runner, self.config.http.host, self.config.http.port,
                           ssl_context=server_ssl_context(tls) if tls is not None else None)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.port = int(runner.addresses[0][1])
        return runner

    async def _serve_until_stopped(self, runner: web.AppRunner) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=str(self.socket)),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=PASS_TIMEOUT),
            auto_decompress=False,
            # The client's own headers only: an Accept-Encoding of aiohttp's would have the
            # service gzip /metrics for a client that cannot read it.
            skip_auto_headers=("Accept-Encoding", "Accept", "User-Agent"))
        reload = asyncio.create_task(self._reload_tables())
        try:
            await self._stopped.wait()
        finally:
            reload.cancel()
            await runner.cleanup()
            await self._session.close()
            await self._drop_table()

    async def _reload_tables(self) -> None:
        """Open the service's newest table when it replaces the file; drop it if removed.
        Whatever goes wrong here drops the table (requests then go to the service): a table
        that is no longer followed must never be served."""
        failing = False
        while True:
            try:
                await self._reload_once()
                failing = False
            except Exception:
                if not failing:  # once per run of failures
                    _log.exception("reply table reload failed; passing requests to the service")
                failing = True
                await self._drop_table()
                self._table_id = None
            await asyncio.sleep(RELOAD_EVERY)

    async def _reload_once(self) -> None:
        try:
            st = os.stat(self.table)
            ident: tuple[int, int] | None = (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            ident = None
        if ident == self._table_id:
            return
        await self._drop_table()
        self._table_id = ident
        if ident is not None:
            try:
                self._table = ReplyTable(self.table)
            except (FileNotFoundError, ValueError):  # replaced again meanwhile: next look
                self._table_id = None

    async def _drop_table(self) -> None:
        """Stop answering from the current table (a dropped file is not opened again: only
        the service's next one is)."""
        table, self._table = self._table, None
        if table is not None:
            table.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        table = self._table
        if (table is not None and request.method == "GET" and HOT_PATH.match(request.path)
                and self._may_read(request)):
            body = table.get(request.path)
            if body is not None:
                self.served_from_table += 1
                return web.Response(body=body, content_type="application/json")
        self.passed_on += 1
        return await self._pass_on(request)

    def _may_read(self, request: web.Request) -> bool:
        """Whether the service would let this request read (otherwise it goes to the
        service, which refuses and counts it)."""
        return not self.guard.needs_credentials(request) or self.guard.check(
            request.headers.get("Authorization"))

    async def _pass_on(self, request: web.Request) -> web.StreamResponse:
        """The service's own answer to ``request``, streamed back as it comes."""
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        try:
            data = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(request, 413, "request body too large")
        try:
            upstream = await self._session.request(
                request.method, f"http://service{request.rel_url}", headers=headers,
                data=data or None, allow_redirects=False)
        except TimeoutError:  # before aiohttp's connection errors: its timeouts are both
            return _error(request, 504, "the service did not answer in time")
        except (aiohttp.ClientConnectionError, OSError):
            return _error(request, 503, "the service is starting or restarting")
        async with upstream:  # a failure past this point cuts the connection: never a 503
            if request.method not in ("GET", "HEAD", "OPTIONS") and upstream.status < 400:
                await self._drop_table()  # e.g. a group deleted: gone until the next round
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for k, v in upstream.headers.items():
                if k.lower() not in _HOP and k.lower() not in ("date", "server"):
                    response.headers.add(k, v)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            try:
                await response.prepare(request)
                async for chunk in upstream.content.iter_chunked(CHUNK):
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:  # the client went away: nobody to answer
                pass
        return response


def _error(request: web.Request, status: int, message: str) -> web.Response:
    return web.Response(body=envelope_body(request.path, message, (), status), status=status,
                        content_type="application/json")

"""The running service: collectors on a schedule, the HTTP server, and a clean shutdown.

Data flows one way: scheduled collectors write observations into the store; the HTTP views
read what is there. Later layers (evaluator, Prometheus exporter, canary) plug in as more
collectors and more routes on the same app.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client import CollectorRegistry

from monitor.config import MonitorConfig
from monitor.evaluate.history import LagHistory
from monitor.evaluate.job import ClusterEvaluation, Evaluator
from monitor.ingest.base import Collector
from monitor.ingest.offsets_topic import OffsetsTopicCollector
from monitor.ingest.registry import build_collectors
from monitor.record.recorder import build_recorder
from monitor.runtime import (
    enable_crash_traces,
    release_free_memory,
    tune_gc,
    tune_malloc,
    tune_threads,
)
from monitor.serve.front import SOCKET as FRONT_SOCKET
from monitor.serve.front import TABLE as FRONT_TABLE
from monitor.serve.http.app import build_app
from monitor.serve.http.auth import AuthGuard
from monitor.serve.http.tls import server_ssl_context
from monitor.serve.http.v3 import prepare_status_replies
from monitor.serve.metrics.health import HealthMetrics
from monitor.serve.metrics.lag import LagExporter
from monitor.serve.metrics.probes import probe_metrics
from monitor.serve.metrics.process import CrashRestartMetrics
from monitor.serve.reply_table import TableWriter
from monitor.store.snapshot import StateFile, StateMetrics
from monitor.store.store import Store
from monitor.supervisor import crash_counts, front_dir

_log = logging.getLogger("monitor.service")
T = TypeVar("T")

SHUTDOWN_TIMEOUT = 5.0
STATE_SAVE_TIMEOUT = 20.0  # added to the shutdown budget for the last state snapshot
ROUND_WAIT = 10.0
"""How long the shutdown save waits for an evaluation round in flight (its daemon thread runs
on after the scheduler is shut down), so the last snapshot holds that round's history."""
READY_POLL = 0.05  # how often start-up looks for clusters whose collectors became ready


async def run_in_daemon_thread(fn: Callable[[], T], name: str) -> T:
    """Run blocking Kafka client code off the event loop in a daemon thread, so a call stuck
    on an unreachable broker can never hold up shutdown (executor threads would be joined)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        try:
            result: T | None = fn()
            error: BaseException | None = None
        except BaseException as exc:  # handed to the awaiting coroutine
            result, error = None, exc
        # RuntimeError: the loop closed while this ran (shutdown), nobody waits.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future


class Service:
    def __init__(
        self,
        config: MonitorConfig,
        store: Store | None = None,
        collectors: list[Collector] | None = None,
        front: Path | None = None,
    ) -> None:
        self.config = config
        # Behind the HTTP front of ``kafka-monitor run`` (monitor/serve/front.py): HTTP on a
        # Unix socket in this folder, and every round's replies written there for the front.
        self.front = front
        self.store = (
            store if store is not None else Store(config.evaluator, config.rebalance)
        )
        self._freshness_used: dict[str, float | None] = {}
        # Saved state (``state.path``, store/snapshot.py): loaded before any collector exists,
        # so that none ever writes into an empty store.
        self.state = (
            StateFile(config.state, config.clusters) if config.state.path is not None else None
        )
        restored = self.state.load(self.store) if self.state is not None else None
        self._restored_freshness = restored.freshness if restored is not None else {}
        self.collectors = (
            collectors if collectors is not None
            else build_collectors(config, self.store, lagging=self._lagging_positions)
        )
        # Each group's lag over the last hour, for the status page (saved with the state).
        self.history = LagHistory()
        if restored is not None:
            for collector in self.collectors:
                saved = restored.collectors.get(collector.name)
                if saved is not None:
                    collector.resume(saved)
            for saved_history in self.history.resumables(self._cluster_names):
                found = restored.collectors.get(saved_history.name)
                if found is not None:
                    self.history.resume(saved_history.cluster, found)
        self.evaluator = Evaluator(
            self.store,
            config.evaluator,
            freshness=self._evaluation_freshness,
            # A group read by the Admin API is stale after three missed rounds.
            stale_after=3 * config.collectors.group_offsets_interval + config.evaluator.interval,
            published_stale_after={
                c.name: c.pipeline_statuses.max_age
                for c in config.clusters if c.offsets_source == "pipeline"
            },
            read_interval={
                c.name: config.collectors.group_offsets_interval
                for c in config.clusters if c.offsets_source in ("admin", "both")
            },
            rebalance=config.rebalance,
            retention=config.retention,
            hot=config.hot_partitions,
        )
        # The status replies pollers asked of a round are rendered before the next round is
        # served, off the event loop (at most half a round's interval); behind the front,
        # into the front's reply table, and every group's once the cluster's collectors have
        # caught up (before that, rendering them all each round would only slow the
        # catch-up; misses are rendered when asked).
        self._reply_budget = config.evaluator.interval / 2
        self.evaluator.before_publish = self._prepare_replies
        self._table: TableWriter | None = None  # the round's, until it is published
        self._table_failed = False
        self.registry = CollectorRegistry()
        self.registry.register(HealthMetrics(self.store, config))
        for probe_collector in probe_metrics(self.collectors, self.evaluator):
            self.registry.register(probe_collector)
        self.exporter = LagExporter(self.evaluator, self.store, self.collectors, config.exporter)
        self.registry.register(self.exporter)
        # Credentials for the HTTP API (http.auth) and the refusals counted.
        self.http_guard = AuthGuard(config.http.auth)
        self.registry.register(self.http_guard)
        if self.state is not None:
            self.registry.register(StateMetrics(self.state))
        self.registry.register(CrashRestartMetrics(crash_counts()))
        # Observations and verdicts to Parquet for backtests (``recorder:``, off by default).
        self.recorder = build_recorder(config, self.store, self.collectors)
        self.started_at = time.time()
        self.evaluated_clusters: set[str] = set()  # evaluated once their collectors were ready
        self.http_port: int | None = None
        self._scheduler: AsyncIOScheduler | None = None
        self._first_rounds: asyncio.Task[None] | None = None
        self._round_running = False
        self._rounds_done = 0
        self._runner: web.AppRunner | None = None
        # Held by an evaluation round; the shutdown save takes it, and a round that would
        # start after it (``_stopping``) does nothing, so no round lands after the snapshot.
        self._round_lock = threading.Lock()
        self._stopping = False

    def _lagging_positions(self, cluster: str) -> list[tuple[str, int, int]]:
        """The latest round's lagging positions, most behind first (the record-timestamp
        reader's work list; empty before the first round)."""
        result = self.evaluator.result(cluster)
        return result.lagging_positions() if result is not None else []

    @property
    def _cluster_names(self) -> list[str]:
        return [c.name for c in self.config.clusters]

    @property
    def shutdown_timeout(self) -> float:
        """How long :meth:`stop` may take: longer when it writes the last state snapshot."""
        if self.state is None:
            return SHUTDOWN_TIMEOUT
        return SHUTDOWN_TIMEOUT + ROUND_WAIT + STATE_SAVE_TIMEOUT

    async def start(self) -> None:
        if self.state is not None and self.state.restored is not None:
            # The first answers are the restored store's verdicts, never an empty round's.
            await run_in_daemon_thread(self._evaluate_and_render, name="evaluator")
        self._runner = web.AppRunner(build_app(self), access_log=None, handle_signals=False)
        await self._runner.setup()
        tls = self.config.http.tls
        site: web.BaseSite
        if self.front is not None:  # the front listens on the configured port, with TLS
            site = web.UnixSite(self._runner, str(self.front / FRONT_SOCKET))
        else:
            site = web.TCPSite(self._runner, self.config.http.host, self.config.http.port,
                               ssl_context=server_ssl_context(tls) if tls is not None else None)
        await site.start()
        if self.front is None:
            self.http_port = int(self._runner.addresses[0][1])

        self._scheduler = AsyncIOScheduler(timezone=UTC)
        now = datetime.now(UTC)
        for collector in self.collectors:
            self._scheduler.add_job(
                self._run_collector,
                "interval",
                seconds=collector.interval,
                args=[collector],
                id=collector.name,
                next_run_time=now,  # first round at once: readiness should not wait
                max_instances=1,  # a slow round is never overlapped by the next one
                coalesce=True,
                misfire_grace_time=None,
            )
        self._scheduler.add_job(
            self._run_evaluation,
            "interval",
            seconds=self.config.evaluator.interval,
            id="evaluator",
            next_run_time=now,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        if self.recorder is not None:
            self._scheduler.add_job(
                run_in_daemon_thread, "interval", seconds=self.config.recorder.flush_interval,
                args=[self.recorder.flush, "recorder"], id="recorder", max_instances=1,
                coalesce=True, misfire_grace_time=None,
            )
        if self.state is not None:
            self._scheduler.add_job(
                run_in_daemon_thread, "interval", seconds=self.config.state.interval,
                args=[self._save_state, "state"], id="state", max_instances=1,
                coalesce=True, misfire_grace_time=None,
            )
        self._scheduler.start()
        self._first_rounds = asyncio.create_task(self._evaluate_when_ready())
        _log.info(
            "service started",
            extra={
                "http": (f"http://{self.config.http.host}:{self.http_port}"
                         if self.front is None else str(self.front / FRONT_SOCKET)),
                "clusters": [c.name for c in self.config.clusters],
                "collectors": [c.name for c in self.collectors],
            },
        )

    def _settled(self) -> set[str]:
        """Clusters whose collectors all have data to serve."""
        return {
            c.name
            for c in self.config.clusters
            if all(x.ready for x in self.collectors if x.cluster == c.name)
        }

    async def _evaluate_when_ready(self) -> None:
        """Until every cluster has been evaluated on ready collectors, bring the next round
        forward as soon as a cluster's collectors are all ready (once no round is running: a
        round in flight when they became ready judged without them), so ``/ready`` and the
        first verdicts come when the data does, not up to ``evaluator.interval`` later."""
        triggered_after = -1
        while self._scheduler is not None and not self._stopping:
            waiting = set(self._cluster_names) - self.evaluated_clusters
            if not waiting:
                return
            if (waiting & self._settled() and not self._round_running
                    and triggered_after != self._rounds_done):
                triggered_after = self._rounds_done
                with contextlib.suppress(Exception):  # the scheduler is shutting down
                    self._scheduler.modify_job("evaluator", next_run_time=datetime.now(UTC))
            await asyncio.sleep(READY_POLL)

    async def _run_collector(self, collector: Collector) -> None:
        # A round still waiting on Kafka at shutdown is abandoned with its daemon thread; the
        # scheduler would log the cancellation as a failed job.
        with contextlib.suppress(asyncio.CancelledError):
            await run_in_daemon_thread(collector.run_once, name=collector.name)

    async def _run_evaluation(self) -> None:
        # Clusters whose collectors all had data before this round are served from it on.
        settled = self._settled()
        self._round_running = True
        try:
            await run_in_daemon_thread(self._evaluate_and_render, name="evaluator")
            self.evaluated_clusters |= settled
        except asyncio.CancelledError:  # shutdown: as for collector rounds
            return
        except Exception:  # a bug must not stop the schedule; the last results stay served
            _log.exception("evaluation failed")
        finally:
            self._round_running = False
            self._rounds_done += 1

    def _evaluate_and_render(self) -> None:
        """One evaluation round, then the exporter's text for it in the same worker thread,
        so a scrape on the event loop only joins cached bytes."""
        with self._round_lock:
            if not self._stopping:
                self._evaluate_and_render_locked()

    def _evaluate_and_render_locked(self) -> None:
        try:
            results = self.evaluator.run_once()
        except BaseException:
            self._discard_table()  # the next round starts its own
            raise
        try:
            for evaluation in results.values():
                self.history.add(evaluation)
        except Exception:  # the round stands; only the page's charts miss a point
            _log.exception("lag history update failed")
        if self.recorder is not None:
            self.recorder.record_round(results, self._freshness_used.get)
        if self.front is not None:
            self._write_replies()
        try:
            self.exporter.prerender()
        except Exception:  # the round stands; the next scrape renders it (and fails loudly)
            _log.exception("metrics pre-render failed")
        release_free_memory()  # the round before is gone by now: what it held goes back

    def _prepare_replies(self, new: ClusterEvaluation, old: ClusterEvaluation | None) -> None:
        """The evaluator's ``before_publish``: the cluster's replies rendered ahead, into the
        round's reply table behind the front (see ``__init__``)."""
        if self.front is None:
            prepare_status_replies(new, old, self._reply_budget)
            return
        try:
            if self._table is None:
                self._table = TableWriter(self.front / FRONT_TABLE)
            prepare_status_replies(new, old, self._reply_budget, self._table,
                                   every_group=new.cluster in self.evaluated_clusters)
        except OSError:
            self._table_error()

    def _write_replies(self) -> None:
        """Hand the round's replies to the front once the round is served here too. A failure
        (a full disk, say) is logged once; the front then passes those requests on to this
        process."""
        assert self.front is not None
        table, self._table = self._table, None
        try:
            if table is None:  # no cluster this round: an empty table
                table = TableWriter(self.front / FRONT_TABLE)
            table.commit()
            self._table_failed = False
        except OSError:
            self._table_error()

    def _table_error(self) -> None:
        self._discard_table()
        if not self._table_failed:
            _log.exception("writing the replies for the HTTP front failed")
        self._table_failed = True
        assert self.front is not None
        with contextlib.suppress(OSError):  # never let the front serve an older round
            (self.front / FRONT_TABLE).unlink()

    def _discard_table(self) -> None:
        if self._table is not None:
            self._table.abort()
            self._table = None

    def _evaluation_freshness(self, cluster: str) -> float | None:
        """The reader freshness a round judged on, kept for the recorder (replays use it)."""
        fresh = self._freshness_used[cluster] = self._offsets_topic_freshness(cluster)
        return fresh

    def _offsets_topic_freshness(self, cluster: str) -> float | None:
        """Up to when the cluster's ``__consumer_offsets`` reader has read every commit: its
        last error-free pass, or (until the new reader has caught up) the restored state's."""
        fresh = [
            c.fresh_at
            for c in self.collectors
            if isinstance(c, OffsetsTopicCollector) and c.cluster == cluster
        ]
        fresh.append(self._restored_freshness.get(cluster))
        return max((f for f in fresh if f is not None), default=None)

    def _save_state(self) -> None:
        if self.state is not None:
            self.state.save(self.store,
                            [*self.collectors, *self.history.resumables(self._cluster_names)],
                            self._offsets_topic_freshness)

    def _save_final_state(self) -> None:
        """The shutdown snapshot, after the evaluation round in flight (if any) has ended."""
        waited = self._round_lock.acquire(timeout=ROUND_WAIT)
        if not waited:
            _log.warning("evaluation round still running at shutdown; saving without it",
                         extra={"waited_seconds": ROUND_WAIT})
        try:
            self._save_state()
        finally:
            if waited:
                self._round_lock.release()

    async def stop(self) -> None:
        self._stopping = True
        if self._first_rounds is not None:
            self._first_rounds.cancel()
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
        if self._runner is not None:
            await self._runner.cleanup()
        for collector in self.collectors:
            try:
                collector.close()
            except Exception:
                _log.exception("collector close failed", extra={"collector": collector.name})
        if self.state is not None:  # after the collectors: nothing changes the store now
            await run_in_daemon_thread(self._save_final_state, name="state")
        if self.recorder is not None:
            try:
                await run_in_daemon_thread(self.recorder.close, name="recorder")
            except Exception:
                _log.exception("recorder close failed")
        _log.info("service stopped")


async def serve(service: Service, stop: asyncio.Event) -> None:
    """Run ``service`` until ``stop`` is set, then shut it down within its
    ``shutdown_timeout``."""
    await service.start()
    try:
        await stop.wait()
    finally:
        try:
            await asyncio.wait_for(service.stop(), service.shutdown_timeout)
        except TimeoutError:
            _log.error("shutdown timed out",
                       extra={"timeout_seconds": service.shutdown_timeout})


def install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, sig, stop)


def _on_signal(sig: signal.Signals, stop: asyncio.Event) -> None:
    _log.info("shutting down", extra={"signal": sig.name})
    stop.set()


def run(config: MonitorConfig) -> int:
    """The ``kafka-monitor run`` entry point: serve until SIGTERM or SIGINT."""
    tune_gc()
    tune_malloc()
    tune_threads()
    enable_crash_traces()

    async def main() -> None:
        stop = asyncio.Event()
        install_signal_handlers(stop)
        await serve(Service(config, front=front_dir()), stop)

    asyncio.run(main())
    return 0

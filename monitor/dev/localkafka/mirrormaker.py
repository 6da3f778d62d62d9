"""Kafka's own MirrorMaker (``kafka.tools.MirrorMaker`` from the same 0.9.0.1 jars) between two
:class:`~monitor.dev.localkafka.cluster.LocalKafka` clusters, as operators run it for disaster
recovery: a consumer group on the source (the new consumer, so the group lives in Kafka and
the monitor sees it) and a producer to the destination.

Stopped by PID like the clusters: ``stop()`` is SIGTERM (MirrorMaker commits its offsets and
exits), ``kill()`` is SIGKILL (no commit: a restart re-mirrors everything since the last
periodic commit, i.e. real duplicates at the destination).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from . import dist
from .cluster import _LIVE_LOCK, _LIVE_PROCS, LocalKafka, _kill_procs, _pdeathsig_prefix, _props

__all__ = ["MirrorMaker"]


class MirrorMaker:
    """One MirrorMaker process mirroring topics matching ``whitelist`` (a Java regex) from
    ``source`` to ``destination``; its consumer group is ``group``. ``commit_interval_ms`` is
    how often it commits its source offsets (MirrorMaker's default, 60 s)."""

    def __init__(
        self,
        source: LocalKafka,
        destination: LocalKafka,
        whitelist: str,
        group: str,
        *,
        commit_interval_ms: int = 60_000,
        heap: str = "128m",
    ) -> None:
        self.source = source
        self.destination = destination
        self.whitelist = whitelist
        self.group = group
        self.commit_interval_ms = commit_interval_ms
        self.heap = heap
        self.work_dir = Path(tempfile.mkdtemp(prefix="mirrormaker-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.work_dir / "mirrormaker.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> MirrorMaker:
        if self.running:
            raise RuntimeError("MirrorMaker is already running")
        consumer = self.work_dir / "consumer.properties"
        consumer.write_text(_props({
            "bootstrap.servers": self.source.bootstrap_servers,
            "group.id": self.group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            # Whitelisted topics created later are subscribed within seconds (default 5 min).
            "metadata.max.age.ms": 2000,
        }))
        producer = self.work_dir / "producer.properties"
        producer.write_text(_props({
            "bootstrap.servers": self.destination.bootstrap_servers,
            "acks": "all",
            "linger.ms": 0,
        }))
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(
            "log4j.rootLogger=INFO, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        home = dist.ensure_kafka_dist()
        cmd = [
            *_pdeathsig_prefix(), dist.java_executable(), f"-Xmx{self.heap}", f"-Xms{self.heap}",
            "-XX:+UseSerialGC", f"-Dlog4j.configuration=file:{log4j}",
            "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
            "-cp", dist.classpath(home), "kafka.tools.MirrorMaker", "--new.consumer",
            "--consumer.config", str(consumer), "--producer.config", str(producer),
            "--whitelist", self.whitelist,
            "--offset.commit.interval.ms", str(self.commit_interval_ms),
        ]
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== {time.strftime('%H:%M:%S')} start\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.work_dir, start_new_session=True,
            )
        with _LIVE_LOCK:
            _LIVE_PROCS.add(self.proc)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (MirrorMaker commits its offsets), SIGKILL after ``timeout``."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        _kill_procs([proc])
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: no final commit."""
        if self.proc is not None:
            _kill_procs([self.proc])
            self.proc = None

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> MirrorMaker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

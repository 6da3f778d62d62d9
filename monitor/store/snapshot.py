"""State across restarts: what the verdicts need, saved to disk and loaded at start.

A restart used to empty the store: for a minute stopped consumers read OK (one fresh commit
per window), lag in seconds restarted from nothing (an empty log-end history), and alerts
waiting out their ``for:`` reset. A restart is an event in the data, not a reset of it: every
``state.interval`` and once at shutdown the service saves a snapshot, and at start it loads
the snapshot before any collector runs.

What is saved: per configured cluster, the store's state (:meth:`Store.dump_state`: commit
windows and log-end history, group commits with their first-seen times, memberships and when
consumers left, offsets freshness, metadata and watermarks; not the JMX scrape), plus what a
collector needs to continue (:meth:`Collector.saved_state`: the ``__consumer_offsets`` reader's
positions, so it reads on instead of applying the topic a second time) and how far that reader
had read without errors (STOP's clocks stop there until the new reader has caught up). The
evaluator's results are not saved: they are a pure function of the store, and the service
evaluates the restored store once before it serves.

The file: ``MAGIC``, the header's length (4 bytes, big-endian), a JSON header (format version,
package version, when it was saved, the clusters and their bootstrap servers, a fingerprint of
the store's layout, section lengths and a CRC-32), then two pickles: the store's clusters and
the extras. Written to a temporary file in the same directory, fsynced, renamed over the old
one: a crash mid-write leaves the previous snapshot.

Loading never fails the service. A missing file is logged at INFO; anything else that makes
a snapshot unusable is logged as a WARNING naming the reason, and the service starts empty:
truncated or corrupt, another format version or store layout (an upgrade that changed the
store), windows sized for another ``evaluator.window``, older than ``state.max_age``, or
foreign (none of its clusters is configured with a common bootstrap server: another
deployment's file, or a cluster name reused for another Kafka). Clusters are restored one by
one: the configured clusters found in the snapshot are restored, the others start empty.

Only classes of the store's own layout, numpy arrays and builtins can be unpickled, so a file
planted in the directory cannot run code; still, the directory should be writable by the
monitor alone.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
import pickle
import platform
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from prometheus_client.core import Metric
from prometheus_client.registry import Collector as MetricsCollector

from monitor import __version__
from monitor.config import ClusterConfig, StateConfig
from monitor.model import metric_catalogue as catalogue
from monitor.model.observations import (
    ClusterMetadata,
    GroupMember,
    GroupMembership,
    PartitionMetadata,
)
from monitor.model.verdicts import (
    CommitPoint,
    GroupLifecycleStatus,
    GroupRetention,
    GroupStatus,
    PartitionStatus,
    RetentionRisk,
    StateChange,
)
from monitor.store.lifecycle import GroupLifecycle
from monitor.store.placement import Placement
from monitor.store.store import Commit, PartitionOffsets, Store, _Cluster, _Group
from monitor.store.windows import Windows

_log = logging.getLogger("monitor.state")

class Resumable(Protocol):
    """What the snapshot asks of a collector (:class:`monitor.ingest.base.Collector` is one):
    its name and cluster, and what it needs to continue after a restart."""

    @property
    def name(self) -> str: ...

    @property
    def cluster(self) -> str: ...

    def saved_state(self) -> object | None: ...


MAGIC = b"KMSTATE\n"
FORMAT_VERSION = 1
FILE_NAME = "kafka-monitor.store.snapshot"
_LENGTH = struct.Struct(">I")
_FUTURE_SLACK = 60.0  # a snapshot saved later than now by more than this: the clock moved

STATE_CLASSES: tuple[type, ...] = (
    _Cluster, _Group, Commit, PartitionOffsets, Windows, ClusterMetadata, PartitionMetadata,
    GroupMembership, GroupMember, Placement, GroupStatus, PartitionStatus, CommitPoint,
    GroupLifecycle, StateChange, RetentionRisk, GroupRetention, GroupLifecycleStatus,
)
"""The classes a snapshot may hold: all that :meth:`Store.dump_state` pickles. The only
``monitor`` classes the loader accepts, and the layout fingerprint is taken over their
fields: a class added to the store must be added here (the round-trip test fails until it
is)."""

_ALLOWED: dict[tuple[str, str], Any] = {(c.__module__, c.__qualname__): c for c in STATE_CLASSES}
_NUMPY_NAMES = {"_reconstruct", "_frombuffer", "scalar", "dtype", "ndarray"}
_NUMPY_MODULES = {
    "numpy", "numpy.core.multiarray", "numpy._core.multiarray", "numpy.core.numeric",
    "numpy._core.numeric",
}
_BUILTINS = {"set", "frozenset", "bytearray", "complex"}


@functools.cache
def layout() -> str:
    """A fingerprint of the store's layout: each state class's fields, in order. Slotted
    dataclasses unpickle positionally, so a snapshot of another layout would load with its
    values in the wrong fields: it is refused instead."""
    parts: list[tuple[str, list[str]]] = []
    for cls in STATE_CLASSES:
        if dataclasses.is_dataclass(cls):
            names = [f.name for f in dataclasses.fields(cls)]
        else:  # Windows: its instance attributes
            names = sorted(vars(cls()))
        parts.append((f"{cls.__module__}.{cls.__qualname__}", names))
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


class _Unpickler(pickle.Unpickler):
    """Resolves only the store's classes, numpy's array reconstruction and a few builtins."""

    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED.get((module, name))
        if found is not None:
            return found
        if (module in _NUMPY_MODULES and name in _NUMPY_NAMES) or (
            module == "builtins" and name in _BUILTINS
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a state file")


def _loads(data: bytes | memoryview) -> Any:
    return _Unpickler(io.BytesIO(data)).load()


class StateRejected(Exception):
    """A snapshot that cannot be used; the message is the reason, as logged."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What a load restored."""

    saved_at: float
    age: float  # seconds between saving and loading
    groups: dict[str, int]  # groups restored per cluster
    freshness: dict[str, float]  # cluster -> up to when its offsets-topic reader had read
    collectors: dict[str, object]  # collector name -> its saved state
    size: int  # bytes of the file


class StateFile:
    """Saves and loads the snapshot in ``config.path`` for the configured ``clusters``.
    ``save`` may be called from any thread (saves are serialised) and never raises; failures
    are counted and logged when they start and when they stop."""

    def __init__(self, config: StateConfig, clusters: Iterable[ClusterConfig]) -> None:
        if config.path is None:
            raise ValueError("state.path is not set")
        self.directory = Path(config.path)
        self.path = self.directory / FILE_NAME
        self.max_age = config.max_age
        self.clusters = {c.name: sorted(c.bootstrap_servers) for c in clusters}
        self._lock = threading.Lock()
        self.saves = 0
        self.failures = 0
        self.consecutive_failures = 0
        self.last_saved_at: float | None = None
        self.last_duration: float | None = None
        self.last_size: int | None = None
        self.last_error: str | None = None
        self.restored: Restored | None = None

    # ------------------------------------------------------------------------------ save

    def save(
        self,
        store: Store,
        collectors: Iterable[Resumable] = (),
        freshness: Callable[[str], float | None] | None = None,
    ) -> bool:
        """Write a snapshot of ``store``'s configured clusters, with the collectors' saved
        state and each cluster's offsets-topic freshness (both taken before the store's
        copy: they never claim more than the store holds). Returns whether it was written."""
        with self._lock:
            started = time.monotonic()
            saved_at = time.time()
            try:
                extras = _extras(self.clusters, collectors, freshness)
                size = self._write(saved_at, store.dump_state(self.clusters), extras)
            except Exception as exc:  # a full disk or a bug must not stop the service
                self.failures += 1
                self.consecutive_failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self.consecutive_failures == 1:
                    _log.warning("state save failing",
                                 extra={"path": str(self.path), "error": self.last_error})
                return False
            self.last_duration = time.monotonic() - started
            if self.consecutive_failures:
                _log.info("state save recovered",
                          extra={"path": str(self.path),
                                 "failed_saves": self.consecutive_failures})
            self.consecutive_failures = 0
            self.saves += 1
            self.last_saved_at = saved_at
            self.last_size = size
            _log.debug("state saved", extra={"path": str(self.path), "bytes": size,
                                             "seconds": round(self.last_duration, 3)})
            return True

    def _write(self, saved_at: float, store_blob: bytes, extras: dict[str, Any]) -> int:
        extras_blob = pickle.dumps(extras, protocol=pickle.HIGHEST_PROTOCOL)
        crc = zlib.crc32(extras_blob, zlib.crc32(store_blob))
        header = json.dumps({
            "format": FORMAT_VERSION,
            "package_version": __version__,
            "python": platform.python_version(),
            "saved_at": saved_at,
            "clusters": {name: {"bootstrap_servers": servers}
                         for name, servers in self.clusters.items()},
            "layout": layout(),
            "sections": {"store": len(store_blob), "extras": len(extras_blob)},
            "crc32": crc,
        }).encode()
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{FILE_NAME}.tmp"
        try:
            with open(tmp, "wb") as f:
                for part in (MAGIC, _LENGTH.pack(len(header)), header, store_blob, extras_blob):
                    f.write(part)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_directory(self.directory)
        return len(MAGIC) + _LENGTH.size + len(header) + len(store_blob) + len(extras_blob)

    # ------------------------------------------------------------------------------ load

    def load(self, store: Store, now: float | None = None) -> Restored | None:
        """Restore the snapshot into ``store`` (see the module docstring for what is
        refused). Never raises: an unusable snapshot is logged and None returned."""
        now = time.time() if now is None else now
        started = time.monotonic()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            _log.info("no saved state, starting empty", extra={"path": str(self.path)})
            return None
        except OSError as exc:
            self._rejected(f"cannot read it ({type(exc).__name__}: {exc})")
            return None
        try:
            restored = self._restore(store, data, now)
        except StateRejected as exc:
            self._rejected(str(exc))
            return None
        except Exception as exc:  # whatever else a damaged file does to the unpickler
            self._rejected(f"unreadable ({type(exc).__name__}: {exc})")
            return None
        self.restored = restored
        _log.info(
            "state restored",
            extra={"path": str(self.path), "age_seconds": round(restored.age, 1),
                   "groups": restored.groups, "bytes": restored.size,
                   "seconds": round(time.monotonic() - started, 3)},
        )
        return restored

    def _rejected(self, reason: str) -> None:
        _log.warning("saved state ignored, starting empty",
                     extra={"path": str(self.path), "reason": reason})

    def _restore(self, store: Store, data: bytes, now: float) -> Restored:
        view = memoryview(data)
        head = len(MAGIC) + _LENGTH.size
        if not data[: len(MAGIC)] == MAGIC[: len(data)]:
            raise StateRejected("not a kafka-monitor state file (bad magic)")
        if len(data) < head:
            raise StateRejected(f"truncated ({len(data)} bytes)")
        (header_len,) = _LENGTH.unpack_from(data, len(MAGIC))
        if len(data) < head + header_len:
            raise StateRejected(f"truncated ({len(data)} bytes, header alone {header_len})")
        try:
            header = json.loads(bytes(view[head : head + header_len]))
            sections = header["sections"]
            store_len, extras_len = int(sections["store"]), int(sections["extras"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StateRejected(f"corrupt header ({exc})") from exc
        if header.get("format") != FORMAT_VERSION:
            raise StateRejected(
                f"format version {header.get('format')!r}, this version reads {FORMAT_VERSION}"
            )
        if header.get("layout") != layout():
            raise StateRejected(
                f"written by kafka-monitor {header.get('package_version')} with another "
                "store layout"
            )
        body = head + header_len
        if len(data) != body + store_len + extras_len:
            raise StateRejected(
                f"truncated ({len(data)} bytes, expected {body + store_len + extras_len})"
            )
        store_blob = view[body : body + store_len]
        extras_blob = view[body + store_len :]
        if zlib.crc32(extras_blob, zlib.crc32(store_blob)) != header.get("crc32"):
            raise StateRejected("corrupt (checksum mismatch)")
        saved_at = float(header["saved_at"])
        age = now - saved_at
        if age > self.max_age:
            raise StateRejected(f"too old ({age:.0f} s, state.max_age {self.max_age:g} s)")
        if age < -_FUTURE_SLACK:
            raise StateRejected(f"saved {-age:.0f} s in the future (clock changed?)")
        names = self._matching(header.get("clusters"))
        saved_clusters = _loads(store_blob)
        extras = _loads(extras_blob)
        if not isinstance(saved_clusters, dict) or not isinstance(extras, dict):
            raise StateRejected("corrupt (unexpected contents)")
        try:
            groups = store.restore_state({n: saved_clusters[n] for n in names
                                          if n in saved_clusters})
        except ValueError as exc:
            raise StateRejected(str(exc)) from exc
        freshness: dict[str, float] = {}
        collectors: dict[str, object] = {}
        for name in groups:
            extra = extras.get(name) or {}
            if isinstance(extra.get("freshness"), float):
                freshness[name] = extra["freshness"]
            collectors.update(extra.get("collectors") or {})
        return Restored(saved_at, age, groups, freshness, collectors, len(data))

    def _matching(self, saved: object) -> list[str]:
        """Configured clusters the snapshot holds, the same Kafka cluster by a common
        bootstrap server; raises when there is none (a foreign snapshot)."""
        if not isinstance(saved, dict):
            raise StateRejected("corrupt header (clusters)")
        same: list[str] = []
        for name, servers in self.clusters.items():
            entry = saved.get(name)
            if isinstance(entry, dict) and set(entry.get("bootstrap_servers", ())) & set(servers):
                same.append(name)
        if not same:
            raise StateRejected(
                f"foreign: saved for {_describe(saved)}, configured {_describe(self.clusters)}"
            )
        others = sorted(set(saved) - set(same))
        if others:
            _log.warning("saved state of clusters not configured (or with other bootstrap "
                         "servers) ignored", extra={"path": str(self.path), "clusters": others})
        return same


def _describe(clusters: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{name} ({','.join(v['bootstrap_servers'] if isinstance(v, dict) else v)})"
        for name, v in sorted(clusters.items())
    ) or "no clusters"


def _extras(
    clusters: Iterable[str],
    collectors: Iterable[Resumable],
    freshness: Callable[[str], float | None] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    by_cluster: dict[str, dict[str, object]] = {}
    for collector in collectors:
        state = collector.saved_state()
        if state is not None:
            by_cluster.setdefault(collector.cluster, {})[collector.name] = state
    for name in clusters:
        fresh = freshness(name) if freshness is not None else None
        out[name] = {"freshness": fresh, "collectors": by_cluster.get(name, {})}
    return out


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (a crash right after it could otherwise lose it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class StateMetrics(MetricsCollector):
    """The snapshot's own metrics for ``/metrics`` (``kafka_monitor_state_*``)."""

    def __init__(self, state: StateFile) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        s = self._state
        yield catalogue.counter("kafka_monitor_state_saves", s.saves)
        yield catalogue.counter("kafka_monitor_state_save_failures", s.failures)
        last = catalogue.gauge("kafka_monitor_state_last_save_timestamp_seconds")
        size = catalogue.gauge("kafka_monitor_state_snapshot_bytes")
        duration = catalogue.gauge("kafka_monitor_state_last_save_duration_seconds")
        restored = catalogue.gauge("kafka_monitor_state_restored_age_seconds")
        if s.last_saved_at is not None:
            last.add_metric([], s.last_saved_at)
        if s.last_size is not None:
            size.add_metric([], s.last_size)
        if s.last_duration is not None:
            duration.add_metric([], s.last_duration)
        if s.restored is not None:
            restored.add_metric([], s.restored.age)
        yield from (last, size, duration, restored)

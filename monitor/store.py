"""The store: holds the latest observations per cluster, written by collectors and read by the
evaluator and views.

Writes come from collector threads and reads from the event loop, so every method takes the
lock; readers get immutable snapshots and never wait on Kafka.
"""

from __future__ import annotations

import threading

from monitor.observations import ClusterMetadata


class Store:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metadata: dict[str, ClusterMetadata] = {}

    def put_metadata(self, metadata: ClusterMetadata) -> None:
        with self._lock:
            self._metadata[metadata.cluster] = metadata

    def metadata(self, cluster: str) -> ClusterMetadata | None:
        with self._lock:
            return self._metadata.get(cluster)

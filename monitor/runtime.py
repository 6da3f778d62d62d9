"""Process-wide settings of the running service (``kafka-monitor run``, the demo, and the
benchmarks that measure the service as it runs)."""

from __future__ import annotations

import faulthandler
import gc

# Young-generation threshold: CPython's default (700) runs a collection every 700 net
# allocations, and the older generations' collections traverse every live object.
GC_THRESHOLDS = (100_000, 50, 1000)


def tune_gc() -> None:
    """Make garbage collection rare. The store keeps one long-lived object per group-partition
    (millions on big fleets) and the offsets-topic reader allocates per record; with the
    default thresholds the collector's passes over them took about 30 % of the store's ingest
    CPU (measured with synthetic commit batches). The service creates few reference cycles,
    so collecting rarely costs little memory. Already-loaded objects (modules, config) are
    frozen out of future collections."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def enable_crash_traces() -> None:
    """On a native crash (a segfault or abort inside librdkafka, say) print every thread's
    Python stack to stderr before the process dies, so the log says which client call it
    was: the only trace such a crash can leave."""
    faulthandler.enable(all_threads=True)

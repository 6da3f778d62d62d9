"""Process-wide settings of the running service (``kafka-monitor run``, the demo, and the
benchmarks that measure the service as it runs)."""

from __future__ import annotations

import ctypes
import faulthandler
import functools
import gc
import os
import sys

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


SWITCH_INTERVAL = 0.001


def tune_threads() -> None:
    """Hand the interpreter lock over sooner. The event loop serves requests while the
    evaluation and the offsets-topic reader run Python in their threads; a thread that wants
    the lock waits up to the switch interval for it (5 ms by default), at every wake-up of the
    loop, which set the tail latency of ``/status`` under load (bench/bench_vs_burrow.py)."""
    sys.setswitchinterval(SWITCH_INTERVAL)


def enable_crash_traces() -> None:
    """On a native crash (a segfault or abort inside librdkafka, say) print every thread's
    Python stack to stderr before the process dies, so the log says which client call it
    was: the only trace such a crash can leave."""
    faulthandler.enable(all_threads=True)


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
MALLOC_ARENAS = 2
MMAP_THRESHOLD = 256 * 1024
TRIM_THRESHOLD = 1024 * 1024


def tune_malloc() -> bool:
    """Have glibc give freed memory back. Each evaluation round allocates and frees arrays of
    tens of MB, and the reader and round threads each get their own malloc arena; glibc's
    defaults raise the mmap threshold after such frees (up to 32 MB), so later big arrays
    come from the arenas and their freed pages stay resident. At 100k group-partitions the
    service settled at 1,005 MB resident with the defaults and 607 MB with these settings
    (bench/bench_vs_burrow.py measures it). A fixed 256 KB mmap threshold returns every big
    array to the system when freed, two arenas bound the per-thread ones. Environment
    settings (``MALLOC_ARENA_MAX`` and the like) win. False where glibc is not the C library."""
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    wanted = {
        "MALLOC_ARENA_MAX": (_M_ARENA_MAX, MALLOC_ARENAS),
        "MALLOC_MMAP_THRESHOLD_": (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        "MALLOC_TRIM_THRESHOLD_": (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
    }
    for env, (param, value) in wanted.items():
        if env not in os.environ and mallopt(param, value) != 1:
            return False
    return True


def release_free_memory() -> bool:
    """Give the pages glibc holds free back to the system (``malloc_trim``). glibc returns
    memory on its own only from the top of a heap: the pages freed amid a heap (the
    offsets-topic reader's per-record objects during catch-up, each round's replies and
    rendered text) stay resident until reused. At 100k group-partitions after a real
    catch-up the service was 510 MB resident and 312 MB after one call, which took 4-18 ms
    (bench/bench_vs_burrow.py measures the effect). The service calls it after each
    evaluation round. False where glibc is not the C library."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 (both are glibc's)
    except (OSError, AttributeError):
        return None
    return libc

"""Process-wide settings (``monitor/runtime.py``), each in a fresh interpreter so that the
setting under test is the only one."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.harness.tools import ROOT

# What an evaluation round does to the heap: a big array freed (glibc then raises its mmap
# threshold to that size), then many mid-sized arrays, freed while small allocations made
# between them are still held. Prints the resident MB before and after.
_ROUNDS = """
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from monitor.runtime import tune_malloc
tuned = tune_malloc() if {tune} else None
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmRSS"))
big = np.ones(24 * 2**20 // 8); del big
before = rss()
arrays, kept = [], []
for _ in range(200):
    arrays.append(np.ones(2**20 // 8))
    kept.append(np.ones(512))  # small, long-lived, between the big ones
del arrays
print(json.dumps({{"tuned": tuned, "before": before, "after": rss()}}))
"""


def _run(tune: bool) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", _ROUNDS.format(root=str(ROOT), tune=tune)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def test_freed_arrays_are_given_back_to_the_system() -> None:
    """With glibc's defaults the 200 MB of freed 1 MB arrays stay resident (they came from
    the heap, below the raised mmap threshold); tuned, they are returned at once."""
    default, tuned = _run(tune=False), _run(tune=True)
    assert tuned["tuned"] is True
    assert default["after"] - default["before"] > 150, default
    assert tuned["after"] - tuned["before"] < 20, tuned


# What a round leaves behind on the heap: many reply-sized objects freed while one allocated
# after them is still held, so the free space is amid the heap, not at its top.
_AMID = """
import json, sys
sys.path.insert(0, {root!r})
from monitor.runtime import release_free_memory, tune_malloc
tune_malloc()
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmRSS"))
before = rss()
blobs = [bytes(4096) for _ in range(30_000)]
pin = bytes(4096)
del blobs
freed = rss()
released = release_free_memory()
print(json.dumps({{"before": before, "freed": freed, "after": rss(), "released": released}}))
"""


def test_memory_freed_amid_the_heap_is_released_after_a_round() -> None:
    """glibc keeps 120 MB freed below a live allocation resident; the service's call after
    each round (release_free_memory) gives it back."""
    out = subprocess.run([sys.executable, "-c", _AMID.format(root=str(ROOT))],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    m = json.loads(out)
    assert m["released"] is True
    assert m["freed"] - m["before"] > 100, m  # freed, yet resident
    assert m["after"] - m["before"] < 20, m

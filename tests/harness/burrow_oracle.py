"""Burrow's rules for one partition, written plainly from the reference README: the oracle
the vectorised rules are checked against (tests/unit/rules/test_status.py) and timed against
(bench/bench_evaluator.py)."""

from __future__ import annotations

from monitor.rules import Status

__all__ = ["reference_partition"]


def reference_partition(
    offsets: list[int],
    ts: list[int],
    lags: list[int | None],
    current_lag: int,
    broker: list[int],
    now_ms: float,
    allowed: int,
) -> Status:
    """Burrow's rules for one partition, read straight from the reference README."""
    if not offsets or current_lag <= allowed:
        return Status.OK
    if (now_ms - ts[-1]) > (ts[-1] - ts[0]) and not any(b <= offsets[-1] for b in broker):
        return Status.STOP
    for i in range(1, len(offsets)):
        if offsets[i] < offsets[i - 1]:
            if not any(o >= offsets[i - 1] for o in offsets[i:]):
                return Status.REWIND
            break
    if all(lag is None or lag > allowed for lag in lags):
        if all(offsets[i] == offsets[i - 1] for i in range(1, len(offsets))):
            return Status.STALL
        known = [lag for lag in lags if lag is not None]
        if all(b >= a for a, b in zip(known, known[1:], strict=False)):
            return Status.WARN
    return Status.OK

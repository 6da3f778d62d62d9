"""Retention risk: how close retention is to deleting records a group has not read.

Per group-partition, vectorised like the status rules:

* **lead** = committed offset - log-start offset: how many records stand between the oldest
  record retention keeps and the group's position. Negative when the log start has passed the
  committed offset.
* **lost** = log start - committed offset when the log start has passed it (and the group has
  lag): those records were deleted before the group read them. A consumer restarting from
  there resets (``auto.offset.reset``) and skips them.
* **time to loss**: the log start gains on the committed offset at the log start's advance
  rate minus the group's consumption rate. The log start's rate is measured from its first
  observed change to now (it moves in steps, as segments go); the consumption over the commit
  window, and taken as 0 where the partition is STOP or STALL (nobody reads it). The lead
  divided by that gain is the time until the first unread record is deleted. There is none
  when the group has no lag (it has read everything), when the log start has not moved, or
  when the consumer keeps pace with retention.

  Keeping pace: a partition the status rules find OK has a lag that is not growing, so its
  consumer reads as fast as producers write, and retention cannot delete faster than that for
  long. On a topic at its retention limit the two rates are equal, and comparing their
  measurements would be comparing noise (the log start moves a segment at a time), so an OK
  partition keeps pace by definition. Otherwise (WARN: falling behind; STOP, STALL: not
  reading) the rates are compared, and a consumer gaining less than ``PACE`` of the log
  start's rate still keeps pace; a consuming partition with a single commit has no rate yet.

``risk``: LOST with records lost, WARN when the time to loss is below ``warn_s``, else OK.
Retention deletes whole segments, so the loss comes at the next segment deletion after the
estimate's time: the estimate errs early, which is the right side for a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

RISK_NAMES = ("OK", "WARN", "LOST")
OK, WARN, LOST = 0, 1, 2

PACE = 0.1
"""A consumer slower than the log start by less than this fraction of its rate keeps pace."""

REASONS = (
    None,
    "caught up",
    "records already lost",
    "log start not advancing",
    "consumer keeps pace with retention",
    "log start not known",
    "consumption rate not known yet",
)
"""Why a partition has no time to loss (index = ``RetentionArrays.reason``; 0: it has one)."""


@dataclass(frozen=True, slots=True)
class RetentionArrays:
    lead: IntArray  # committed - log start (0 where the log start is unknown)
    lost: IntArray
    time_to_loss: FloatArray  # seconds, NaN where not estimable
    reason: npt.NDArray[np.int8]  # index into REASONS
    risk: npt.NDArray[np.int8]  # OK, WARN, LOST
    log_start_rate: FloatArray  # offsets/s
    known: npt.NDArray[np.bool_]  # the log start is known


def advance_rate(newest: IntArray, first: IntArray, first_ms: IntArray, now_ms: float
                 ) -> FloatArray:
    """Offsets per second from ``first`` (observed at ``first_ms``) to ``newest``, up to now;
    0 where unknown (``first_ms`` < 0) or no time has passed."""
    span = (now_ms - first_ms.astype(np.float64)) / 1000.0
    ok = (first_ms >= 0) & (span > 0)
    return np.where(ok, (newest - first) / np.where(ok, span, 1.0), 0.0)


def retention_risk(
    committed: IntArray,
    lag: IntArray,
    log_start: IntArray,
    log_start_rate: FloatArray,
    consume_rate: FloatArray,
    warn_s: float,
    keeps_pace: npt.NDArray[np.bool_] | None = None,
) -> RetentionArrays:
    """The risk per row; ``log_start`` -1 where unknown (risk OK, reason "not known");
    ``consume_rate`` NaN where not known yet; ``keeps_pace`` where the status rules say the
    consumer keeps up (no estimate there)."""
    pace = np.zeros(committed.shape, dtype=bool) if keeps_pace is None else keeps_pace
    known = log_start >= 0
    lead = np.where(known, committed - log_start, 0)
    behind = lag > 0
    lost = np.where(known & behind, np.maximum(-lead, 0), 0)
    rate_known = np.isfinite(consume_rate)
    gain = log_start_rate - np.where(rate_known, consume_rate, 0.0)
    gaining = (gain > PACE * log_start_rate) & ~pace
    est = known & behind & (lost == 0) & (log_start_rate > 0) & rate_known & gaining
    with np.errstate(divide="ignore", invalid="ignore"):
        ttl = np.where(est, lead / np.where(est, gain, 1.0), np.nan)
    reason = np.select(
        [~known, lost > 0, ~behind, log_start_rate <= 0, pace, ~rate_known, ~gaining],
        [5, 2, 1, 3, 4, 6, 4],
        0,
    ).astype(np.int8)
    risk = np.where(lost > 0, LOST, np.where(est & (ttl < warn_s), WARN, OK)).astype(np.int8)
    return RetentionArrays(lead.astype(np.int64), lost.astype(np.int64), ttl, reason, risk,
                           log_start_rate.astype(np.float64), known)

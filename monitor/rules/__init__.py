"""The evaluator's pure core: Burrow's partition and group rules and lag in seconds, as
functions over numpy arrays. No I/O and no Kafka, so the service and the Spark pipeline call
the same code; the store-to-arrays adapter is store/windows.py."""

from monitor.rules.lag_seconds import (
    LagSeconds,
    LeoHistory,
    collapse_flat,
    group_lag_seconds,
    lag_seconds,
)
from monitor.rules.status import (
    BurrowStatus,
    GroupIndex,
    GroupResults,
    PartitionResults,
    PartitionWindows,
    RuleOptions,
    Status,
    evaluate,
    evaluate_groups,
    evaluate_partitions,
    to_burrow,
)

__all__ = [
    "BurrowStatus",
    "GroupIndex",
    "GroupResults",
    "LagSeconds",
    "LeoHistory",
    "PartitionResults",
    "PartitionWindows",
    "RuleOptions",
    "Status",
    "collapse_flat",
    "evaluate",
    "evaluate_groups",
    "evaluate_partitions",
    "group_lag_seconds",
    "lag_seconds",
    "to_burrow",
]

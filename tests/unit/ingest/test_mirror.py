"""The mirror collector's window counts through a real store with chosen observation times (no
Kafka): a burst placed exactly where the first window would otherwise cut it. On two real
clusters mirrored by MirrorMaker: tests/integration/ingest/test_mirror.py."""

from __future__ import annotations

from monitor.config import parse_config
from monitor.ingest.mirror import MirrorCollector
from monitor.model.observations import BrokerOffsets
from monitor.store.store import Store

MIRROR = "dr"


def test_window_sum_starts_at_zero_when_the_first_window_would_cut_a_burst() -> None:
    """A healthy mirror (1 s latency, count_delay 4 s) copies a burst of 50 records written
    just after the first window boundary: counted at the source's first window but reaching
    the destination before the destination's (delayed) window opens. Anchored at the first
    quiet boundary instead, the sum is 0 until a real loss, then exactly that loss."""
    config = parse_config({
        "clusters": [{"name": "src", "bootstrap_servers": ["127.0.0.1:1"]},
                     {"name": "dst", "bootstrap_servers": ["127.0.0.1:2"]}],
        "mirrors": [{"name": MIRROR, "source": "src", "destination": "dst",
                     "topics": ["orders"], "canary": False,
                     "count_window": "10s", "count_delay": "4s"}],
    })
    store = Store()
    collector = MirrorCollector(config.mirrors[0], 1.0, store)

    def source_end(t: int) -> int:  # 50 records at 1001, 30 more at 1031 (never mirrored)
        return 100 + 50 * (t >= 1001) + 30 * (t >= 1031)

    def destination_end(t: int) -> int:  # another log start (offset 7), the burst 1 s later
        return 7 + 100 + 50 * (t >= 1002)

    sums = {}
    for t in range(995, 1080):
        for cluster, end in (("src", source_end(t)), ("dst", destination_end(t))):
            store.put_broker_offsets(BrokerOffsets(cluster, float(t), ["orders", "orders"],
                                                   [0, 1], [0, 0], [end - 40, 40]))
        collector.collect()
        sums[t] = collector.snapshot()["topics"][0]["window_difference_sum"]
    windows = collector.snapshot()["windows"]
    assert windows and windows[0]["start"] == 1010.0  # 1000 would have cut the burst
    # The window [1030, 1040) holding the loss closes once the destination is seen at 1044.
    assert all(total == 0 for t, total in sums.items() if t < 1044), sums
    assert sums[1079] == 30
    assert [w["difference"] for w in windows if w["difference"]] == [30]

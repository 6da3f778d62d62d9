"""librdkafka's repeated connection-failure lines are limited to one a minute per kind."""

from __future__ import annotations

import logging
import time

from monitor.logs import RepeatLimit


def record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("monitor.kafka", level, __file__, 1, message, None, None)


def line(client: int, port: int, ms: int) -> logging.LogRecord:
    return record(f"FAIL [kafka-monitor-a#producer-{client}] [thrd:ssl://127.0.0.1:{port}/"
                  f"bootstrap]: SSL handshake failed: certificate verify failed "
                  f"(after {ms}ms in state SSL_HANDSHAKE)")


def test_one_line_per_kind_per_window_then_the_count_held_back() -> None:
    limit = RepeatLimit(window=0.2)
    assert limit.filter(line(262, 48923, 2))
    held = [limit.filter(line(262 + i, 48923 + i, i)) for i in range(50)]
    assert not any(held)
    other = record("FAIL [kafka-monitor-a#producer-1] Connection refused")
    assert limit.filter(other)  # another kind is not held back by the first
    assert not limit.filter(record("FAIL [kafka-monitor-a#producer-9] Connection refused"))
    time.sleep(0.25)
    again = line(300, 40000, 9)
    assert limit.filter(again) and again.repeats_suppressed == 50  # type: ignore[attr-defined]
    assert limit.filter(record("same text, another level", logging.WARNING))

"""Structured logging: one JSON object per line on stderr (or plain text for humans).

Structured lines let operators ship the service's logs to any aggregator and filter by cluster,
collector or event without regexes. Extra context goes in ``extra={...}``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from typing import Any

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(
            f"{k}={v}" for k, v in vars(record).items()
            if k not in _RESERVED and not k.startswith("_")
        )
        base = f"{self.formatTime(record)} {record.levelname:<7} {record.name}: "
        text = base + record.getMessage() + (f" [{extras}]" if extras else "")
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def setup_logging(level: str = "INFO", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # apscheduler logs every job run at INFO; our own collector logs say what matters.
    logging.getLogger("apscheduler").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(max(logging.WARNING, root.level))


class RepeatLimit(logging.Filter):
    """At most one line per ``window`` seconds for each kind of repeated message.

    librdkafka logs every failed connection attempt, and while a cluster is unreachable (a TLS
    handshake refused, a broker down) that is dozens of identical lines a second from every
    client. The first line of a kind goes through; the same kind is then held back for
    ``window`` seconds, and the next one that passes says how many were held back
    (``repeats_suppressed``). The kind ignores what changes between attempts: client instance
    names, ports and timings (``#producer-262``, ``:48923``, ``after 2ms``)."""

    _VARYING = re.compile(r"#\w+-\d+|:\d{2,5}\b|\d+(\.\d+)?m?s\b|\d+")

    def __init__(self, window: float = 60.0) -> None:
        super().__init__()
        self.window = window
        self._lock = threading.Lock()
        self._seen: dict[tuple[int, str], tuple[float, int]] = {}  # kind -> (passed at, held)

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.levelno, self._VARYING.sub("", record.getMessage()))
        now = time.monotonic()
        with self._lock:
            passed_at, held = self._seen.get(kind, (-self.window, 0))
            if now - passed_at < self.window:
                self._seen[kind] = (passed_at, held + 1)
                return False
            if len(self._seen) > 10_000:  # bounded: kinds are few, but never trust that
                self._seen.clear()
            self._seen[kind] = (now, 0)
        if held:
            record.repeats_suppressed = held
        return True

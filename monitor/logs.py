"""Structured logging: one JSON object per line on stderr (or plain text for humans).

Structured lines let operators ship the service's logs to any aggregator and filter by cluster,
collector or event without regexes. Extra context goes in ``extra={...}``.
"""

from __future__ import annotations

import json
import logging
import sys
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

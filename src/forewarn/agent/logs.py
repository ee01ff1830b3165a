"""JSON lines: one object per log record, with the event's fields as keys.

Machine-readable first, because the agent's log is what an operator searches after a
maintenance night ("which hook failed for which EventId?"). Every line has ``ts`` (UTC, ISO
8601), ``level`` and ``msg``; the rest are the fields the call gave.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def _now() -> datetime:
    return datetime.now(UTC)


class JsonLog:
    """Writes records at or above ``level`` to ``stream``; safe from several threads."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        level: str = "info",
        now: Callable[[], datetime] = _now,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.threshold = LEVELS[level]
        self._now = now
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] | None = None  # set to a list to keep them too

    def log(self, level: str, msg: str, **fields: Any) -> None:
        if LEVELS[level] < self.threshold:
            return
        record: dict[str, Any] = {
            "ts": self._now().isoformat(timespec="milliseconds"),
            "level": level,
            "msg": msg,
        }
        record.update(fields)
        line = json.dumps(record, default=str, ensure_ascii=False)
        with self._lock:
            if self.records is not None:
                self.records.append(record)
            self.stream.write(line + "\n")
            self.stream.flush()

    def debug(self, msg: str, **fields: Any) -> None:
        self.log("debug", msg, **fields)

    def info(self, msg: str, **fields: Any) -> None:
        self.log("info", msg, **fields)

    def warning(self, msg: str, **fields: Any) -> None:
        self.log("warning", msg, **fields)

    def error(self, msg: str, **fields: Any) -> None:
        self.log("error", msg, **fields)


__all__ = [
    "LEVELS",
    "JsonLog",
]

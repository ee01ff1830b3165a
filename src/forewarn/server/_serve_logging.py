"""``forewarn serve``'s log: operations and state changes at info, each VM request at debug.

Lines go to standard error, as text (``2026-11-24T00:00:00Z info forewarn.events: ...``) or
as one JSON object per line (``--log-format json``) for log collectors. The platform's own
transitions (an event Scheduled, Started, gone) are found by comparing what the service
holds between looks, so they are logged whatever moved the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Callable

from forewarn.domain.platform import EventView
from forewarn.storage.errors import StoreUnavailableError

__all__ = ["configure_logging", "watch_events"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
_LEVELS["error"] = logging.ERROR
EVENTS = logging.getLogger("forewarn.events")
_WATCH_INTERVAL = 0.25


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        return json.dumps(line, separators=(",", ":"))


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        fields = " ".join(f"{k}={v}" for k, v in getattr(record, "fields", {}).items())
        text = f"{stamp} {record.levelname.lower()} {record.name}: {record.getMessage()}"
        return f"{text} {fields}" if fields else text


def configure_logging(level: str, log_format: str, **every_line: object) -> None:
    """Route the ``forewarn`` loggers to standard error at ``level`` in ``log_format``;
    ``every_line``: fields added to every line (``serve --workers``: which worker wrote it)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if log_format == "json" else _TextFormatter())
    if every_line:
        handler.addFilter(_WithFields(every_line))
    root = logging.getLogger("forewarn")
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS[level])
    root.propagate = False


class _WithFields(logging.Filter):
    def __init__(self, fields: dict[str, object]) -> None:
        super().__init__()
        self._fields = fields

    def filter(self, record: logging.LogRecord) -> bool:
        record.fields = {**getattr(record, "fields", {}), **self._fields}
        return True


def log(logger: logging.Logger, level: int, message: str, **fields: object) -> None:
    """``message`` with structured ``fields`` (keys of the JSON line, ``k=v`` in text)."""
    if logger.isEnabledFor(level):
        logger.log(level, message, extra={"fields": fields})


async def watch_events(events: Callable[[], tuple[EventView, ...]], stop: asyncio.Event) -> None:
    """Log each event's appearance, start and end, until ``stop`` is set."""
    known: dict[str, str] = {}
    while not stop.is_set():
        # While the platform is being rebuilt from its journal it is looked at next time.
        with contextlib.suppress(StoreUnavailableError):
            known = _log_changes(known, events())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _WATCH_INTERVAL)


def _log_changes(known: dict[str, str], events: tuple[EventView, ...]) -> dict[str, str]:
    """Log how ``events`` differ from the statuses ``known`` by EventId; their statuses."""
    current = {view.event.event_id: view for view in events}
    for event_id, view in current.items():
        status = view.event.status.value
        if known.get(event_id) != status:
            event = view.event
            log(
                EVENTS,
                logging.INFO,
                f"event {status}",
                event_id=event_id,
                type=event.event_type.value,
                resources=",".join(r.name for r in event.resources),
            )
    for event_id in known.keys() - current.keys():
        log(EVENTS, logging.INFO, "event gone", event_id=event_id)
    return {event_id: view.event.status.value for event_id, view in current.items()}

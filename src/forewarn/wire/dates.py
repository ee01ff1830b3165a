"""RFC 1123 dates as Scheduled Events prints NotBefore: ``Mon, 19 Sep 2016 18:29:47 GMT``."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime


def format_not_before(moment: datetime | None) -> str:
    """NotBefore text: RFC 1123 in GMT with the right weekday, or ``""`` once Started."""
    if moment is None:
        return ""
    return _rfc1123(moment)


@functools.lru_cache(maxsize=1024)
def _rfc1123(moment: datetime) -> str:
    """Cached: the events of one job share their NotBefore, and each is encoded for every VM
    shown it and every api-version asked for."""
    return format_datetime(moment.astimezone(UTC), usegmt=True)


def parse_not_before(text: str) -> datetime | None:
    """The inverse of :func:`format_not_before` (for clients reading documents)."""
    if text == "":
        return None
    return parsedate_to_datetime(text).astimezone(UTC)


__all__ = [
    "format_not_before",
    "parse_not_before",
]

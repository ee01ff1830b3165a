"""Durations as people type them: ``90``, ``90s``, ``15m``, ``1h30m``, ``7d``.

Shared by the CLI (``forewarn clock advance 15m``) and scenario files (``advance: 10m``), so
both accept exactly the same spellings.
"""

from __future__ import annotations

import re
from datetime import timedelta

_DURATION = re.compile(
    r"^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$"
)
#: Far beyond any notice the platform gives (7 days), far below datetime's limits.
MAX_DURATION = timedelta(days=365 * 100)


def parse_duration(text: str) -> timedelta:
    """The duration ``text`` spells; ValueError naming the accepted forms otherwise."""
    stripped = text.strip()
    match = _DURATION.match(stripped)
    if not stripped or match is None:
        raise ValueError(f"{text!r} is not a duration like 90s, 15m, 1h30m or 7d")
    days, hours, minutes, seconds = (float(group) if group else 0.0 for group in match.groups())
    duration = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if duration > MAX_DURATION:
        raise ValueError(f"{text!r} is longer than {MAX_DURATION.days} days")
    return duration


def format_duration(duration: timedelta) -> str:
    """The shortest spelling :func:`parse_duration` reads back: ``1h30m``, ``2.5s``."""
    seconds = duration.total_seconds()
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        whole = int(seconds // size)
        if whole:
            parts.append(f"{whole}{unit}")
            seconds -= whole * size
    if seconds or not parts:
        parts.append(f"{seconds:g}s")
    return "".join(parts)


__all__ = [
    "MAX_DURATION",
    "format_duration",
    "parse_duration",
]

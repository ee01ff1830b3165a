"""Durations as people type them: ``90``, ``90s``, ``15m``, ``1h30m``, ``7d``.

Shared by the CLI (``forewarn clock advance 15m``) and scenario files (``advance: 10m``), so
both accept exactly the same spellings.
"""

from __future__ import annotations

import re
from datetime import timedelta

from forewarn.domain.clock import LONGEST

_DURATION = re.compile(
    r"^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$"
)
#: The domain's bound on any duration (:data:`forewarn.domain.clock.LONGEST`).
MAX_DURATION = LONGEST
#: Characters a number of a duration may have: more can only be past MAX_DURATION, and a
#: long enough one would cost time to convert.
_MAX_DIGITS = 20


def parse_duration(text: str) -> timedelta:
    """The duration ``text`` spells; ValueError naming the accepted forms otherwise."""
    stripped = text.strip()
    match = _DURATION.match(stripped)
    if not stripped or match is None:
        raise ValueError(f"{_brief(text)} is not a duration like 90s, 15m, 1h30m or 7d")
    too_long = ValueError(f"{_brief(text)} is longer than {MAX_DURATION.days} days")
    if any(group and len(group) > _MAX_DIGITS for group in match.groups()):
        raise too_long
    days, hours, minutes, seconds = (float(group) if group else 0.0 for group in match.groups())
    try:
        duration = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise too_long from None
    if duration > MAX_DURATION:
        raise too_long
    return duration


def _brief(text: str, limit: int = 40) -> str:
    """``text`` quoted, cut short: an error line names a 5,000-digit value, not all of it."""
    return repr(text) if len(text) <= limit else repr(text[: limit - 3] + "...")


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

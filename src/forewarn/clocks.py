"""Clocks that read real time: the adapters beside the domain's pure :class:`ManualClock`."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from forewarn.domain.clock import LATEST, Clock, ManualClock, ensure_utc


class SystemClock:
    """The machine's UTC time."""

    def __init__(self) -> None:
        # Read on every request: the C function itself, without a method around it.
        self.now: Callable[[], datetime] = functools.partial(datetime.now, UTC)


class ScaledClock:
    """Real time sped up: ``factor`` platform seconds pass per real second from ``start``.

    It stops at :data:`~forewarn.domain.clock.LATEST`: however long it runs and however fast,
    every date the platform prints stays printable (a clock that ran on would break every
    request for good).
    """

    def __init__(
        self,
        factor: float,
        start: datetime | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError("the scale factor must be a positive number")
        self.factor = factor
        self._start = ensure_utc(start) if start is not None else datetime.now(UTC)
        #: Platform seconds from the start to LATEST, where the clock stops.
        self._room = (LATEST - self._start).total_seconds()
        self._monotonic = monotonic
        self._origin = monotonic()

    def now(self) -> datetime:
        elapsed = (self._monotonic() - self._origin) * self.factor
        if elapsed >= self._room:
            return LATEST
        return self._start + timedelta(seconds=elapsed)


def make_clock(kind: str, *, scale: float = 60.0, start: datetime | None = None) -> Clock:
    """``system``, ``scaled`` or ``manual``; a manual clock starts now unless told otherwise."""
    if kind == "system":
        return SystemClock()
    if kind == "scaled":
        return ScaledClock(scale, start)
    if kind == "manual":
        return ManualClock(start or datetime.now(UTC).replace(microsecond=0))
    raise ValueError(f"unknown clock {kind!r}: choose system, scaled or manual")


__all__ = [
    "ScaledClock",
    "SystemClock",
    "make_clock",
]

"""Opening the platform's state: a fresh fleet, or the one a data directory already holds.

The journal's metadata pins what replay depends on (the fleet file's text, the EventId seed,
the timing profile and when the platform was created), so a restart rebuilds the very same
platform; starting a data directory with another fleet, seed or profile is refused rather than
silently replaying history onto a different world.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from forewarn.clocks import make_clock
from forewarn.config.fleet import Fleet, default_fleet, parse_fleet, read_fleet_text
from forewarn.domain.timing import PROFILES
from forewarn.errors import ForewarnError
from forewarn.service import ScheduledEventsService, platform_for_fleet

if TYPE_CHECKING:
    from forewarn.storage import Journal

SQLITE_FILE = "forewarn.sqlite3"


class ServeSettings(Protocol):
    """What opening the state reads of ``forewarn serve``'s settings.

    :class:`forewarn.server.runner.ServeSettings` provides it; naming only the fields used here
    keeps this module from importing the runner, which imports this module.
    """

    @property
    def fleet(self) -> Path | None: ...
    @property
    def clock(self) -> str: ...
    @property
    def scale(self) -> float: ...
    @property
    def profile(self) -> str | None: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def data_dir(self) -> Path | None: ...
    @property
    def store(self) -> str | None: ...
    @property
    def timing_overrides(self) -> tuple[tuple[str, timedelta], ...]: ...


class StateMismatchError(ForewarnError):
    """The data directory holds another platform's history."""


@dataclass(frozen=True)
class _Pinned:
    fleet_text: str | None
    fleet_source: str
    seed: int
    profile: str
    timing: str
    created_at: datetime | None


def _timing_text(overrides: tuple[tuple[str, timedelta], ...]) -> str:
    """Overrides in a canonical text form, so two runs can be compared."""
    return ";".join(f"{key}={value.total_seconds():g}" for key, value in sorted(overrides))


def _parse_timing_text(text: str) -> dict[str, timedelta]:
    pairs = (item.split("=", 1) for item in text.split(";") if item)
    return {key: timedelta(seconds=float(value)) for key, value in pairs}


def store_url(settings: ServeSettings) -> str | None:
    if settings.store is not None:
        return settings.store
    if settings.data_dir is not None:
        return f"sqlite:///{(settings.data_dir / SQLITE_FILE).resolve()}"
    return None


def _pin(settings: ServeSettings, journal: Journal | None) -> _Pinned:
    meta = journal.metadata() if journal is not None else {}
    given_text = read_fleet_text(settings.fleet) if settings.fleet else None
    where = store_url(settings) or "memory"
    fleet_text: str | None = meta.get("fleet", given_text)
    if "fleet" in meta and given_text is not None and given_text != meta["fleet"]:
        raise StateMismatchError(
            f"{where} holds the state of another fleet ({meta.get('fleet_source', '?')}); "
            f"start it with that fleet file, or use another data directory"
        )
    given_timing = _timing_text(settings.timing_overrides) if settings.timing_overrides else None
    for key, given in (
        ("seed", settings.seed),
        ("profile", settings.profile),
        ("timing", given_timing),
    ):
        if key in meta and given is not None and str(given) != meta[key]:
            raise StateMismatchError(f"{where} was created with {key} {meta[key]}, not {given}")
    seed = (
        int(meta["seed"])
        if "seed" in meta
        else (
            settings.seed if settings.seed is not None else random.SystemRandom().randrange(2**63)
        )
    )
    created = meta.get("created_at")
    return _Pinned(
        fleet_text=fleet_text if fleet_text != "" else None,
        fleet_source=meta.get("fleet_source", str(settings.fleet or "default")),
        seed=seed,
        profile=meta.get("profile", settings.profile or "documented"),
        timing=meta.get("timing", given_timing or ""),
        created_at=datetime.fromisoformat(created) if created else None,
    )


def open_service(settings: ServeSettings) -> ScheduledEventsService:
    """Build the service, replaying the journal of ``settings``' store if it has one."""
    journal: Journal | None = None
    url = store_url(settings)
    if url is not None:
        from forewarn.storage import open_journal

        if settings.data_dir is not None:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        journal = open_journal(url)
    try:
        return _build(settings, journal)
    except BaseException:
        if journal is not None:
            journal.close()  # refused or broken: free the store for the next attempt
        raise


def _build(settings: ServeSettings, journal: Journal | None) -> ScheduledEventsService:
    pinned = _pin(settings, journal)
    if pinned.fleet_text is None:
        fleet: Fleet = default_fleet()
    else:
        fleet = parse_fleet(pinned.fleet_text, pinned.fleet_source)
    clock = make_clock(settings.clock, scale=settings.scale, start=pinned.created_at)
    created_at = pinned.created_at or clock.now()
    timing = PROFILES[pinned.profile]
    if pinned.timing:
        timing = timing.with_overrides(_parse_timing_text(pinned.timing))
    platform = platform_for_fleet(fleet, created_at, timing=timing, seed=pinned.seed)
    if journal is not None and pinned.created_at is None:
        journal.set_metadata("fleet", pinned.fleet_text or "")
        journal.set_metadata("fleet_source", pinned.fleet_source)
        journal.set_metadata("seed", str(pinned.seed))
        journal.set_metadata("profile", pinned.profile)
        journal.set_metadata("timing", pinned.timing)
        journal.set_metadata("created_at", created_at.isoformat())
    service = ScheduledEventsService(platform, clock, journal)
    service.replay()
    return service


def describe_store(settings: ServeSettings) -> str:
    if settings.store is not None:
        return settings.store.split("@")[-1]
    if settings.data_dir is not None:
        return str(Path(settings.data_dir) / SQLITE_FILE)
    return "memory (lost on exit; use --data-dir to keep it)"


__all__ = [
    "SQLITE_FILE",
    "StateMismatchError",
    "describe_store",
    "open_service",
    "store_url",
]

"""Opening the platform's state: a fresh fleet, or the one a data directory already holds.

The journal's metadata pins what replay depends on (the fleet file's text, the EventId seed,
the timing profile and when the platform was created), so a restart rebuilds the very same
platform; starting a data directory with another fleet, seed or profile is refused rather than
silently replaying history onto a different world.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from forewarn.clocks import make_clock
from forewarn.commands import MAX_AT_CHARS
from forewarn.config.fleet import Fleet, default_fleet, parse_fleet, read_fleet_text
from forewarn.domain.history import Listener
from forewarn.domain.ids import EventIdFactory, JournalEventIds, NewEventId
from forewarn.domain.platform import Platform
from forewarn.domain.timing import PROFILES, TimingProfile
from forewarn.errors import ForewarnError
from forewarn.journal_replay import Applied, NewPlatform, replay_journal
from forewarn.service import ScheduledEventsService, platform_for_fleet
from forewarn.storage.errors import CorruptStoreError, StoreUnavailableError
from forewarn.writer import JournalWriter

if TYPE_CHECKING:
    from forewarn.cluster.replica import Replica
    from forewarn.storage import Journal

SQLITE_FILE = "forewarn.sqlite3"
#: The ``event_ids`` metadata of stores whose EventIds come from journal positions.
EVENT_IDS_BY_JOURNAL = "journal"


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
    def start(self) -> datetime | None: ...
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
    #: A shared store's clock kind (:func:`clock_kind`), None for a store of one writer.
    clock: str | None
    fleet_text: str | None
    fleet_source: str
    seed: int
    profile: str
    timing: str
    created_at: datetime | None
    #: How EventIds are made (metadata ``event_ids``): ``journal`` for the stores created
    #: since front-ends can share one (domain.ids.JournalEventIds), ``seeded`` for older ones.
    event_ids: str


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


def _shown_url(url: str) -> str:
    """A store URL as messages show it: without whatever precedes the host (a password)."""
    return url.split("@")[-1]


def url_without_password(url: str) -> str:
    """``url`` whole but for its password (in the user part or the query), for a message
    that must say which store it means."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"], safe="/")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@contextmanager
def reaching_the_store(url: str | None) -> Iterator[None]:
    """Start-up's one line for a PostgreSQL store that cannot be reached, whichever part of
    the server met it first (the journal, or Event Grid's state beside it): the store, its
    URL without the password, the reason, and what to check."""
    try:
        yield
    except StoreUnavailableError as exc:
        if url is None or not is_shared(url) or not _unreachable(exc.__cause__):
            raise
        first = str(exc.__cause__).splitlines()[0] if str(exc.__cause__) else ""
        reason = " ".join(first.rpartition("failed: ")[2].split()) or type(exc.__cause__).__name__
        raise StoreUnavailableError(
            f"cannot reach the store {url_without_password(url)}: {reason}; "
            "is PostgreSQL running? check --store/FOREWARN_STORE"
        ) from exc


def _unreachable(cause: BaseException | None) -> bool:
    """Whether the driver could not reach the server (rather than refusing a statement)."""
    if cause is None or not type(cause).__module__.startswith("psycopg"):
        return False
    import psycopg

    return isinstance(cause, psycopg.OperationalError)


#: The longest seed a store may pin (Python turns no longer text into an int by default).
_MAX_SEED_DIGITS = 4300
_SEED = re.compile(r"-?[0-9]+")
_CLOCK = re.compile(r"system|manual|scaled x[0-9.e+-]{1,32}")
#: The longest duration a stored timing override may hold, as ``serve --timing`` allows.
_MAX_TIMING_SECONDS = 100 * 365 * 86400


def _check_metadata(meta: dict[str, str], where: str) -> None:
    """The store's pinned values as a store written by forewarn holds them, or
    :class:`~forewarn.storage.CorruptStoreError` naming the first that is not: the metadata
    is untrusted input, as the records are."""

    def damaged(key: str, expected: str) -> CorruptStoreError:
        value = meta[key]
        shown = repr(value) if len(value) <= 60 else f"{value[:57]!r}..."
        return CorruptStoreError(
            f"{where} holds damaged metadata: {key} is {shown}, not {expected}; keep the "
            "store for inspection and start with a new one"
        )

    if "created_at" in meta and "seed" not in meta:
        # every store forewarn made pins its seed as it records its creation: without it,
        # each start would draw another, and show the same events under other EventIds
        raise CorruptStoreError(
            f"{where} holds damaged metadata: seed is missing; keep the store for inspection "
            "and start with a new one"
        )
    seed = meta.get("seed")
    if seed is not None and (len(seed) > _MAX_SEED_DIGITS or not _SEED.fullmatch(seed)):
        raise damaged("seed", "an integer")
    if "clock" in meta and not _CLOCK.fullmatch(meta["clock"]):
        raise damaged("clock", "system, manual or scaled xN")
    if "profile" in meta and meta["profile"] not in PROFILES:
        raise damaged("profile", f"one of {', '.join(PROFILES)}")
    if "event_ids" in meta and meta["event_ids"] not in (EVENT_IDS_BY_JOURNAL, "seeded"):
        raise damaged("event_ids", f"{EVENT_IDS_BY_JOURNAL} or seeded")
    created = meta.get("created_at")
    if created is not None:
        try:
            moment = datetime.fromisoformat(created) if len(created) <= MAX_AT_CHARS else None
        except ValueError:
            moment = None
        if moment is None or moment.utcoffset() is None:
            raise damaged("created_at", "an ISO 8601 time with its UTC offset")
    if meta.get("timing"):
        try:
            overrides = _parse_timing_text(meta["timing"])
            if not all(
                0 <= value.total_seconds() <= _MAX_TIMING_SECONDS for value in overrides.values()
            ):
                raise ValueError("out of range")
            PROFILES[meta.get("profile", "documented")].with_overrides(overrides)
        except (ValueError, OverflowError):
            raise damaged("timing", "overrides of the timing profile (NAME=SECONDS;...)") from None


def _another_store(settings: ServeSettings) -> str:
    """How to start afresh beside the store ``settings`` name, in its own terms: a
    PostgreSQL namespace, a data directory, or a SQLite file."""
    url = store_url(settings) or ""
    if is_shared(url):
        return "another namespace (--store ...?namespace=NAME)"
    if settings.data_dir is not None:
        return "another data directory (--data-dir)"
    return "another store (--store)"


def clock_kind(settings: ServeSettings) -> str:
    """The clock a front-end runs on, as a shared store pins it: ``system``, ``manual``, or
    ``scaled xN`` (a scaled clock's speed is part of what the front-ends must share)."""
    if settings.clock == "scaled":
        return f"scaled x{settings.scale:g}"
    return settings.clock


def _pin(
    settings: ServeSettings, meta: dict[str, str], where: str, *, shared: bool = False
) -> _Pinned:
    """What the store pins, checked (:func:`_check_metadata`) and compared with what
    ``settings`` give; with ``shared`` (front-ends of one PostgreSQL namespace) the clock's
    kind is pinned and compared too, as one front-end's manual clock and another's system
    clock cannot make one fleet's time."""
    _check_metadata(meta, where)
    if shared and "clock" in meta and meta["clock"] != clock_kind(settings):
        option = meta["clock"].replace(" x", " --scale ")
        raise StateMismatchError(
            f"{where} is served on a {meta['clock']} clock, not {clock_kind(settings)}: "
            f"start every front-end of its fleet with --clock {option}, or use "
            f"{_another_store(settings)}"
        )
    given_text = read_fleet_text(settings.fleet) if settings.fleet else None
    fleet_text: str | None = meta.get("fleet", given_text)
    if "fleet" in meta and given_text is not None and given_text != meta["fleet"]:
        raise StateMismatchError(
            f"{where} holds the state of another fleet ({meta.get('fleet_source', '?')}); "
            f"start it with that fleet file, or use {_another_store(settings)}"
        )
    given_timing = _timing_text(settings.timing_overrides) if settings.timing_overrides else None
    for key, given in (
        ("seed", settings.seed),
        ("profile", settings.profile),
        ("timing", given_timing),
    ):
        if key in meta and given is not None and str(given) != meta[key]:
            raise StateMismatchError(
                f"{where} was created with {key} {meta[key]}, not {given}: leave out "
                f"--{key} (the store keeps its own), or use {_another_store(settings)}"
            )
    seed = (
        int(meta["seed"])
        if "seed" in meta
        else (
            settings.seed if settings.seed is not None else random.SystemRandom().randrange(2**63)
        )
    )
    created = meta.get("created_at")
    scheme = meta.get("event_ids", EVENT_IDS_BY_JOURNAL if created is None else "seeded")
    return _Pinned(
        clock=clock_kind(settings) if shared else None,
        fleet_text=fleet_text if fleet_text != "" else None,
        fleet_source=meta.get("fleet_source", str(settings.fleet or "default")),
        seed=seed,
        profile=meta.get("profile", settings.profile or "documented"),
        timing=meta.get("timing", given_timing or ""),
        created_at=datetime.fromisoformat(created).astimezone(UTC) if created else None,
        event_ids=scheme,
    )


@dataclass(frozen=True)
class OpenedState:
    """The service, and the replica behind it when front-ends share its journal."""

    service: ScheduledEventsService
    replica: Replica | None


def open_service(settings: ServeSettings) -> ScheduledEventsService:
    """Build the service, replaying the journal of ``settings``' store if it has one."""
    return open_state(settings).service


def open_state(settings: ServeSettings, on_published: Listener | None = None) -> OpenedState:
    """Build the service (and its replica, on a PostgreSQL store), replaying the journal;
    ``on_published`` is told of every change of a published event, the replayed ones too."""
    journal: Journal | None = None
    url = store_url(settings)
    if url is not None:
        from forewarn.storage import open_journal

        if settings.data_dir is not None:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        journal = open_journal(url)
    try:
        if url is not None and is_shared(url):
            return _build_shared(settings, journal, on_published)
        return OpenedState(_build(settings, journal, on_published), None)
    except BaseException:
        if journal is not None:
            journal.close()  # refused or broken: free the store for the next attempt
        raise


def is_shared(url: str) -> bool:
    """Whether several front-ends may serve the fleet of store ``url`` (PostgreSQL)."""
    from forewarn.storage.urls import is_postgres_url

    return is_postgres_url(url)


def _timing_of(pinned: _Pinned) -> TimingProfile:
    timing = PROFILES[pinned.profile]
    if pinned.timing:
        timing = timing.with_overrides(_parse_timing_text(pinned.timing))
    return timing


def _platform_factory(pinned: _Pinned, created_at: datetime) -> NewPlatform:
    """Fresh platforms holding the fleet as it was created, each with its EventId source."""
    if pinned.fleet_text is None:
        fleet: Fleet = default_fleet()
    else:
        fleet = parse_fleet(pinned.fleet_text, pinned.fleet_source)
    timing = _timing_of(pinned)

    def new_platform() -> tuple[Platform, NewEventId]:
        ids = (
            JournalEventIds(pinned.seed)
            if pinned.event_ids == EVENT_IDS_BY_JOURNAL
            else EventIdFactory(pinned.seed)
        )
        return platform_for_fleet(fleet, created_at, timing=timing, ids=ids), ids

    return new_platform


def _metadata(pinned: _Pinned, created_at: datetime) -> dict[str, str]:
    """What a new store pins, so every restart (and every front-end) builds the same world."""
    clock = {} if pinned.clock is None else {"clock": pinned.clock}
    return clock | {
        "fleet": pinned.fleet_text or "",
        "fleet_source": pinned.fleet_source,
        "seed": str(pinned.seed),
        "profile": pinned.profile,
        "timing": pinned.timing,
        "created_at": created_at.isoformat(),
        "event_ids": pinned.event_ids,
    }


def _build(
    settings: ServeSettings, journal: Journal | None, on_published: Listener | None = None
) -> ScheduledEventsService:
    where = _shown_url(store_url(settings) or "memory")
    pinned = _pin(settings, journal.metadata() if journal is not None else {}, where)
    if pinned.created_at is None and pinned.event_ids == EVENT_IDS_BY_JOURNAL:
        pinned = replace(pinned, event_ids="seeded")  # one writer: ids in creation order
    clock = make_clock(
        settings.clock, scale=settings.scale, start=pinned.created_at or settings.start
    )
    created_at = pinned.created_at or clock.now()
    new_platform = _platform_factory(pinned, created_at)
    if journal is None:
        platform, _ = new_platform()
        in_memory = ScheduledEventsService(platform, clock)
        if on_published is not None:
            in_memory.on_published(on_published)
        return in_memory
    if pinned.created_at is None:
        for key, value in _metadata(pinned, created_at).items():
            journal.set_metadata(key, value)
    writer = JournalWriter(journal, clock, new_platform)
    service = ScheduledEventsService(writer.platform, clock, writer=writer)
    if on_published is not None:
        service.on_published(on_published)
    service.replay()
    return service


def _build_shared(
    settings: ServeSettings, journal: Journal | None, on_published: Listener | None = None
) -> OpenedState:
    """A front-end of a fleet whose PostgreSQL journal others may share: the store's
    metadata is read, or written by the first front-end, under the namespace's lock."""
    from forewarn.cluster.replica import Replica
    from forewarn.storage.postgres import PostgresJournal

    assert isinstance(journal, PostgresJournal)
    with journal.exclusive() as transaction:
        pinned = _pin(
            settings, transaction.metadata(), _shown_url(store_url(settings) or ""), shared=True
        )
        clock = make_clock(
            settings.clock, scale=settings.scale, start=pinned.created_at or settings.start
        )
        created_at = pinned.created_at or clock.now()
        if pinned.created_at is None:
            for key, value in _metadata(pinned, created_at).items():
                transaction.set_metadata(key, value)
    new_platform = _platform_factory(pinned, created_at)
    every = touch_interval(_timing_of(pinned))
    replica = Replica(journal, clock, new_platform, touch_every=every)
    service = ScheduledEventsService(replica.platform, clock, replica=replica)
    if on_published is not None:
        service.on_published(on_published)
    service.replay()
    return OpenedState(service, replica)


def touch_interval(timing: TimingProfile) -> timedelta:
    """How often a VM's requests are journaled (the idle rule's granularity): every
    5 minutes, or a tenth of the idle period when that is shorter."""
    return min(timedelta(minutes=5), timing.idle_period / 10)


def describe_store(settings: ServeSettings) -> str:
    if settings.store is not None:
        return settings.store.split("@")[-1]
    if settings.data_dir is not None:
        return str(Path(settings.data_dir) / SQLITE_FILE)
    return "memory (lost on exit; use --data-dir to keep it)"


@dataclass(frozen=True)
class StoreSummary:
    """What ``forewarn store check`` found in a journal that replays cleanly."""

    records: int
    events: int
    vms: int
    last_at: datetime | None
    event_ids: str


def check_store(url: str) -> StoreSummary:
    """Replay the journal of store ``url`` offline onto a fresh platform, through the replay
    start-up uses (:func:`forewarn.journal_replay.replay_journal`), so it refuses what start-up
    refuses in the same words: :class:`~forewarn.journal_replay.ReplayError` naming the first record
    that cannot be applied, :class:`~forewarn.storage.CorruptStoreError` for damaged metadata,
    or :class:`StateMismatchError` when the store holds no fleet (nothing is created)."""
    from forewarn.storage import open_journal
    from forewarn.storage.urls import sqlite_path

    where = _shown_url(url)
    if url.startswith("sqlite:") and not Path(sqlite_path(url)).exists():
        raise StateMismatchError(f"{where} holds no fleet: there is no journal there")
    with open_journal(url) as journal:
        meta = journal.metadata()
        if "created_at" not in meta:
            raise StateMismatchError(f"{where} holds no fleet yet")
        pinned = _pin(_NO_SETTINGS, meta, where)
        assert pinned.created_at is not None
        applied = Applied.fresh(_platform_factory(pinned, pinned.created_at))
        replay_journal(applied, journal.records())
    platform = applied.platform
    last_at = applied.head_at if applied.head else None
    return StoreSummary(
        applied.head, len(platform.events()), len(platform.vms()), last_at, pinned.event_ids
    )


@dataclass(frozen=True)
class _NothingGiven:
    """Settings that give nothing, so the store's metadata alone decides (store check)."""

    fleet: Path | None = None
    clock: str = "manual"
    scale: float = 1.0
    start: datetime | None = None
    profile: str | None = None
    seed: int | None = None
    data_dir: Path | None = None
    store: str | None = None
    timing_overrides: tuple[tuple[str, timedelta], ...] = ()


_NO_SETTINGS = _NothingGiven()


__all__ = [
    "SQLITE_FILE",
    "OpenedState",
    "StateMismatchError",
    "StoreSummary",
    "check_store",
    "describe_store",
    "is_shared",
    "open_service",
    "open_state",
    "reaching_the_store",
    "store_url",
    "touch_interval",
    "url_without_password",
]

"""The single writer's own state (:class:`forewarn.writer.JournalWriter`), built directly on a
journal in memory: what a new writer is, what start-up builds, and its default clock.

Sources: docs/control.md, "Every mutation is one command" (a change the store cannot record is
not made and answers 503; for a second after, changes are refused without trying) and
"Health" (``/readyz``: "changes are being taken"); the writer's own contract in
forewarn.writer (start-up replays onto the platform built with the writer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from forewarn.commands import Restart
from forewarn.config.fleet import parse_fleet
from forewarn.domain.clock import DEFAULT_START, ManualClock
from forewarn.domain.ids import EventIdFactory, NewEventId
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.service import platform_for_fleet
from forewarn.storage import MemoryJournal
from forewarn.storage.errors import StoreUnavailableError
from forewarn.writer import JournalWriter, NotJournaledError

FLEET = "vms:\n  - {name: vm0, address: 127.0.0.2}\n"


class Builds:
    """The fleet's platform builder, counting the platforms it built (a large fleet's takes
    time to build)."""

    def __init__(self) -> None:
        self.built: list[Platform] = []

    def __call__(self) -> tuple[Platform, NewEventId]:
        ids = EventIdFactory(1)
        platform = platform_for_fleet(
            parse_fleet(FLEET, "fleet"), DEFAULT_START, timing=DOCUMENTED, ids=ids
        )
        self.built.append(platform)
        return platform, ids


class FullJournal(MemoryJournal):
    """A journal whose disk is full: every append refused, reads served."""

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        raise StoreUnavailableError("database or disk is full")


def test_a_new_writer_takes_changes_and_is_not_diverged() -> None:
    """Before any refusal nothing is refused: readiness says changes are being taken."""
    writer = JournalWriter(MemoryJournal(), ManualClock(DEFAULT_START), Builds())
    assert writer.diverged is False
    assert writer.refusing is False
    assert writer.refusing_now() is False
    assert writer.quiet() is False


def test_at_start_up_the_journal_is_replayed_onto_the_platform_built_with_the_writer() -> None:
    """Start-up replays the journal onto the platform built with the writer, not a second
    one (a large fleet's takes time to build); a later rebuild starts afresh. Nobody need
    be told of the platform: a writer without a service rebuilds all the same."""
    journal = MemoryJournal()
    builds = Builds()
    writer = JournalWriter(journal, ManualClock(DEFAULT_START), builds)
    assert writer.rebuild() == 0
    assert len(builds.built) == 1
    assert writer.platform is builds.built[0]
    writer.write(Restart("vm0"), DEFAULT_START)
    adopted: list[Platform] = []
    writer.adopt = adopted.append
    assert writer.rebuild() == 1
    assert len(builds.built) == 2
    assert writer.platform is builds.built[1]
    assert adopted == [builds.built[1]]
    assert writer.diverged is False


def test_the_quiet_period_is_measured_on_the_machines_monotonic_clock_by_default() -> None:
    """Without a clock of the test's own, the writer reads the monotonic clock: a refusal is
    the store's refusal, and the write right after it is refused without trying."""
    journal = FullJournal()
    writer = JournalWriter(journal, ManualClock(DEFAULT_START), Builds())
    writer.rebuild()
    with pytest.raises(NotJournaledError, match="could not record it: database or disk"):
        writer.write(Restart("vm0"), DEFAULT_START)
    assert writer.refusing is True
    assert writer.diverged is False


class Stopwatch:
    """The writer's monotonic clock, moved only by the test."""

    def __init__(self) -> None:
        self.seconds = 100.0

    def __call__(self) -> float:
        return self.seconds


def test_refusing_lasts_from_a_refusal_until_its_quiet_period_has_passed() -> None:
    """``JournalWriter.refusing``: "True from a refusal until the quiet period after it has
    passed" (docs/control.md, "Every mutation is one command": "For a second after such a
    refusal ... changes are refused at once without trying the store"). Once past, the
    first look ends it."""
    stopwatch = Stopwatch()
    writer = JournalWriter(FullJournal(), ManualClock(DEFAULT_START), Builds(), monotonic=stopwatch)
    writer.rebuild()
    with pytest.raises(NotJournaledError):
        writer.write(Restart("vm0"), DEFAULT_START)
    assert writer.quiet() is True
    assert writer.refusing is True
    stopwatch.seconds += 1.0
    assert writer.quiet() is False
    assert writer.refusing is False

"""The platform as a function of its journal: one replay, for every reader of a journal.

A journal's records are untrusted input: a file or a table anyone with access can edit or
damage. :func:`replay_journal` reads them in order through the checks that make them safe to
apply (the store's own, :func:`forewarn.storage.journal.decode_record`: a JSON object within
its size bound; :func:`forewarn.commands.from_record`: a known command with its typed fields)
and :meth:`Applied.apply` (no record missing, none stamped before the ones it follows). Start-up
with one writer (:mod:`forewarn.writer`) or several front-ends (:mod:`forewarn.cluster`), the
rebuild after a change that could not be recorded, and ``forewarn store check`` all replay
here, so a bad journal is refused by each with the same one line naming its first bad record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from forewarn.commands import Command, Group, Result, Seen, Touch, from_record
from forewarn.domain.clock import Clock, ManualClock
from forewarn.domain.ids import JournalEventIds, NewEventId
from forewarn.domain.platform import Platform
from forewarn.errors import ForewarnError
from forewarn.storage.errors import CorruptRecordError

#: Builds a platform holding the fleet as it was created, with the EventId source it uses.
NewPlatform = Callable[[], tuple[Platform, NewEventId]]


class ReplayError(ForewarnError):
    """A journal record that cannot be applied: the journal and this version disagree, or the
    journal was edited or damaged."""

    def __init__(
        self, position: int, record: Mapping[str, Any] | None, cause: Exception | str
    ) -> None:
        op = record.get("op") if isinstance(record, Mapping) else None
        kind = f" ({op})" if isinstance(op, str) and len(op) <= 32 else ""
        why = cause if isinstance(cause, str) else _reason(cause)
        super().__init__(
            f"cannot replay journal record {position}{kind}: {why}. The store was written by "
            "another version or edited; keep it for inspection (forewarn store check names "
            "its first bad record) and start with a new one (another --data-dir, or --store "
            "naming a new namespace)"
        )
        self.position = position


def _reason(cause: Exception) -> str:
    """What went wrong, on one line: a rule of ours in its own words, anything else (what
    a command choked on) with its type."""
    text = " ".join(str(cause).split())
    if isinstance(cause, ForewarnError | ValueError):
        return text
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


@dataclass(slots=True)
class Applied:
    """A platform and how far into the journal it is: the records 1..``head`` applied."""

    platform: Platform
    ids: NewEventId
    head: int = 0
    #: The latest record's time (the platform's creation before the first): no record may
    #: be stamped before it, as every writer stamps records in order.
    head_at: datetime | None = None
    #: When each VM's request was last journaled (Touch or Seen), for the idle rule.
    last_seen: dict[str, datetime] = field(default_factory=dict)

    @classmethod
    def fresh(cls, new_platform: NewPlatform) -> Applied:
        platform, ids = new_platform()
        seen = {vm.name: platform.now for vm in platform.vms()}
        return cls(platform, ids, 0, platform.now, seen)

    def apply(self, position: int, record: Mapping[str, Any], clock: Clock | None = None) -> None:
        """Apply record ``position``, the one after :attr:`head`; :class:`ReplayError` naming
        it when it is not that one, or cannot be applied."""
        if position != self.head + 1:
            missing = self.head + 1
            raise ReplayError(missing, None, f"it is missing (the next record is {position})")
        try:
            at, command = from_record(record)
            if self.head_at is not None and at < self.head_at:
                before = "the store's creation" if self.head == 0 else f"record {self.head}"
                raise ValueError(
                    f"it is stamped {at.isoformat()}, before {before} "
                    f"({self.head_at.isoformat()}): records are stamped in order"
                )
            self.apply_command(position, at, command)
        except Exception as exc:  # untrusted input: whatever it does, it is this record's fault
            raise ReplayError(position, record, exc) from exc
        if isinstance(clock, ManualClock) and at > clock.now():
            clock.set(at)  # a manual clock moved by another front-end moves here too

    def apply_command(self, position: int, at: datetime, command: Command) -> Result:
        """Apply ``command`` at ``at`` as record ``position``; the head moves only when the
        domain accepted it."""
        if isinstance(self.ids, JournalEventIds):
            self.ids.at_record(position)
        self.platform.advance_to(at)
        result = command.apply(self.platform)
        self.record_taken(position, at, command)
        return result

    def apply_joined(self, at: datetime, command: Command) -> Result:
        """Apply ``command`` as one more of the record at :attr:`head` (at ``at``, its time),
        a :class:`~forewarn.commands.Group` being written: the events it creates are numbered
        after those of the record's commands before it."""
        self.platform.advance_to(at)
        result = command.apply(self.platform)
        self._seen(at, command)
        return result

    def record_taken(self, position: int, at: datetime, command: Command) -> None:
        """``command`` was applied at ``at`` as record ``position`` (by the platform's own
        path for a VM's request, or by :meth:`apply_command`)."""
        self.head = position
        self.head_at = at if self.head_at is None else max(self.head_at, at)
        self._seen(at, command)

    def _seen(self, at: datetime, command: Command) -> None:
        if isinstance(command, Touch):
            self.last_seen[command.vm] = at
        elif isinstance(command, Seen):
            for name in command.vms:
                self.last_seen[name] = at
        elif isinstance(command, Group):
            for each in command.commands:
                self._seen(at, each)


def replay_journal(
    applied: Applied,
    records: Iterable[tuple[int, Mapping[str, Any]]],
    clock: Clock | None = None,
) -> int:
    """Apply ``records`` (a journal's, in order) to ``applied``; its head. A record the store
    cannot even decode is named as any other bad record is (:class:`ReplayError`)."""
    try:
        for position, record in records:
            applied.apply(position, record, clock)
    except CorruptRecordError as exc:
        raise ReplayError(exc.position, None, exc.reason) from exc
    return applied.head


__all__ = [
    "Applied",
    "NewPlatform",
    "ReplayError",
    "replay_journal",
]

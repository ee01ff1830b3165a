"""The platform's state, shared by its parts, and the records its lifecycle moves.

:class:`forewarn.domain.platform.Platform` is one façade over a few parts, each owning one
concern (the VM registry, enablement, VM impacts, jobs and approvals, campaigns). They work on
this one :class:`PlatformState` rather than each keeping its own tables, because the concerns
meet on the same keys: deleting a VM clears its document, its enablement and its impact in one
step, and an event's creation reads the registry, the enablement and the documents at once.
Splitting the tables among the parts would have each change reach into three of them.

The one rule every part obeys: a change to what a VM is shown goes through
:meth:`PlatformState.show`, :meth:`~PlatformState.update` or :meth:`~PlatformState.hide`,
which apply the DocumentIncarnation rule (:mod:`forewarn.domain.documents`). A VM's document
is the one record of which events it is shown, in the order they were shown to it: no other
table repeats it, so a change to one event rewrites only the documents showing it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from forewarn.domain._frozen import frozen_slot_setters
from forewarn.domain.documents import Document, Seen, seen_by, seen_by_type
from forewarn.domain.errors import UnknownEventError, UnknownVmError
from forewarn.domain.events import DURATION_UNKNOWN, Event, EventSource, EventType
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.history import EventHistory, Publication
from forewarn.domain.ids import NewEventId
from forewarn.domain.placement import Placements
from forewarn.domain.scope import ScopeGroup
from forewarn.domain.timing import TimingProfile
from forewarn.domain.vms import Vm


@dataclass(frozen=True, slots=True, init=False)
class EventRequest:
    """One event an operation wants created; a job is a sequence of these."""

    event_type: EventType
    impacted: tuple[str, ...]
    source: EventSource
    description: str = ""
    duration_seconds: int = DURATION_UNKNOWN
    #: How long it stays Started, when not its kind's period in the timing profile.
    started_for: timedelta | None = None

    def __init__(
        self,
        event_type: EventType,
        impacted: tuple[str, ...],
        source: EventSource,
        description: str = "",
        duration_seconds: int = DURATION_UNKNOWN,
        started_for: timedelta | None = None,
    ) -> None:
        # Through the slots' own setters (forewarn.domain._frozen): every event scheduled
        # is asked for with one.
        _set_event_type(self, event_type)
        _set_impacted(self, impacted)
        _set_source(self, source)
        _set_description(self, description)
        _set_duration_seconds(self, duration_seconds)
        _set_started_for(self, started_for)


(
    _set_event_type,
    _set_impacted,
    _set_source,
    _set_description,
    _set_duration_seconds,
    _set_started_for,
) = frozen_slot_setters(EventRequest)


@dataclass(slots=True)
class VmRecord:
    """What the platform keeps of one VM besides the VM itself, in one object: its document,
    when its Scheduled Events were turned on and its last request. A VM's every request reads
    all three, and one lookup in a table of the whole fleet costs a few cache misses at
    100,000 VMs, where three separate tables cost three times as many. Its scope group's
    index holds its members' records (:attr:`PlatformState.groups`), so an event's audience
    is read with no lookup at all."""

    #: What it is shown: the one record of which events, in the order they were shown.
    document: Document
    #: When Scheduled Events is (or will be, after the first-call delay) on; None: off.
    enabled_at: datetime | None
    last_request: datetime
    #: The VM's tenant (:attr:`Vm.tenant`, which never changes): who must approve what it is
    #: shown.
    tenant: str
    #: The platform's count of changes (:attr:`PlatformState.changes`) at the last change of
    #: what this VM's request meets (its VM, its pause, its enablement, its document): other
    #: VMs' changes leave it, so what a request of this VM found holds while no change of its
    #: own came since (:meth:`PlatformState.unchanged_since`).
    changed: int = 0


@dataclass(frozen=True, slots=True)
class Deletion:
    """A VM deleted (a Terminate or Preempt at the end of its impact, or a deletion with no
    event) and not added again: its address answers nothing from then on, and whoever runs
    its software is told to stop it. ``number`` counts deletions in the order they happened,
    so a reader can ask for those after the last it saw."""

    vm: Vm
    #: The event that deleted it; None for a deletion without terminate notification.
    event: Event | None
    number: int


@dataclass(slots=True)
class LiveEvent:
    """An event while it lives: who sees it, whose approval it waits for, its job."""

    event: Event
    audience: frozenset[str]
    parties: frozenset[str]
    job: Job
    #: The tenants that approved: what the event waits for (one approval speaks for a tenant).
    #: Replaced, never changed, as :attr:`approvers` is: most events are approved once or
    #: never, and the empty one every event starts with is one object the collector never
    #: examines, where a set and a list per event were two more for every event it walks.
    approvals: frozenset[str] = frozenset()
    #: How long it stays Started, when not as the timing profile says (EventRequest's).
    started_for: timedelta | None = None
    #: The VMs whose approval was taken, in order: who approved, as people read it.
    approvers: tuple[str, ...] = ()
    #: Where it is published beyond IMDS (:mod:`forewarn.domain.history`); None: nowhere.
    where: Publication | None = None

    def impacts(self, name: str) -> bool:
        return any(resource.name == name for resource in self.event.resources)


@dataclass(slots=True)
class Job:
    """The events of one platform operation: they start together (SPEC 3)."""

    job_id: int
    join_key: str | None
    not_before: datetime
    campaign: Campaign | None
    events: list[LiveEvent] = field(default_factory=list)


@dataclass(slots=True)
class Campaign:
    """Steps run one after another; ``current`` holds the ids of the running step's events."""

    campaign_id: int
    steps: list[list[EventRequest]]
    current: set[str] = field(default_factory=set)
    step: int = 0


class PlatformState:
    """Every table of the simulated platform, keyed by VM name or EventId."""

    def __init__(self, now: datetime, timing: TimingProfile, new_event_id: NewEventId) -> None:
        self.now = now
        self.timing = timing
        self.new_event_id = new_event_id
        # How many times what a VM's request meets (its VM, its pause, its enablement, its
        # document) may have changed: a reader that keeps what a request met, with this count,
        # asks unchanged_since instead of looking it all up again (the service, for every VM's
        # every poll). Each VM's record holds the count at its own last change, and
        # everyone_changed the count at the last change of what every VM's request meets.
        self.changes = 0
        self.everyone_changed = 0
        # -- the registry
        self.vms: dict[str, Vm] = {}
        self.scale_sets: dict[str, ScaleSet] = {}
        # each VM by the address it answers at, kept with :attr:`vms` (the same objects), as
        # every request looks its VM up by address
        self.by_address: dict[str, Vm] = {}
        # which fault domains of each set every host holds, so a placement is checked
        # against one host rather than the whole fleet
        self.placements = Placements()
        # scope group -> its members' names and records, so an event's audience and the
        # tenants it waits for cost its group's size (each member's own table entries are
        # scattered over the fleet's); and each member's name -> that same table, so an
        # event finds it in one lookup (a VM alone in its group is in neither)
        self.groups: dict[ScopeGroup, dict[str, VmRecord]] = {}
        self.group_of: dict[str, dict[str, VmRecord]] = {}
        # hosts no VM is moved to (hardware predicted to fail, or failed); the failed ones
        # also see their VMs moved off when their impact ends
        self.avoided_hosts: set[str] = set()
        self.failed_hosts: set[str] = set()
        # VMs deleted and not added again, by name and by the address they answered at
        # (nothing answers there now), the last deleted VM that had no address of its own
        # (the zero-configuration VM, answering on any address), and how many deletions
        # there have been
        self.deleted: dict[str, Deletion] = {}
        self.deleted_at: dict[str, Deletion] = {}
        self.deleted_unaddressed: Deletion | None = None
        self.deletions = 0
        # -- what each VM is shown (its document, and only it) and its enablement
        self.records: dict[str, VmRecord] = {}
        # -- impacts
        self.unreachable_until: dict[str, datetime] = {}
        # vm name -> the event whose impact it is under (for the impact policy and hooks)
        self.impact_of_vm: dict[str, Event] = {}
        # vm name -> the freeze (seconds) its next Reboot brings instead of a reboot
        self.freeze_instead: dict[str, int] = {}
        # -- events, jobs, campaigns
        self.events: dict[str, LiveEvent] = {}
        self.open_jobs: dict[str | None, Job] = {}
        self.job_ids = itertools.count(1)
        self.campaigns: dict[int, Campaign] = {}
        self.campaign_ids = itertools.count(1)  # numbered as users read them: 1, 2, ...
        # -- what published events went through (Event Grid, Resource Graph)
        self.history = EventHistory()

    def changed(self) -> None:
        """Something every VM's request meets changed (:attr:`changes`): when each VM last
        asked, or the whole platform (one rebuilt from a journal)."""
        self.changes += 1
        self.everyone_changed = self.changes

    def changed_for(self, record: VmRecord) -> None:
        """Something the request of the VM whose record is ``record`` meets changed: it came,
        went or moved, a pause began, Scheduled Events was turned on, or its document was
        replaced. Only its own: the other VMs' requests meet what they met before."""
        self.changes = changes = self.changes + 1
        record.changed = changes

    def unchanged_since(self, record: VmRecord | None, changes: int) -> bool:
        """Whether nothing the request of the VM whose record is ``record`` (None: a VM
        gone) meets changed since :attr:`changes` read ``changes``."""
        return record is not None and record.changed <= changes >= self.everyone_changed

    def forget_vm(self, name: str) -> None:
        """Drop ``name`` from every table keyed by VM name but the registry's own."""
        self.changes += 1  # its record goes: unchanged_since reads it as changed
        for table in (
            self.records,
            self.unreachable_until,
            self.impact_of_vm,
            self.freeze_instead,
        ):
            table.pop(name, None)

    def record(self, name: str) -> VmRecord:
        """``name``'s record; a name without one is no VM of the fleet."""
        try:
            return self.records[name]
        except KeyError:
            raise UnknownVmError(f"named {name!r}") from None

    def live(self, event_id: str) -> LiveEvent:
        try:
            return self.events[event_id]
        except KeyError:
            raise UnknownEventError((event_id,)) from None

    def show(self, shown_to: Iterable[VmRecord], events: tuple[Event, ...]) -> None:
        """``events`` join the documents of the VMs whose records are ``shown_to``, after
        those each already shows."""
        self.changes = changes = self.changes + 1
        if len(events) == 1:  # the common case: one event shown (seen_by_type)
            seen = seen_by_type(events[0].event_type)
        else:
            seen = seen_by({event.event_type for event in events})
        for record in shown_to:
            record.document = record.document.with_events(record.document.events + events, seen)
            record.changed = changes

    def update(self, names: Iterable[str], event: Event) -> None:
        """The documents of ``names`` that show ``event`` show it as it is now."""
        self._replace(names, event.event_id, (event,))

    def hide(self, names: Iterable[str], event_id: str) -> None:
        """The documents of ``names`` that show the event ``event_id`` show it no more."""
        self._replace(names, event_id, ())

    def _replace(self, names: Iterable[str], event_id: str, by: tuple[Event, ...]) -> None:
        """The documents of ``names`` that show ``event_id`` show ``by`` in its place."""
        self.changes = changes = self.changes + 1
        records = self.records
        # Which narrow views see it (documents.seen_by), from the event once it is found.
        seen: list[Seen] = []
        for name in names:
            record = records.get(name)  # None: a VM deleted since it was shown events
            if record is not None:
                document = record.document
                shown = document.events
                index = _position(shown, event_id)
                if index is not None:
                    record.changed = changes
                    if not seen:
                        seen.append(seen_by_type(shown[index].event_type))
                    record.document = document.with_events(
                        shown[:index] + by + shown[index + 1 :], seen[0]
                    )


def _position(events: tuple[Event, ...], event_id: str) -> int | None:
    for index, event in enumerate(events):
        if event.event_id == event_id:
            return index
    return None

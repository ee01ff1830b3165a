"""The use cases, between the adapters and the domain.

Every call first brings the platform up to the clock, so a state change (an approval, a
NotBefore that passed) is visible in the very next response with no background polling.
Every state change is a :class:`~forewarn.commands.Command`: journaled (when a journal is
configured) before the caller is answered, so an answer is only given for a change that will
survive a crash, and replayed at start-up. Encoded documents are cached per VM and api-version
and rebuilt only when the VM's document object changed, which the domain guarantees happens
only when its events changed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from forewarn.commands import (
    Approve,
    ClockMoved,
    Command,
    Result,
    StartCampaign,
    Touch,
    from_record,
)
from forewarn.domain.api_versions import ApiVersion
from forewarn.domain.clock import Clock, ManualClock
from forewarn.domain.documents import Document
from forewarn.domain.errors import InvalidOperationError
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.impact import Pause
from forewarn.domain.platform import CampaignView, EventView, Platform, VmState
from forewarn.domain.vms import Vm
from forewarn.errors import ForewarnError
from forewarn.faults import FaultPlan
from forewarn.wire.documents import encode_document

if TYPE_CHECKING:
    from forewarn.cluster.replica import Replica
    from forewarn.config.fleet import Fleet
    from forewarn.domain.timing import TimingProfile
    from forewarn.registry import Operation


#: Every state change applied, at info (``forewarn serve --log-level``).
_OPERATIONS = logging.getLogger("forewarn.operations")


class ReplayError(ForewarnError):
    """A journal record that cannot be applied: the journal and this version disagree."""

    def __init__(self, position: int, record: Mapping[str, Any], cause: Exception) -> None:
        kind = record.get("op", "?")
        super().__init__(
            f"cannot replay journal record {position} ({kind}): {cause}. The store was written "
            "by another version or edited; keep it for inspection (forewarn store check names "
            "its first bad record) and start with a new one (another --data-dir, or --store "
            "naming a new namespace)"
        )
        self.position = position


@dataclass(frozen=True, slots=True)
class EncodedDocument:
    """A document's bytes and its ETag, the incarnation (SPEC 1: reference/imds/
    vmss-terminate-notification.md calls DocumentIncarnation "an ETag")."""

    body: bytes
    tag: str
    etag: bytes

    @classmethod
    def of(cls, document: Document, version: ApiVersion) -> EncodedDocument:
        tag = str(document.incarnation)
        return cls(encode_document(document, version), tag, b'"%s"' % tag.encode())


class CommandJournal(Protocol):
    """What the service needs of a store (:mod:`forewarn.storage` provides it)."""

    def append(self, record: Mapping[str, Any]) -> int: ...

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]: ...

    def close(self) -> None: ...


class ScheduledEventsService:
    """One platform on one clock, and the operations adapters may perform on it."""

    def __init__(
        self,
        platform: Platform,
        clock: Clock,
        journal: CommandJournal | None = None,
        *,
        replica: Replica | None = None,
    ) -> None:
        self.platform = platform
        self.clock = clock
        self.journal = journal
        #: Faults injected in front of the VM-facing endpoint: not platform state, never
        #: journaled (forewarn.faults).
        self.faults = FaultPlan()
        self._encoded: dict[tuple[str, str], tuple[Document, EncodedDocument]] = {}
        #: Set when front-ends share the journal (forewarn.cluster): the platform is then
        #: the replica's, moved by journal records alone.
        self._replica = replica
        if replica is not None:
            replica.adopt = self._adopt
            self._adopt(replica.platform)

    def catch_up(self) -> datetime:
        """Bring the platform up to the clock; with a shared journal only records move it
        (the leader journals what falls due), so this only reads the clock."""
        now = self.clock.now()
        if self._replica is None:
            self.platform.advance_to(now)
        return now

    def _adopt(self, platform: Platform) -> None:
        """Serve ``platform`` from now on (a shared journal's replica was rebuilt)."""
        self.platform = platform
        self._encoded.clear()

    # -- durability ------------------------------------------------------------------------

    def replay(self) -> int:
        """Re-apply every journaled command in order; returns how many were replayed.

        A manual clock is set to the last journaled time, so pending NotBefore times still
        hold; real clocks simply go on, and whatever fell due meanwhile happens on catch-up.
        """
        if self._replica is not None:
            # No one is idle by this front-end's absence: the others journaled requests.
            return self._replica.rebuild()
        if self.journal is None:
            return 0
        count = 0
        last: datetime | None = None
        for position, record in self.journal.records():
            try:
                at, command = from_record(record)
                self.platform.advance_to(at)
                command.apply(self.platform)
            except (ForewarnError, KeyError, TypeError, ValueError) as exc:
                raise ReplayError(position, record, exc) from exc
            last = at
            count += 1
        if last is not None and isinstance(self.clock, ManualClock) and last > self.clock.now():
            self.clock.set(last)
        self.catch_up()
        self.platform.assume_requests_now()
        return count

    def execute(self, command: Command) -> Result:
        """Apply ``command`` now, journaling it first; domain errors leave no trace."""
        if self._replica is not None:
            result = self._replica.write(command)
            self._log(command, self._replica.applied.head_at or self.platform.now)
            return result
        self.catch_up()
        now = self.platform.now
        result = command.apply(self.platform)
        logged = _OPERATIONS.isEnabledFor(logging.INFO)
        if self.journal is not None or logged:
            record = command.to_record(now)
            if self.journal is not None:
                # Applied first so a refused command is never journaled; the domain raises
                # before changing anything, and a store failure here stops the process (the
                # answer would otherwise claim a change a restart would lose).
                self.journal.append(record)
            if logged:
                self._log(command, now)
        return result

    @staticmethod
    def _log(command: Command, at: datetime) -> None:
        if _OPERATIONS.isEnabledFor(logging.INFO):
            record = command.to_record(at)
            fields = {k: v for k, v in record.items() if k not in ("op", "at")}
            _OPERATIONS.info(str(record["op"]), extra={"fields": fields})

    def perform(
        self, operation: Operation, target: str, arguments: Mapping[str, Any] | None = None
    ) -> Result:
        """Run a :mod:`forewarn.registry` operation on the VM, scale set or host ``target``."""
        self.catch_up()
        if operation.check is not None:
            operation.check(self.platform, target)
        return self.execute(operation.command(target, **(arguments or {})))

    # -- the VM-facing endpoint ------------------------------------------------------------

    def resolve_vm(self, local_address: str, peer_address: str) -> Vm | None:
        """The calling VM: by the address the request arrived at, then the one it came from.

        A fleet of one VM answers on any address, which is the zero-configuration default.
        """
        platform = self.platform
        vm = platform.vm_at(local_address) or platform.vm_at(peer_address)
        if vm is None:
            vms = platform.vms()
            if len(vms) == 1 and vms[0].address is None:
                return vms[0]
        return vm

    def vm_request(self, vm_name: str) -> Pause | None:
        """A request from ``vm_name`` arrived: it counts as a request (turning Scheduled Events
        on when it is the first), unless the VM is down (reboot, freeze, deleted) when nothing
        inside it could be asking. None when it can be answered now; otherwise why and until
        when not (the first-call delay included)."""
        self.catch_up()
        platform = self.platform
        if not platform.reachable(vm_name):
            return platform.pause(vm_name)
        if self._replica is not None:
            return self._replica.requested(vm_name) or self.platform.pause(vm_name)
        if platform.touch(vm_name) and self.journal is not None:
            self.journal.append(Touch(vm_name).to_record(platform.now))
        return platform.pause(vm_name)

    def impacts(self) -> dict[str, Pause]:
        """The VMs under an impact now (for impact hooks), after catching up."""
        self.catch_up()
        return self.platform.impacts()

    def document_bytes(self, vm_name: str, version: ApiVersion) -> bytes:
        return self.encoded_document(vm_name, version).body

    def encoded_document(self, vm_name: str, version: ApiVersion) -> EncodedDocument:
        """``vm_name``'s document as ``version`` shows it, with its tag; cached until the
        VM's events change."""
        document = self.platform.document(vm_name)
        key = (vm_name, version.name)
        cached = self._encoded.get(key)
        if cached is not None and cached[0] is document:
            return cached[1]
        encoded = EncodedDocument.of(document, version)
        self._encoded[key] = (document, encoded)
        return encoded

    def document(self, vm_name: str) -> Document:
        self.catch_up()
        return self.platform.document(vm_name)

    def approve(self, vm_name: str, event_ids: Iterable[str]) -> None:
        self.execute(Approve(vm_name, tuple(event_ids)))

    def approve_for(self, vm_name: str, event_ids: Iterable[str] | None) -> tuple[str, ...]:
        """Approve on ``vm_name``'s behalf (the control plane), every event its document shows
        when ``event_ids`` is None; the ids approved. A VM that is down cannot ask, so neither
        can anyone on its behalf."""
        self.catch_up()
        if not self.platform.vm_state(vm_name).reachable:
            raise InvalidOperationError(
                f"{vm_name} is down (an impact is under way) and cannot ask"
            )
        if event_ids is None:
            ids = tuple(event.event_id for event in self.platform.document(vm_name).events)
        else:
            ids = tuple(event_ids)
        self.execute(Approve(vm_name, ids))
        return ids

    # -- the control plane -----------------------------------------------------------------

    def events(self) -> tuple[EventView, ...]:
        self.catch_up()
        return self.platform.events()

    def vms(self) -> tuple[Vm, ...]:
        return self.platform.vms()

    def vm_states(self) -> tuple[VmState, ...]:
        self.catch_up()
        return tuple(self.platform.vm_state(vm.name) for vm in self.platform.vms())

    def campaigns(self) -> tuple[CampaignView, ...]:
        self.catch_up()
        return self.platform.campaigns()

    def start_campaign(
        self,
        vm_names: tuple[str, ...] | None,
        event_type: str,
        kinds: tuple[str, ...] | None = None,
    ) -> tuple[CampaignView | None, Result]:
        """Start a maintenance campaign; the campaign (None when it had nothing left to do
        after its first step) and the events of that step."""
        before = {view.campaign_id for view in self.campaigns()}
        created = self.execute(StartCampaign(vm_names, event_type, kinds))
        started = [view for view in self.platform.campaigns() if view.campaign_id not in before]
        return (started[0] if started else None), created

    def advance_clock(self, delta: timedelta) -> datetime:
        """Move a manual clock; other clocks follow real time and refuse."""
        clock = self._manual_clock()
        if self._replica is not None:  # from the fleet's time, not a lagging follower's
            self._replica.catch_up()
        clock.advance(delta)
        return self._clock_moved()

    def set_clock(self, moment: datetime) -> datetime:
        self._manual_clock().set(moment)
        return self._clock_moved()

    def _manual_clock(self) -> ManualClock:
        if not isinstance(self.clock, ManualClock):
            raise InvalidOperationError("only a manual clock can be moved (serve --clock manual)")
        return self.clock

    def _clock_moved(self) -> datetime:
        if self._replica is not None:
            self.execute(ClockMoved())
            return self.clock.now()
        now = self.catch_up()
        if self.journal is not None:
            self.journal.append(ClockMoved().to_record(now))
        return now


def service_for_fleet(
    fleet: Fleet, clock: Clock, *, timing: TimingProfile, seed: int = 0
) -> ScheduledEventsService:
    """A fresh platform holding ``fleet``, on ``clock``, with no journal (tests, in-process
    scenario runs and the pytest plugin; ``forewarn serve`` opens its state in server.state)."""
    platform = Platform(clock.now(), timing=timing, new_event_id=EventIdFactory(seed))
    for scale_set in fleet.scale_sets:
        platform.add_scale_set(scale_set)
    for vm in fleet.vms:
        platform.add_vm(vm, receiving=vm.name not in fleet.not_receiving)
    return ScheduledEventsService(platform, clock)

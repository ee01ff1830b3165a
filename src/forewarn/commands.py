"""Every state change as a small, serialisable command.

The service journals a command before answering, and replays the journal at start-up through
the same :meth:`Command.apply`; because the domain is deterministic (seeded EventIds, time
given as a value), replay rebuilds exactly the same events, approvals and incarnations.
A record is the command's fields plus ``op`` (its name) and ``at`` (platform time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar

from forewarn.domain import arm, operations
from forewarn.domain.errors import InvalidEventError, InvalidOperationError
from forewarn.domain.events import Event, EventSource, EventType
from forewarn.domain.platform import Platform
from forewarn.domain.policy import ScheduledEventsPolicy

Result = tuple[Event, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    """Base: subclasses name themselves with ``op`` and implement :meth:`apply`."""

    op: ClassVar[str] = ""

    def apply(self, platform: Platform) -> Result:
        raise NotImplementedError

    def to_record(self, at: datetime) -> dict[str, Any]:
        record: dict[str, Any] = {"op": self.op, "at": at.isoformat()}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            record[field.name] = list(value) if isinstance(value, tuple) else value
        return record


@dataclasses.dataclass(frozen=True, slots=True)
class Restart(Command):
    op: ClassVar[str] = "restart"
    vm: str

    def apply(self, platform: Platform) -> Result:
        return operations.restart(platform, self.vm)


@dataclasses.dataclass(frozen=True, slots=True)
class Redeploy(Command):
    op: ClassVar[str] = "redeploy"
    vm: str

    def apply(self, platform: Platform) -> Result:
        return operations.redeploy(platform, self.vm)


@dataclasses.dataclass(frozen=True, slots=True)
class SimulateEviction(Command):
    op: ClassVar[str] = "simulate-eviction"
    vms: tuple[str, ...]

    def apply(self, platform: Platform) -> Result:
        return operations.simulate_eviction(platform, self.vms)


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteInstances(Command):
    op: ClassVar[str] = "delete-instances"
    scale_set: str
    instance_ids: tuple[str, ...]
    autoscale: bool = False

    def apply(self, platform: Platform) -> Result:
        return operations.delete_instances(
            platform, self.scale_set, self.instance_ids, autoscale=self.autoscale
        )


@dataclasses.dataclass(frozen=True, slots=True)
class OsImageUpgrade(Command):
    op: ClassVar[str] = "os-image-upgrade"
    scale_set: str
    instance_ids: tuple[str, ...]

    def apply(self, platform: Platform) -> Result:
        return operations.os_image_upgrade(platform, self.scale_set, self.instance_ids)


@dataclasses.dataclass(frozen=True, slots=True)
class HostOperation(Command):
    """One of :data:`~forewarn.domain.operations.HOST_ACTIONS` (live-migrate, maintain...)."""

    op: ClassVar[str] = "host"
    host: str
    action: str

    def apply(self, platform: Platform) -> Result:
        return _named_action(operations.HOST_ACTIONS, "host", self.action)(platform, self.host)


@dataclasses.dataclass(frozen=True, slots=True)
class VmOperation(Command):
    """One of :data:`~forewarn.domain.operations.VM_ACTIONS` (freeze-instead, impact-again)."""

    op: ClassVar[str] = "vm"
    vm: str
    action: str

    def apply(self, platform: Platform) -> Result:
        return _named_action(operations.VM_ACTIONS, "VM", self.action)(platform, self.vm)


def _named_action(
    actions: Mapping[str, Callable[[Platform, str], Result]], target: str, name: str
) -> Callable[[Platform, str], Result]:
    """The action a journal record names; a name from no table is refused, not guessed."""
    action = actions.get(name)
    if action is None:
        raise InvalidOperationError(
            f"unknown {target} action {name!r}; known: {', '.join(actions)}"
        )
    return action


@dataclasses.dataclass(frozen=True, slots=True)
class SetPolicy(Command):
    """A VM's, scale set's or availability set's new ``scheduledEventsPolicy``
    (:mod:`forewarn.domain.policy`), journaled field by field."""

    op: ClassVar[str] = "policy"
    target: str
    name: str
    auto_approve_reboot: bool = False
    auto_approve_redeploy: bool = False
    auto_approve_all_instances_down: bool = True
    publish: bool = False
    published_api_version: str = "2020-07-01"

    @classmethod
    def of(cls, target: str, name: str, policy: ScheduledEventsPolicy) -> SetPolicy:
        return cls(
            target,
            name,
            policy.auto_approve_reboot,
            policy.auto_approve_redeploy,
            policy.auto_approve_all_instances_down,
            policy.publish,
            policy.published_api_version,
        )

    @property
    def policy(self) -> ScheduledEventsPolicy:
        return ScheduledEventsPolicy(
            bool(self.auto_approve_reboot),
            bool(self.auto_approve_redeploy),
            bool(self.auto_approve_all_instances_down),
            bool(self.publish),
            str(self.published_api_version),
        )

    def apply(self, platform: Platform) -> Result:
        platform.set_policy(self.target, self.name, self.policy)
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class StartCampaign(Command):
    op: ClassVar[str] = "campaign"
    vms: tuple[str, ...] | None = None
    event_type: str = EventType.REBOOT.value
    #: The kind of each fault domain's step, in turn (``update``, ``live-migrate``,
    #: ``maintain``); when absent, the one ``event_type`` stands for.
    kinds: tuple[str, ...] | None = None

    def apply(self, platform: Platform) -> Result:
        """The events of the campaign's first step."""
        kinds: tuple[operations.MaintenanceKind, ...]
        if self.kinds is None:
            kinds = (operations.MaintenanceKind.for_event_type(EventType(self.event_type)),)
        else:
            kinds = tuple(_maintenance_kind(kind) for kind in self.kinds)
        campaign = operations.maintenance_campaign(platform, self.vms, kinds=kinds)
        return tuple(platform.event(event_id).event for event_id in sorted(campaign.current))


def _maintenance_kind(name: str) -> operations.MaintenanceKind:
    try:
        return operations.MaintenanceKind(name)
    except ValueError:
        known = ", ".join(kind.value for kind in operations.MaintenanceKind)
        raise InvalidOperationError(f"unknown maintenance kind {name!r}; known: {known}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleEvent(Command):
    """Any event, as the control API's low-level ``POST /events`` asks."""

    op: ClassVar[str] = "schedule"
    event_type: str
    resources: tuple[str, ...]
    source: str = EventSource.PLATFORM.value
    description: str = ""
    duration_seconds: int = -1
    notice_seconds: float | None = None
    started: bool = False

    def apply(self, platform: Platform) -> Result:
        notice = None if self.notice_seconds is None else timedelta(seconds=self.notice_seconds)
        event = platform.schedule(
            EventType(self.event_type),
            self.resources,
            source=EventSource(self.source),
            description=self.description,
            duration_seconds=self.duration_seconds,
            notice=notice,
            already_started=self.started,
        )
        return (event,)


@dataclasses.dataclass(frozen=True, slots=True)
class CancelEvent(Command):
    op: ClassVar[str] = "cancel"
    event_id: str

    def apply(self, platform: Platform) -> Result:
        return (platform.cancel(self.event_id),)


@dataclasses.dataclass(frozen=True, slots=True)
class Approve(Command):
    op: ClassVar[str] = "approve"
    vm: str
    event_ids: tuple[str, ...]

    def apply(self, platform: Platform) -> Result:
        platform.approve(self.vm, self.event_ids)
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class Acknowledge(Command):
    """The Maintenance resource provider's acknowledgement of the scheduled event whose ARM id
    is ``resource_id`` (:meth:`forewarn.domain.platform.Platform.acknowledge`)."""

    op: ClassVar[str] = "acknowledge"
    resource_id: str

    def apply(self, platform: Platform) -> Result:
        ref = arm.parse_scheduled_event_id(self.resource_id)
        if ref is None:
            raise InvalidEventError(f"{self.resource_id!r} is no scheduled event's ARM id")
        platform.acknowledge(ref)
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class Touch(Command):
    """A VM's request that turned Scheduled Events on for it (only those are journaled)."""

    op: ClassVar[str] = "touch"
    vm: str

    def apply(self, platform: Platform) -> Result:
        platform.touch(self.vm)
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class ClockMoved(Command):
    """A manual clock moved; replay needs it to know how far time had gone."""

    op: ClassVar[str] = "clock"

    def apply(self, platform: Platform) -> Result:
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class Tick(Command):
    """Time passed: the record's ``at`` is all it says. Front-ends sharing a journal never
    move their platforms on their own; the leader writes these when a deadline falls due
    (a NotBefore, an impact's end, a removal), and a writer writes one when the time it
    stamps fired deadlines or its command was refused (:mod:`forewarn.cluster`)."""

    op: ClassVar[str] = "tick"

    def apply(self, platform: Platform) -> Result:
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class Seen(Command):
    """VMs that made requests lately, journaled at most once per VM every few minutes by
    front-ends sharing a journal, so the 24 h idle rule is judged from the journal alone.
    A VM deleted meanwhile is passed over (it asks no more)."""

    op: ClassVar[str] = "seen"
    vms: tuple[str, ...]

    def apply(self, platform: Platform) -> Result:
        present = {vm.name for vm in platform.vms()}
        for name in self.vms:
            if name in present:
                platform.touch(name)
        return ()


COMMANDS: dict[str, type[Command]] = {
    cls.op: cls
    for cls in (Restart, Redeploy, SimulateEviction, DeleteInstances, OsImageUpgrade,
                HostOperation, VmOperation, SetPolicy, StartCampaign, ScheduleEvent, CancelEvent,
                Approve, Acknowledge, Touch, ClockMoved, Tick, Seen)
}  # fmt: skip


def from_record(record: Mapping[str, Any]) -> tuple[datetime, Command]:
    """The time and command of a journal record; raises ValueError on a foreign record."""
    try:
        cls = COMMANDS[record["op"]]
        at = datetime.fromisoformat(record["at"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a forewarn journal record: {exc}") from None
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in record:
            value = record[field.name]
            values[field.name] = tuple(value) if isinstance(value, list) else value
    try:
        return at, cls(**values)
    except TypeError as exc:
        raise ValueError(f"journal record {record['op']!r} is incomplete: {exc}") from None


__all__ = [
    "COMMANDS",
    "Acknowledge",
    "Approve",
    "CancelEvent",
    "ClockMoved",
    "Command",
    "DeleteInstances",
    "HostOperation",
    "OsImageUpgrade",
    "Redeploy",
    "Restart",
    "Result",
    "ScheduleEvent",
    "SetPolicy",
    "SimulateEviction",
    "StartCampaign",
    "Touch",
    "VmOperation",
    "from_record",
]

"""Every state change as a small, serialisable command.

The service journals a command before answering, and replays the journal at start-up through
the same :meth:`Command.apply`; because the domain is deterministic (seeded EventIds, time
given as a value), replay rebuilds exactly the same events, approvals and incarnations.
A record is the command's fields plus ``op`` (its name) and ``at`` (platform time).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from forewarn.domain import arm, operations
from forewarn.domain.clock import check_time, seconds_to_duration
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
        record.update(self.fields())
        return record

    def fields(self) -> dict[str, Any]:
        """The command's own fields as a record holds them (tuples as lists)."""
        fields: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            fields[field.name] = list(value) if isinstance(value, tuple) else value
        return fields


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
    #: What a hardware failure's event says it is (``fail`` only;
    #: :data:`~forewarn.domain.operations.HARDWARE_FAILURE_MODELS`); None: the default.
    model: str | None = None

    def apply(self, platform: Platform) -> Result:
        action = _named_action(operations.HOST_ACTIONS, "host", self.action)
        if self.model is None:
            return action(platform, self.host)
        if action is not operations.fail_host:
            raise InvalidOperationError(f"host action {self.action!r} takes no model")
        return operations.fail_host(platform, self.host, self.model)


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
    #: How long it stays Started, when not its kind's period in the timing profile.
    started_seconds: float | None = None

    def apply(self, platform: Platform) -> Result:
        notice = (
            None
            if self.notice_seconds is None
            else seconds_to_duration(self.notice_seconds, "the notice")
        )
        started_for = (
            None
            if self.started_seconds is None
            else seconds_to_duration(self.started_seconds, "the Started period")
        )
        event = platform.schedule(
            EventType(self.event_type),
            self.resources,
            source=EventSource(self.source),
            description=self.description,
            duration_seconds=self.duration_seconds,
            notice=notice,
            already_started=self.started,
            started_for=started_for,
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
        platform.acknowledge((_event_ref(self.resource_id),))
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class AcknowledgeList(Command):
    """The Maintenance resource provider's acknowledgement of several scheduled events of one
    resource at once (``acknowledge_list``): each named by its ARM id, all of them or none."""

    op: ClassVar[str] = "acknowledge-list"
    resource_ids: tuple[str, ...]

    def apply(self, platform: Platform) -> Result:
        platform.acknowledge(tuple(_event_ref(resource_id) for resource_id in self.resource_ids))
        return ()


def _event_ref(resource_id: str) -> arm.ScheduledEventRef:
    ref = arm.parse_scheduled_event_id(resource_id)
    if ref is None:
        raise InvalidEventError(f"{resource_id!r} is no scheduled event's ARM id")
    return ref


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


#: The most commands one group record holds (:class:`Group`).
MAX_GROUP_COMMANDS = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class Group(Command):
    """Commands written at one time in one transaction, journaled as one record
    (:mod:`forewarn.cluster`: the writes a front-end gathers, such as a turn's approvals or
    a campaign's operations asked for at once): one row, one decoding, one time for them all.
    Applying it applies each in turn as record ``n``, so the events they create are numbered
    after it, in order, as its writer numbered them. Each was accepted by the domain when
    written; one refused on replay refuses the record (the journal and this version
    disagree). From 2 to :data:`MAX_GROUP_COMMANDS` commands, none a group; releases before
    groups refuse a journal holding one, naming its op."""

    op: ClassVar[str] = "group"
    commands: tuple[Command, ...]

    def apply(self, platform: Platform) -> Result:
        results: list[Event] = []
        for command in self.commands:
            results.extend(command.apply(platform))
        return tuple(results)

    def fields(self) -> dict[str, Any]:
        return {"commands": [{"op": command.op, **command.fields()} for command in self.commands]}


COMMANDS: dict[str, type[Command]] = {
    cls.op: cls
    for cls in (Restart, Redeploy, SimulateEviction, DeleteInstances, OsImageUpgrade,
                HostOperation, VmOperation, SetPolicy, StartCampaign, ScheduleEvent, CancelEvent,
                Approve, Acknowledge, AcknowledgeList, Touch, ClockMoved, Tick, Seen, Group)
}  # fmt: skip


#: The longest ``at`` text: an ISO 8601 instant with microseconds and its offset is 32.
MAX_AT_CHARS = 40
#: Integers a record may hold: what a 64-bit column or peer keeps.
_INT_BOUND = 2**63


def from_record(record: Mapping[str, Any]) -> tuple[datetime, Command]:
    """The time and command of a journal record, read as untrusted input (a row or a file
    anyone with access can edit): a known ``op``, an ``at`` instant with its UTC offset, and
    exactly the command's own fields, each of its declared type. ValueError saying what is
    wrong otherwise, never anything a command would choke on later."""
    if not isinstance(record, Mapping):
        raise ValueError(f"a record is a JSON object, not {_shown(record)}")
    op = record.get("op")
    cls = COMMANDS.get(op) if isinstance(op, str) else None
    if cls is None:
        raise ValueError(f"not a forewarn journal record: op {_shown(op)} names no command")
    return _instant(record.get("at")), _command(cls, record, ("op", "at"))


def _command(cls: type[Command], record: Mapping[str, Any], own: tuple[str, ...]) -> Command:
    """The command ``cls`` of ``record``, whose other keys are ``own``: exactly the
    command's fields, each of its declared type."""
    op = cls.op
    checks = _FIELD_CHECKS[cls]
    for name in record:
        if name not in checks and name not in own:
            raise ValueError(f"{op!r} has no field {_shown(name)}")
    values: dict[str, Any] = {}
    for name, (check, required) in checks.items():
        if name in record:
            values[name] = check(name, record[name])
        elif required:
            raise ValueError(f"journal record {op!r} is incomplete: {name!r} is missing")
    return cls(**values)


def _commands(name: str, value: object) -> tuple[Command, ...]:
    """A group's commands: 2 to :data:`MAX_GROUP_COMMANDS` objects, each a command's op and
    fields (no time of its own: the group's), none a group."""
    if not isinstance(value, list) or not 2 <= len(value) <= MAX_GROUP_COMMANDS:
        raise ValueError(
            f"{name!r} is {_shown(value)}, not a list of 2 to {MAX_GROUP_COMMANDS} commands"
        )
    commands: list[Command] = []
    for item in value:
        if not isinstance(item, Mapping):
            raise ValueError(f"a grouped command is a JSON object, not {_shown(item)}")
        op = item.get("op")
        cls = COMMANDS.get(op) if isinstance(op, str) else None
        if cls is None or cls is Group:
            raise ValueError(f"a grouped command's op {_shown(op)} names no command of a group")
        commands.append(_command(cls, item, ("op",)))
    return tuple(commands)


def _shown(value: object) -> str:
    """``value`` as an error message may quote it: short, and on one line."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _instant(value: object) -> datetime:
    if not isinstance(value, str) or len(value) > MAX_AT_CHARS:
        raise ValueError(f"'at' is {_shown(value)}, not an ISO 8601 time")
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"'at' is {_shown(value)}, not an ISO 8601 time") from None
    if at.utcoffset() is None:
        raise ValueError(f"'at' is {_shown(value)}, a time without its UTC offset")
    at = at.astimezone(UTC)
    # serve's start-up and ``store check`` both read records here, so both refuse a time the
    # platform cannot show (TimeOutOfRangeError)
    check_time(at, "the record's time")
    return at


_Check = Callable[[str, object], object]


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name!r} is {_shown(value)}, not a string")
    return value


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name!r} is {_shown(value)}, not true or false")
    return value


def _integer(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= _INT_BOUND:
        raise ValueError(f"{name!r} is {_shown(value)}, not a 64-bit integer")
    return value


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name!r} is {_shown(value)}, not a number")
    if abs(value) >= _INT_BOUND:
        raise ValueError(f"{name!r} is {_shown(value)}, out of range")
    return value


def _names(name: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{name!r} is {_shown(value)}, not a list of strings")
    return tuple(value)


def _optional(check: _Check) -> _Check:
    def optional(name: str, value: object) -> object:
        return None if value is None else check(name, value)

    return optional


def _check_for(hint: object) -> _Check:
    """How a record's value of a field declared ``hint`` is checked and read."""
    simple: dict[object, _Check] = {str: _text, bool: _flag, int: _integer, float: _number}
    if hint in simple:
        return simple[hint]
    if typing.get_origin(hint) is tuple and typing.get_args(hint) == (str, ...):
        return _names
    if typing.get_origin(hint) is tuple and typing.get_args(hint) == (Command, ...):
        return _commands
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in args:
        (rest,) = (arg for arg in args if arg is not type(None))
        return _optional(_check_for(rest))
    raise TypeError(f"no journal check for a field of type {hint!r}: add one to commands.py")


def _checks_of(cls: type[Command]) -> dict[str, tuple[_Check, bool]]:
    """Each field of ``cls``: its check, and whether a record must carry it (no default)."""
    hints = typing.get_type_hints(cls)
    return {
        field.name: (
            _check_for(hints[field.name]),
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING,
        )
        for field in dataclasses.fields(cls)
    }


#: Built from the commands' declarations, so a new field is checked the day it is declared.
_FIELD_CHECKS = {cls: _checks_of(cls) for cls in COMMANDS.values()}


__all__ = [
    "COMMANDS",
    "MAX_AT_CHARS",
    "MAX_GROUP_COMMANDS",
    "Acknowledge",
    "AcknowledgeList",
    "Approve",
    "CancelEvent",
    "ClockMoved",
    "Command",
    "DeleteInstances",
    "Group",
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

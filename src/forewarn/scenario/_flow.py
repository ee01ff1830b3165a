"""What a built-in flow is, and how one becomes a scenario: :class:`Flow`, and the pieces
the table of :mod:`forewarn.scenario.flows` is made of (how a flow starts, what happens while
it is Started)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import yaml

from forewarn.domain.events import DURATION_UNKNOWN, RESOURCE_TYPE_VM, EventSource, EventType
from forewarn.domain.operations import HOST_UPDATE_SECONDS
from forewarn.domain.timing import DEV, DOCUMENTED, TimingProfile
from forewarn.domain.vms import Priority, Vm
from forewarn.errors import ForewarnError
from forewarn.scenario.durations import format_duration
from forewarn.scenario.schema import Scenario, parse_scenario

#: What a flow's VM must be: any VM, a Spot VM, or an instance of a scale set whose terminate
#: notification is on.
Needs = Literal["vm", "spot", "scale-set"]
Origin = Literal["captured", "documented"]


class FlowError(ForewarnError):
    """No such flow, or no VM it can run on."""


@dataclass(frozen=True)
class Candidate:
    """A VM a flow could run on, as the control API lists it."""

    name: str
    host: str | None
    spot: bool = False
    scale_set: str | None = None

    @classmethod
    def from_json(cls, vm: Mapping[str, Any]) -> Candidate:
        """One entry of ``GET /api/v1/vms``."""
        spot = vm.get("priority") == Priority.SPOT.value
        return cls(vm["name"], vm.get("host"), spot, vm.get("scaleSet"))

    @classmethod
    def from_vm(cls, vm: Vm) -> Candidate:
        spot = vm.priority is Priority.SPOT
        return cls(vm.name, vm.host, spot, vm.vm_scale_set_name or None)


@dataclass(frozen=True)
class FlowTarget:
    """The VM a flow runs on, its host and, for a scale set's instance, the set and id."""

    vm: str
    host: str
    scale_set: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True)
class Render:
    """What one rendering of a flow knows: where, on which profile, how exactly."""

    target: FlowTarget
    timing: TimingProfile
    exact: bool

    def scaled(self, documented: timedelta) -> timedelta:
        """A figure of the captures, in this profile's reading (dev: minutes as seconds)."""
        return documented / 60 if self.timing is DEV else documented


Steps = list[dict[str, Any]]


@dataclass(frozen=True)
class Flow:
    """One built-in flow: its event, how it is started and the phases it goes through.

    ``notice`` is the time from the event's creation to its NotBefore (None: Started at
    once); ``cancelled_after`` ends it Scheduled, cancelled by the platform; ``during``
    adds steps while it is Started (the documented edge cases), each with the platform time
    it lets pass. ``deletes_vm``: the VM is gone at the end of its impact (Preempt,
    Terminate) rather than shown the event's removal.
    """

    name: str
    title: str
    origin: Origin
    source: str
    summary: str
    event_type: EventType
    event_source: EventSource
    description: str
    duration_seconds: int
    trigger: Callable[[Render], Steps]
    notice: Callable[[Render], timedelta | None]
    needs: Needs = "vm"
    names_resources: bool = True
    cancelled_after: timedelta | None = None
    during: Callable[[Render], tuple[Steps, timedelta]] | None = None
    deletes_vm: bool = False
    captured_as: str | None = None
    notes: tuple[str, ...] = field(default=())

    def timing(self, dev_timing: bool) -> TimingProfile:
        return DEV if dev_timing else DOCUMENTED

    def started_for(self, timing: TimingProfile) -> timedelta:
        """How long the event stays Started in ``timing`` (for a deleted VM: its impact)."""
        if self.deletes_vm:
            return timing.impact_for(self.event_type, self.duration_seconds)
        return timing.started_for(self.event_type, self.description, self.duration_seconds)

    def phases(self, dev_timing: bool = False) -> dict[str, timedelta | None]:
        """Scheduled for (None: Started at once), cancelled after, Started for."""
        render = Render(FlowTarget("vm", "host"), self.timing(dev_timing), exact=True)
        cancelled = None if self.cancelled_after is None else render.scaled(self.cancelled_after)
        return {
            "scheduled": self.notice(render),
            "cancelled": cancelled,
            "started": None if cancelled is not None else self.started_for(render.timing),
        }

    def describe(self) -> dict[str, Any]:
        """The flow as ``forewarn scenario list -o json`` and the dashboard list it."""
        phases = self.phases()
        dev = self.phases(dev_timing=True)
        return {
            "name": self.name,
            "title": self.title,
            "origin": self.origin,
            "source": self.source,
            "summary": self.summary,
            "eventType": self.event_type.value,
            "eventSource": self.event_source.value,
            "description": self.description,
            "durationInSeconds": self.duration_seconds,
            "needs": self.needs,
            "capturedAs": self.captured_as,
            "notes": list(self.notes),
            "scheduledFor": spelled(phases["scheduled"]),
            "cancelledAfter": spelled(phases["cancelled"]),
            "startedFor": spelled(phases["started"]),
            "devTiming": {key: spelled(value) for key, value in dev.items()},
        }

    def scenario_text(
        self, target: FlowTarget, *, dev_timing: bool = False, exact: bool = True
    ) -> str:
        """The flow for ``target`` as a scenario file's YAML."""
        render = Render(target, self.timing(dev_timing), exact)
        document = {
            "name": f"{self.name}{' (dev timing)' if dev_timing else ''} on {target.vm}",
            "description": f"{self.title}: {self.summary} ({self.source})",
            "profile": render.timing.name,
            "steps": self._steps(render),
        }
        header = f"# built-in flow {self.name}: forewarn scenario show --builtin {self.name}\n"
        return header + yaml.safe_dump(document, sort_keys=False, width=100)

    def scenario(
        self, target: FlowTarget, *, dev_timing: bool = False, exact: bool = True
    ) -> Scenario:
        text = self.scenario_text(target, dev_timing=dev_timing, exact=exact)
        return parse_scenario(text, f"builtin:{self.name}")

    # -- the steps -------------------------------------------------------------------------

    def _event(self, status: str, render: Render, not_before: str | None) -> dict[str, Any]:
        event: dict[str, Any] = {"EventStatus": status, "EventType": self.event_type.value}
        event["ResourceType"] = RESOURCE_TYPE_VM
        if self.names_resources:
            event["Resources"] = [render.target.vm]
        if not_before is not None:
            event["NotBefore"] = not_before
        event["Description"] = self.description
        event["EventSource"] = self.event_source.value
        event["DurationInSeconds"] = self.duration_seconds
        return event

    def _steps(self, render: Render) -> Steps:
        vm = render.target.vm
        steps = self.trigger(render)
        notice = self.notice(render)
        kind = f"{self.event_source.value} {self.event_type.value}"
        if notice is not None:
            ahead = f"+{format_duration(notice)}" if render.exact else None
            steps.append(
                {
                    "title": f"Scheduled: a {kind} {format_duration(notice)} ahead",
                    "expect": {"vm": vm, "events": [self._event("Scheduled", render, ahead)]},
                }
            )
            if self.cancelled_after is not None:
                after = render.scaled(self.cancelled_after)
                steps += [
                    {"wait": format_duration(after)},
                    {"title": "the platform cancels it", "cancel": {"vm": vm, "events": "all"}},
                    {"title": "cancelled: gone, never Started", "expect": {"vm": vm, "events": []}},
                ]
                return steps
            steps.append({"title": "its NotBefore comes", "wait": format_duration(notice)})
        started = self._event("Started", render, "")
        steps.append({"title": f"Started: the {kind}", "expect": {"vm": vm, "events": [started]}})
        period = self.started_for(render.timing)
        if self.during is not None:
            during, spent = self.during(render)
            if spent > period:
                raise FlowError(
                    f"flow {self.name!r} needs its event Started for {format_duration(spent)} "
                    f"at least; the {render.timing.name!r} profile keeps it Started for "
                    f"{format_duration(period)}"
                )
            steps += during
            period -= spent
        steps.append({"title": "the Started period ends", "wait": format_duration(period)})
        if self.deletes_vm:
            steps.append({"title": "the VM is gone", "expect": {"vm": vm, "exists": False}})
        else:
            steps.append({"title": "completed: removed", "expect": {"vm": vm, "events": []}})
        return steps


def spelled(value: timedelta | None) -> str | None:
    return None if value is None else format_duration(value)


# -- how flows start --------------------------------------------------------------------------


def on_vm(operation: str) -> Callable[[Render], Steps]:
    return lambda render: [{operation: render.target.vm}]


def on_host(action: str, arguments: Mapping[str, str] | None = None) -> Callable[[Render], Steps]:
    """The host action ``action`` on the flow's host, with what it takes (``{"as": ...}``)."""
    return lambda render: [{"host": {action: render.target.host, **(arguments or {})}}]


def event_step(
    event_type: EventType,
    source: EventSource,
    description: str,
    notice: timedelta | None,
) -> Callable[[Render], Steps]:
    """An event made by hand, for a flow no operation gives with its figures: a captured
    ``notice`` (read as the profile reads minutes), or None for one Started at once."""

    def trigger(render: Render) -> Steps:
        event: dict[str, Any] = {
            "type": event_type.value,
            "resources": [render.target.vm],
            "source": source.value,
            "description": description,
            "durationInSeconds": DURATION_UNKNOWN,
        }
        if notice is None:
            event["started"] = True
        else:
            event["notice"] = format_duration(render.scaled(notice))
        return [{"event": event}]

    return trigger


def delete_instance(render: Render) -> Steps:
    target = render.target
    return [
        {"delete-instances": {"scaleSet": target.scale_set, "instanceIds": [target.instance_id]}}
    ]


def profile_notice(event_type: EventType) -> Callable[[Render], timedelta]:
    """The profile's minimum notice for ``event_type``: what the operation gives."""
    return lambda render: render.timing.notice_for(event_type)


def captured_notice(documented: timedelta) -> Callable[[Render], timedelta]:
    """A captured figure, read as the profile reads minutes."""
    return lambda render: render.scaled(documented)


# -- what happens while Started: the documented edge cases --------------------------------


def reachable(vm: str, reachable: bool, title: str) -> dict[str, Any]:
    return {"title": title, "expect": {"vm": vm, "reachable": reachable}}


def impact(seconds: int) -> Callable[[Render], tuple[Steps, timedelta]]:
    """The VM is paused for ``seconds``, then answers again."""

    def during(render: Render) -> tuple[Steps, timedelta]:
        if not render.exact:
            return [], timedelta(0)
        vm = render.target.vm
        return [
            reachable(vm, False, f"paused for {seconds} s"),
            {"wait": f"{seconds}s"},
            reachable(vm, True, "running again"),
        ], timedelta(seconds=seconds)

    return during


def second_impact(render: Render) -> tuple[Steps, timedelta]:
    """The advertised impact, then a second one half as long while still Started."""
    first, spent = impact(HOST_UPDATE_SECONDS)(render)
    if not render.exact:
        return first, spent
    vm = render.target.vm
    shorter = HOST_UPDATE_SECONDS // 2
    second = [
        {"title": "a second, shorter impact while Started", "impact-again": vm},
        reachable(vm, False, f"paused again, for {shorter} s"),
        {"wait": f"{shorter}s"},
        reachable(vm, True, "running again"),
    ]
    return first + second, spent + timedelta(seconds=shorter)


def freeze_instead(render: Render) -> Steps:
    vm = render.target.vm
    return [
        {"restart": vm},
        {"title": "the Reboot will freeze the VM instead", "freeze-instead": vm},
    ]


__all__ = [
    "Candidate",
    "Flow",
    "FlowError",
    "FlowTarget",
    "Needs",
    "Origin",
    "Render",
    "Steps",
    "captured_notice",
    "delete_instance",
    "event_step",
    "freeze_instead",
    "impact",
    "on_host",
    "on_vm",
    "profile_notice",
    "reachable",
    "second_impact",
    "spelled",
]

"""Built-in flows: real event flows, by name, as scenarios run against one VM.

Azure's overview sends people who test Scheduled Events to Microsoft's mock server, whose
scenarios replay event flows "captured from VMs running in Azure"
(github.com/Azure-Samples/scheduled-events-mock-server, ``main.py``, the ``scenarios`` table;
its README: timings are "median values from a sample of scheduled events sent to Azure
customer in July 2025"). Six of them are here by name, with their figures; so are the other
flows the documentation describes and forewarn can produce. Each flow is a scenario
(:mod:`forewarn.scenario.schema`) made for one VM (and its host, or its scale set): the
operation that starts it, then each document the VM is shown, the waits between them
(``wait``: a manual clock is moved, a real one waited for), and checks of what the VM lives
through where the documentation says so.

A flow's timings are those of a timing profile: ``documented`` (the captures' minutes), or
``dev`` with ``dev_timing``, which reads the minutes as seconds as the mock server's "Dev
Timing" variants do. The Started period of each flow is its kind's in that profile
(:meth:`forewarn.domain.timing.TimingProfile.started_period_for`: 5 minutes for a live
migration), so the figure is said once. A flow asks the server to run that profile.

On a manual clock every check is exact. On a system or scaled clock a flow plays out in
real time and leaves out what only a manual clock can pin to the second: the NotBefore text
and whether the VM is reachable during a few seconds' impact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import yaml

from forewarn.domain import descriptions
from forewarn.domain.events import DURATION_UNKNOWN, RESOURCE_TYPE_VM, EventSource, EventType
from forewarn.domain.operations import HOST_UPDATE_SECONDS, LIVE_MIGRATION_SECONDS
from forewarn.domain.timing import DEV, DOCUMENTED, TimingProfile
from forewarn.domain.vms import Priority, Vm
from forewarn.errors import ForewarnError
from forewarn.scenario.client import ControlClient
from forewarn.scenario.durations import format_duration
from forewarn.scenario.runner import MANUAL_CLOCK
from forewarn.scenario.schema import Scenario, parse_scenario

#: What a flow's VM must be: any VM, a Spot VM, or an instance of a scale set whose terminate
#: notification is on.
Needs = Literal["vm", "spot", "scale-set"]
Origin = Literal["captured", "documented"]

MOCK_SERVER = "github.com/Azure-Samples/scheduled-events-mock-server, main.py"
OVERVIEW = "learn.microsoft.com/azure/virtual-machines/scheduled-events-overview"
VM_PAGES = "learn.microsoft.com/azure/virtual-machines/linux/scheduled-events"


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
class _Render:
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
    trigger: Callable[[_Render], Steps]
    notice: Callable[[_Render], timedelta | None]
    needs: Needs = "vm"
    names_resources: bool = True
    cancelled_after: timedelta | None = None
    during: Callable[[_Render], tuple[Steps, timedelta]] | None = None
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
        render = _Render(FlowTarget("vm", "host"), self.timing(dev_timing), exact=True)
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
            "scheduledFor": _spelled(phases["scheduled"]),
            "cancelledAfter": _spelled(phases["cancelled"]),
            "startedFor": _spelled(phases["started"]),
            "devTiming": {key: _spelled(value) for key, value in dev.items()},
        }

    def scenario_text(
        self, target: FlowTarget, *, dev_timing: bool = False, exact: bool = True
    ) -> str:
        """The flow for ``target`` as a scenario file's YAML."""
        render = _Render(target, self.timing(dev_timing), exact)
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

    def _event(self, status: str, render: _Render, not_before: str | None) -> dict[str, Any]:
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

    def _steps(self, render: _Render) -> Steps:
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


def _spelled(value: timedelta | None) -> str | None:
    return None if value is None else format_duration(value)


# -- how flows start --------------------------------------------------------------------------


def _on_vm(operation: str) -> Callable[[_Render], Steps]:
    return lambda render: [{operation: render.target.vm}]


def _on_host(action: str) -> Callable[[_Render], Steps]:
    return lambda render: [{"host": {action: render.target.host}}]


def _event_step(
    event_type: EventType,
    source: EventSource,
    description: str,
    notice: timedelta | None,
) -> Callable[[_Render], Steps]:
    """An event made by hand, for a flow no operation gives with its figures: a captured
    ``notice`` (read as the profile reads minutes), or None for one Started at once."""

    def trigger(render: _Render) -> Steps:
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


def _delete_instance(render: _Render) -> Steps:
    target = render.target
    return [
        {"delete-instances": {"scaleSet": target.scale_set, "instanceIds": [target.instance_id]}}
    ]


def _profile_notice(event_type: EventType) -> Callable[[_Render], timedelta]:
    """The profile's minimum notice for ``event_type``: what the operation gives."""
    return lambda render: render.timing.notice_for(event_type)


def _captured_notice(documented: timedelta) -> Callable[[_Render], timedelta]:
    """A captured figure, read as the profile reads minutes."""
    return lambda render: render.scaled(documented)


# -- what happens while Started: the documented edge cases --------------------------------


def _reachable(vm: str, reachable: bool, title: str) -> dict[str, Any]:
    return {"title": title, "expect": {"vm": vm, "reachable": reachable}}


def _impact(seconds: int) -> Callable[[_Render], tuple[Steps, timedelta]]:
    """The VM is paused for ``seconds``, then answers again."""

    def during(render: _Render) -> tuple[Steps, timedelta]:
        if not render.exact:
            return [], timedelta(0)
        vm = render.target.vm
        return [
            _reachable(vm, False, f"paused for {seconds} s"),
            {"wait": f"{seconds}s"},
            _reachable(vm, True, "running again"),
        ], timedelta(seconds=seconds)

    return during


def _second_impact(render: _Render) -> tuple[Steps, timedelta]:
    """The advertised impact, then a second one half as long while still Started."""
    first, spent = _impact(HOST_UPDATE_SECONDS)(render)
    if not render.exact:
        return first, spent
    vm = render.target.vm
    shorter = HOST_UPDATE_SECONDS // 2
    second = [
        {"title": "a second, shorter impact while Started", "impact-again": vm},
        _reachable(vm, False, f"paused again, for {shorter} s"),
        {"wait": f"{shorter}s"},
        _reachable(vm, True, "running again"),
    ]
    return first + second, spent + timedelta(seconds=shorter)


def _freeze_instead(render: _Render) -> Steps:
    vm = render.target.vm
    return [
        {"restart": vm},
        {"title": "the Reboot will freeze the VM instead", "freeze-instead": vm},
    ]


# -- the flows ----------------------------------------------------------------------------------

_MINUTES_15 = timedelta(minutes=15)

FLOWS: tuple[Flow, ...] = (
    Flow(
        "live-migration",
        "Live Migration",
        "captured",
        MOCK_SERVER,
        "a Platform Freeze of 5 s, Scheduled 15 min ahead, Started for 5 min",
        EventType.FREEZE,
        EventSource.PLATFORM,
        descriptions.LIVE_MIGRATION,
        LIVE_MIGRATION_SECONDS,
        _on_host("live-migrate"),
        _profile_notice(EventType.FREEZE),
        names_resources=False,
        captured_as="Live Migration",
    ),
    Flow(
        "user-reboot",
        "User Reboot",
        "captured",
        MOCK_SERVER,
        "a User Reboot, Scheduled 15 min ahead, Started for 10 min",
        EventType.REBOOT,
        EventSource.USER,
        descriptions.USER_RESTART,
        DURATION_UNKNOWN,
        _on_vm("restart"),
        _profile_notice(EventType.REBOOT),
        captured_as="User Reboot",
    ),
    Flow(
        "host-agent-maintenance",
        "Host Agent Maintenance",
        "captured",
        MOCK_SERVER,
        "a Platform Freeze of 9 s (host maintenance), Scheduled 15 min ahead, Started for 10 min",
        EventType.FREEZE,
        EventSource.PLATFORM,
        descriptions.HOST_MAINTENANCE,
        HOST_UPDATE_SECONDS,
        _on_host("update"),
        _profile_notice(EventType.FREEZE),
        names_resources=False,
        captured_as="Host Agent Maintenance",
    ),
    Flow(
        "redeploy",
        "Redeploy",
        "captured",
        MOCK_SERVER,
        "a Platform Redeploy after a failure, Scheduled 15 min ahead, Started for 10 min",
        EventType.REDEPLOY,
        EventSource.PLATFORM,
        descriptions.VM_FAILURE,
        DURATION_UNKNOWN,
        _event_step(EventType.REDEPLOY, EventSource.PLATFORM, descriptions.VM_FAILURE, _MINUTES_15),
        _captured_notice(_MINUTES_15),
        captured_as="Redeploy",
    ),
    Flow(
        "user-redeploy",
        "User Redeploy",
        "captured",
        MOCK_SERVER,
        "a User Redeploy, Scheduled 15 min ahead (the capture; the minimum is 10), Started for "
        "10 min",
        EventType.REDEPLOY,
        EventSource.USER,
        descriptions.USER_REDEPLOY,
        DURATION_UNKNOWN,
        _event_step(EventType.REDEPLOY, EventSource.USER, descriptions.USER_REDEPLOY, _MINUTES_15),
        _captured_notice(_MINUTES_15),
        captured_as="User Redeploy",
    ),
    Flow(
        "canceled-maintenance",
        "Canceled Maintenance",
        "captured",
        MOCK_SERVER,
        "a Platform Freeze of 9 s Scheduled 15 min ahead, cancelled after 8 min",
        EventType.FREEZE,
        EventSource.PLATFORM,
        descriptions.HOST_MAINTENANCE,
        HOST_UPDATE_SECONDS,
        _on_host("update"),
        _profile_notice(EventType.FREEZE),
        names_resources=False,
        cancelled_after=timedelta(minutes=8),
        captured_as="Canceled Maintenance",
    ),
    Flow(
        "host-freeze",
        "Host update (the most common event)",
        "documented",
        f"{OVERVIEW}: DurationInSeconds 9; typical timeline 15 min, 10 min",
        "a Platform Freeze pausing the VM for 9 s, Scheduled 15 min ahead, Started for 10 min",
        EventType.FREEZE,
        EventSource.PLATFORM,
        descriptions.HOST_MAINTENANCE,
        HOST_UPDATE_SECONDS,
        _on_host("update"),
        _profile_notice(EventType.FREEZE),
        names_resources=False,
        during=_impact(HOST_UPDATE_SECONDS),
    ),
    Flow(
        "spot-eviction",
        "Spot eviction",
        "documented",
        f"{VM_PAGES}: Preempt, minimum notice 30 seconds",
        "a Preempt 30 s ahead; the Spot VM is deleted at the end of its impact",
        EventType.PREEMPT,
        EventSource.PLATFORM,
        "",
        DURATION_UNKNOWN,
        _on_vm("simulate-eviction"),
        _profile_notice(EventType.PREEMPT),
        needs="spot",
        deletes_vm=True,
    ),
    Flow(
        "terminate",
        "Scale-set delete with terminate notification",
        "documented",
        "learn.microsoft.com/azure/virtual-machine-scale-sets/"
        "virtual-machine-scale-sets-terminate-notification",
        "a User Terminate the set's notBeforeTimeout ahead (PT5M by default); the instance is "
        "deleted at the end of its impact",
        EventType.TERMINATE,
        EventSource.USER,
        "",
        DURATION_UNKNOWN,
        _delete_instance,
        lambda render: (
            render.timing.terminate_notice or render.timing.notice_for(EventType.TERMINATE)
        ),
        needs="scale-set",
        deletes_vm=True,
        notes=("the set's notBeforeTimeout must be the default PT5M on the documented profile",),
    ),
    Flow(
        "predicted-failure",
        "Predicted hardware failure",
        "documented",
        f'{VM_PAGES}: "Azure tries to give 7 days\' advance notice"',
        "a Platform Redeploy 7 days ahead (emergency repair), Started for 10 min",
        EventType.REDEPLOY,
        EventSource.PLATFORM,
        descriptions.EMERGENCY_REPAIR,
        DURATION_UNKNOWN,
        _on_host("predict-failure"),
        lambda render: render.timing.predicted_failure_notice,
        names_resources=False,
    ),
    Flow(
        "hardware-failure",
        "Hardware failure",
        "documented",
        f'{OVERVIEW}: "an event is created for all impacted VMs with EventType = Redeploy and '
        'EventStatus = Started"',
        "a Platform Redeploy Started at once, no notice; Started for 10 min",
        EventType.REDEPLOY,
        EventSource.PLATFORM,
        descriptions.VM_FAILURE,
        DURATION_UNKNOWN,
        _event_step(EventType.REDEPLOY, EventSource.PLATFORM, descriptions.VM_FAILURE, None),
        lambda render: None,
        notes=("the VM pages say Reboot: forewarn host fail gives that one",),
    ),
    Flow(
        "freeze-instead",
        "A Reboot that freezes instead",
        "documented",
        f'{VM_PAGES}: "In rare cases a VM scheduled for EventType:"Reboot" may experience a '
        'freeze event instead of a reboot"',
        "a User Reboot 15 min ahead whose impact is a 5 s freeze; Started for 10 min",
        EventType.REBOOT,
        EventSource.USER,
        descriptions.USER_RESTART,
        DURATION_UNKNOWN,
        _freeze_instead,
        _profile_notice(EventType.REBOOT),
        during=_impact(LIVE_MIGRATION_SECONDS),
    ),
    Flow(
        "second-impact",
        "A second, shorter impact",
        "documented",
        f'{VM_PAGES}: "there may be another impact of a shorter duration than what was advertised"',
        "a 9 s host-update Freeze, then a 4 s one while still Started; Started for 10 min",
        EventType.FREEZE,
        EventSource.PLATFORM,
        descriptions.HOST_MAINTENANCE,
        HOST_UPDATE_SECONDS,
        _on_host("update"),
        _profile_notice(EventType.FREEZE),
        names_resources=False,
        during=_second_impact,
    ),
)

BY_NAME: dict[str, Flow] = {flow.name: flow for flow in FLOWS}


def find_flow(name: str) -> Flow:
    try:
        return BY_NAME[name]
    except KeyError:
        raise FlowError(f"no built-in flow {name!r}; known: {', '.join(BY_NAME)}") from None


def choose_target(flow: Flow, candidates: Iterable[Candidate], vm: str | None = None) -> FlowTarget:
    """The VM ``flow`` runs on: ``vm``, or the first of ``candidates`` it can run on."""
    listed = list(candidates)
    if vm is not None:
        chosen = [c for c in listed if c.name == vm]
        if not chosen:
            raise FlowError(f"no VM named {vm!r}")
        if not _fits(flow, chosen[0]):
            raise FlowError(f"flow {flow.name!r} needs {_NEEDS[flow.needs]}; {vm} is not one")
    else:
        chosen = [c for c in listed if _fits(flow, c)]
        if not chosen:
            raise FlowError(
                f"flow {flow.name!r} needs {_NEEDS[flow.needs]}, and the fleet has none "
                "(examples/flows/fleet.yaml has one of each)"
            )
    candidate = chosen[0]
    scale_set = candidate.scale_set if flow.needs == "scale-set" else None
    instance = candidate.name.removeprefix(f"{scale_set}_") if scale_set else None
    return FlowTarget(candidate.name, candidate.host or "", scale_set, instance)


def flow_scenario(
    client: ControlClient, name: str, *, vm: str | None = None, dev_timing: bool = False
) -> Scenario:
    """The built-in flow ``name`` for the VM ``vm`` (or the first it can run on) of the
    server behind ``client``; exact to the second when that server's clock is manual."""
    flow = find_flow(name)
    candidates = [Candidate.from_json(entry) for entry in client.get("/vms")["vms"]]
    target = choose_target(flow, candidates, vm)
    exact = client.get("/clock").get("kind") == MANUAL_CLOCK
    return flow.scenario(target, dev_timing=dev_timing, exact=exact)


_NEEDS: dict[str, str] = {
    "vm": "a VM",
    "spot": "a Spot VM",
    "scale-set": "a scale-set instance (with terminate notification)",
}


def _fits(flow: Flow, candidate: Candidate) -> bool:
    if flow.needs == "spot":
        return candidate.spot
    if flow.needs == "scale-set":
        return candidate.scale_set is not None
    return candidate.host is not None


__all__ = [
    "BY_NAME",
    "FLOWS",
    "Candidate",
    "Flow",
    "FlowError",
    "FlowTarget",
    "choose_target",
    "find_flow",
    "flow_scenario",
]

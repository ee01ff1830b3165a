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

from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from urllib.parse import quote

from forewarn.domain import descriptions
from forewarn.domain.events import DURATION_UNKNOWN, EventSource, EventType
from forewarn.domain.operations import HOST_UPDATE_SECONDS, LIVE_MIGRATION_SECONDS
from forewarn.scenario._flow import (
    Candidate,
    Flow,
    FlowError,
    FlowTarget,
    captured_notice,
    delete_instance,
    event_step,
    freeze_instead,
    impact,
    on_host,
    on_vm,
    profile_notice,
    second_impact,
)
from forewarn.scenario.client import ControlClient
from forewarn.scenario.schema import Scenario
from forewarn.scenario.steps import MANUAL_CLOCK

MOCK_SERVER = "github.com/Azure-Samples/scheduled-events-mock-server, main.py"
OVERVIEW = "learn.microsoft.com/azure/virtual-machines/scheduled-events-overview"
VM_PAGES = "learn.microsoft.com/azure/virtual-machines/linux/scheduled-events"
WINDOWS_PAGE = "learn.microsoft.com/azure/virtual-machines/windows/scheduled-events"


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
        on_host("live-migrate"),
        profile_notice(EventType.FREEZE),
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
        on_vm("restart"),
        profile_notice(EventType.REBOOT),
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
        on_host("update"),
        profile_notice(EventType.FREEZE),
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
        event_step(EventType.REDEPLOY, EventSource.PLATFORM, descriptions.VM_FAILURE, _MINUTES_15),
        captured_notice(_MINUTES_15),
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
        event_step(EventType.REDEPLOY, EventSource.USER, descriptions.USER_REDEPLOY, _MINUTES_15),
        captured_notice(_MINUTES_15),
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
        on_host("update"),
        profile_notice(EventType.FREEZE),
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
        on_host("update"),
        profile_notice(EventType.FREEZE),
        names_resources=False,
        during=impact(HOST_UPDATE_SECONDS),
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
        on_vm("simulate-eviction"),
        profile_notice(EventType.PREEMPT),
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
        delete_instance,
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
        on_host("predict-failure"),
        lambda render: render.timing.predicted_failure_notice,
        names_resources=False,
    ),
    Flow(
        "hardware-failure",
        "Hardware failure",
        "documented",
        f'{WINDOWS_PAGE}, "Event scheduling": "an event will be created for all impacted VMs '
        'with EventType = Reboot and EventStatus = Started"',
        "a Platform Reboot Started at once for every VM of the failed host, no notice; Started "
        "for 10 min",
        EventType.REBOOT,
        EventSource.PLATFORM,
        descriptions.VM_FAILURE,
        DURATION_UNKNOWN,
        on_host("fail"),
        lambda render: None,
        names_resources=False,
        notes=("the newer overview says Redeploy: the flow hardware-failure-redeploy",),
    ),
    Flow(
        "hardware-failure-redeploy",
        "Hardware failure, as the overview tells it",
        "documented",
        f'{OVERVIEW}, "Exceptional Cases": "an event is created for all impacted VMs with '
        'EventType = Redploy [sic] and EventStatus = Started"',
        "a Platform Redeploy Started at once for every VM of the failed host, no notice; "
        "Started for 10 min",
        EventType.REDEPLOY,
        EventSource.PLATFORM,
        descriptions.VM_FAILURE,
        DURATION_UNKNOWN,
        on_host("fail", {"as": "redeploy"}),
        lambda render: None,
        names_resources=False,
        notes=("forewarn host fail --as redeploy; the VM pages' Reboot is the default",),
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
        freeze_instead,
        profile_notice(EventType.REBOOT),
        during=impact(LIVE_MIGRATION_SECONDS),
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
        on_host("update"),
        profile_notice(EventType.FREEZE),
        names_resources=False,
        during=second_impact,
    ),
)

BY_NAME: dict[str, Flow] = {flow.name: flow for flow in FLOWS}


def find_flow(name: str) -> Flow:
    try:
        return BY_NAME[name]
    except KeyError:
        raise FlowError(f"no built-in flow {name!r}; known: {', '.join(BY_NAME)}") from None


def choose_target(
    flow: Flow,
    candidates: Iterable[Candidate],
    vm: str | None = None,
    shown: Callable[[str], Sequence[str]] = lambda _: (),
) -> FlowTarget:
    """The VM ``flow`` runs on: ``vm``, or the first of ``candidates`` it can run on that is
    shown no event. ``shown(name)`` describes the events a VM is shown now: a flow's checks
    compare the VM's whole document, so a live event there would fail them after the run had
    started, with a diff that does not say why."""
    listed = list(candidates)
    if vm is not None:
        chosen = [c for c in listed if c.name == vm]
        if not chosen:
            raise FlowError(f"no VM named {vm!r}")
        if not _fits(flow, chosen[0]):
            raise FlowError(f"flow {flow.name!r} needs {_NEEDS[flow.needs]}; {vm} is not one")
        _check_idle(flow, vm, shown(vm))
        candidate = chosen[0]
    else:
        fitting = [c for c in listed if _fits(flow, c)]
        if not fitting:
            raise FlowError(
                f"flow {flow.name!r} needs {_NEEDS[flow.needs]}, and the fleet has none "
                "(examples/flows/fleet.yaml has one of each)"
            )
        idle = next((c for c in fitting if not shown(c.name)), None)
        if idle is None:
            busy = fitting[0].name
            raise FlowError(
                f"flow {flow.name!r} checks its VM's whole document, and every VM it fits "
                f"({len(fitting)}) is shown live events ({busy}: {', '.join(shown(busy))}): "
                "let them end, cancel them (forewarn events cancel), or add an idle VM"
            )
        candidate = idle
    scale_set = candidate.scale_set if flow.needs == "scale-set" else None
    instance = candidate.name.removeprefix(f"{scale_set}_") if scale_set else None
    return FlowTarget(candidate.name, candidate.host or "", scale_set, instance)


def _check_idle(flow: Flow, vm: str, events: Sequence[str]) -> None:
    """A FlowError naming what ``vm`` is shown, when it is shown anything."""
    if events:
        raise FlowError(
            f"flow {flow.name!r} checks {vm}'s whole document, and {vm} is shown "
            f"{', '.join(events)}: let it end, cancel it (forewarn events cancel), or choose "
            "another VM (--vm)"
        )


def described(events: Iterable[tuple[str, str, str]]) -> list[str]:
    """``Reboot Scheduled EDE4DCA4`` for each (type, status, EventId) of ``events``."""
    return [f"{kind} {status} {event_id[:8]}" for kind, status, event_id in events]


def flow_scenario(
    client: ControlClient, name: str, *, vm: str | None = None, dev_timing: bool = False
) -> Scenario:
    """The built-in flow ``name`` for the VM ``vm`` (or the first it can run on that is shown
    no event) of the server behind ``client``; exact to the second when that server's clock is
    manual."""
    flow = find_flow(name)
    candidates = [Candidate.from_json(entry) for entry in client.get("/vms")["vms"]]

    def shown(name: str) -> list[str]:
        events = client.get(f"/vms/{quote(name, safe='')}/document")["Events"]
        return described((e["EventType"], e["EventStatus"], e["EventId"]) for e in events)

    target = choose_target(flow, candidates, vm, shown)
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
    "described",
    "find_flow",
    "flow_scenario",
]

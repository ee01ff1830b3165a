"""Built-in flows: each runs by name, and the VM is shown exactly its documents, in order, at
its times (manual clock).

The captured flows' figures are Microsoft's mock server's
(github.com/Azure-Samples/scheduled-events-mock-server, ``main.py``, its ``scenarios`` table:
EventType, EventSource, Description, ``NotBeforeDelayInMinutes`` and the ``EventStatus``
durations, DurationInSeconds; the "Dev Timing" variants the same in seconds). They are written
out here again, from that table, so a flow that drifted from the capture fails. The documented
ones cite their page.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from forewarn.config.fleet import default_fleet
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.clock import DEFAULT_START as START
from forewarn.domain.events import EventType
from forewarn.domain.timing import DEV, DOCUMENTED
from forewarn.scenario import in_process_control, run_scenario
from forewarn.scenario.flows import FLOWS, FlowError, FlowTarget, find_flow
from forewarn.scenario.schema import Scenario
from forewarn.scenario.steps import WAIT_POLL
from forewarn.service import service_for_fleet
from forewarn.testing import ForewarnPlatform, MakePlatform
from forewarn.wire.dates import format_not_before
from forewarn.wire.documents import document_fields

FLEET = Path(__file__).resolve().parents[2] / "examples" / "flows" / "fleet.yaml"
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)

LIVE_MIGRATION = (
    "Virtual machine is being paused because of a memory-preserving Live Migration operation."
)
USER_RESTART = "Virtual machine is going to be restarted as requested by authorized user."
HOST_MAINTENANCE = "Host server is undergoing maintenance."
VM_FAILURE = "Virtual machine has encountered a failure."
USER_REDEPLOY = "Virtual machine is going to be redeployed as requested by authorized user."
EMERGENCY_REPAIR = "Host server is undergoing an emergency repair."


@dataclass(frozen=True)
class Expected:
    """A flow as its source states it: the event, then Scheduled for ``scheduled`` (None:
    Started at once), Started for ``started`` or cancelled after ``cancelled``; ``vm`` the
    fleet's VM it runs on, ``deleted``: the VM is gone at the end."""

    event_type: str
    source: str
    description: str
    duration: int
    scheduled: timedelta | None
    started: timedelta | None
    cancelled: timedelta | None = None
    vm: str = "vm0"
    deleted: bool = False


EXPECTED = {
    # the mock server's table
    "live-migration": Expected("Freeze", "Platform", LIVE_MIGRATION, 5, 15 * MINUTE, 5 * MINUTE),
    "user-reboot": Expected("Reboot", "User", USER_RESTART, -1, 15 * MINUTE, 10 * MINUTE),
    "host-agent-maintenance": Expected(
        "Freeze", "Platform", HOST_MAINTENANCE, 9, 15 * MINUTE, 10 * MINUTE
    ),
    "redeploy": Expected("Redeploy", "Platform", VM_FAILURE, -1, 15 * MINUTE, 10 * MINUTE),
    "user-redeploy": Expected("Redeploy", "User", USER_REDEPLOY, -1, 15 * MINUTE, 10 * MINUTE),
    "canceled-maintenance": Expected(
        "Freeze", "Platform", HOST_MAINTENANCE, 9, 15 * MINUTE, None, cancelled=8 * MINUTE
    ),
    # learn.microsoft.com .../scheduled-events-overview: DurationInSeconds "9: The
    # interruption caused by the event lasts for 9 seconds"; "Scheduled to Approval Timeout:
    # 15 minutes", "Started to Completed: 10 minutes"
    "host-freeze": Expected("Freeze", "Platform", HOST_MAINTENANCE, 9, 15 * MINUTE, 10 * MINUTE),
    # .../linux/scheduled-events, "Event Scheduling": Preempt 30 seconds; the VM is deleted
    # (its impact is the documented typical 7 seconds)
    "spot-eviction": Expected(
        "Preempt", "Platform", "", -1, 30 * SECOND, 7 * SECOND, vm="spot0", deleted=True
    ),
    # .../virtual-machine-scale-sets-terminate-notification: notBeforeTimeout, default PT5M
    "terminate": Expected(
        "Terminate", "User", "", -1, 5 * MINUTE, 7 * SECOND, vm="web_0", deleted=True
    ),
    # "Azure tries to give 7 days' advance notice"
    "predicted-failure": Expected(
        "Redeploy", "Platform", EMERGENCY_REPAIR, -1, 7 * 24 * 60 * MINUTE, 10 * MINUTE
    ),
    # the Windows VM page, "Event scheduling": "an event will be created for all impacted VMs
    # with EventType = Reboot and EventStatus = Started" (the default: forewarn host fail)
    "hardware-failure": Expected("Reboot", "Platform", VM_FAILURE, -1, None, 10 * MINUTE),
    # the overview, "Exceptional Cases": "EventType = Redploy [sic] and EventStatus = Started"
    "hardware-failure-redeploy": Expected(
        "Redeploy", "Platform", VM_FAILURE, -1, None, 10 * MINUTE
    ),
    # a Reboot whose impact is a freeze: the document is the User Reboot's
    "freeze-instead": Expected("Reboot", "User", USER_RESTART, -1, 15 * MINUTE, 10 * MINUTE),
    # a second impact changes no document
    "second-impact": Expected("Freeze", "Platform", HOST_MAINTENANCE, 9, 15 * MINUTE, 10 * MINUTE),
}


def test_every_flow_is_expected_here() -> None:
    assert [flow.name for flow in FLOWS] == list(EXPECTED)


@pytest.mark.parametrize("name", EXPECTED)
def test_a_flows_figures_are_its_sources(name: str) -> None:
    flow, expected = find_flow(name), EXPECTED[name]
    described = flow.describe()
    assert (
        described["eventType"],
        described["eventSource"],
        described["description"],
        described["durationInSeconds"],
    ) == (expected.event_type, expected.source, expected.description, expected.duration)
    assert flow.phases() == {
        "scheduled": expected.scheduled,
        "cancelled": expected.cancelled,
        "started": expected.started,
    }


@pytest.mark.parametrize("name", [f.name for f in FLOWS if f.origin == "captured"])
def test_dev_timing_reads_the_captured_minutes_as_seconds(name: str) -> None:
    """The mock server's README: "The "Dev Timing" scenarios have all the timing reduced by a
    factor of 60"; the Started period after the VM's impact, which the mock (pausing no VM)
    never had, so that a VM sees the whole period (docs/flows.md, "Dev timing")."""
    flow = find_flow(name)
    documented, dev = flow.phases(), flow.phases(dev_timing=True)
    impact = DEV.impact_for(flow.event_type, flow.duration_seconds)
    for phase, value in documented.items():
        paused = impact if phase == "started" and value is not None else timedelta(0)
        assert dev[phase] == (None if value is None else value / 60 + paused), phase


# -- each flow, by name, on a manual clock --------------------------------------------------


Seen = list[tuple[timedelta, int, list[dict[str, Any]]]]


def _event(expected: Expected, status: str, vm: str, not_before: str) -> dict[str, Any]:
    return {
        "EventStatus": status,
        "EventType": expected.event_type,
        "ResourceType": "VirtualMachine",
        "Resources": [vm],
        "NotBefore": not_before,
        "Description": expected.description,
        "EventSource": expected.source,
        "DurationInSeconds": expected.duration,
    }


def expected_documents(expected: Expected, start: datetime) -> Seen:
    """(time from the flow's start, DocumentIncarnation, events without EventId) each time
    the VM's document changes."""
    vm = expected.vm
    seen: Seen = [(timedelta(0), 1, [])]
    if expected.scheduled is None:
        assert expected.started is not None
        seen.append((timedelta(0), 2, [_event(expected, "Started", vm, "")]))
        seen.append((expected.started, 3, []))
        return seen
    not_before = format_not_before(start + expected.scheduled)
    seen.append((timedelta(0), 2, [_event(expected, "Scheduled", vm, not_before)]))
    if expected.cancelled is not None:
        seen.append((expected.cancelled, 3, []))
        return seen
    assert expected.started is not None
    seen.append((expected.scheduled, 3, [_event(expected, "Started", vm, "")]))
    if not expected.deleted:
        seen.append((expected.scheduled + expected.started, 4, []))
    return seen


class Poller:
    """Reads the VM's document as api-version 2020-07-01 shows it after every step, and keeps
    each one that differs from the last, with the platform time it was first seen at."""

    def __init__(self, platform: ForewarnPlatform, vm: str) -> None:
        self.platform, self.vm = platform, vm
        self.start = platform.now
        self.seen: Seen = []
        self.gone_at: timedelta | None = None

    def poll(self, *_: object) -> None:
        at = self.platform.now - self.start
        if self.vm not in self.platform.vm_names:
            if self.gone_at is None:
                self.gone_at = at
            return
        fields = document_fields(self.platform.document(self.vm), CURRENT_VERSION)
        events = [{k: v for k, v in e.items() if k != "EventId"} for e in fields["Events"]]
        if not self.seen or self.seen[-1][1:] != (fields["DocumentIncarnation"], events):
            self.seen.append((at, fields["DocumentIncarnation"], events))


@pytest.mark.parametrize("name", EXPECTED)
def test_a_flow_runs_by_name_and_the_vm_is_shown_exactly_its_documents(
    name: str, make_forewarn_platform: MakePlatform
) -> None:
    expected = EXPECTED[name]
    platform = make_forewarn_platform(fleet=FLEET)
    poller = Poller(platform, expected.vm)
    poller.poll()
    result = platform.run_flow(name, expected.vm, on_step=poller.poll)
    assert result.passed, result.failure
    assert poller.seen == expected_documents(expected, poller.start)
    if expected.deleted:
        assert expected.scheduled is not None
        assert expected.started is not None
        assert poller.gone_at == expected.scheduled + expected.started


def test_a_flow_chooses_the_first_vm_it_fits(make_forewarn_platform: MakePlatform) -> None:
    platform = make_forewarn_platform(fleet=FLEET)
    assert platform.run_flow("spot-eviction").passed
    assert "spot0" not in platform.vm_names
    assert platform.vm_names == ("vm0", "web_0")


def test_a_flow_with_no_vm_to_run_on_says_what_it_needs(
    make_forewarn_platform: MakePlatform,
) -> None:
    platform = make_forewarn_platform(vms=["vm0"])
    with pytest.raises(FlowError, match=r"'spot-eviction' needs a Spot VM, and the fleet has none"):
        platform.run_flow("spot-eviction")
    with pytest.raises(FlowError, match="needs a Spot VM; vm0 is not one"):
        platform.run_flow("spot-eviction", "vm0")
    with pytest.raises(FlowError, match="no built-in flow 'migration'; known: live-migration"):
        platform.run_flow("migration")


def test_a_dev_timing_flow_needs_the_dev_profile(make_forewarn_platform: MakePlatform) -> None:
    """The flow's timings are the dev profile's; on another profile it fails before step 1,
    naming both."""
    platform = make_forewarn_platform(fleet=FLEET)
    result = platform.run_flow("live-migration", dev_timing=True)
    assert result.failure is not None
    assert result.failure.number == 0
    assert "needs timing profile 'dev'" in result.failure.problems[0]
    assert platform.run_flow("live-migration").passed


@pytest.mark.parametrize("name", EXPECTED)
def test_every_flow_runs_in_dev_timing(name: str, make_forewarn_platform: MakePlatform) -> None:
    """Each document at the captured time read as seconds; the removal after the Started
    period counted from the end of the VM's impact (docs/flows.md, "Dev timing"), so the VM
    is shown Started for the whole period once it runs again."""
    expected = EXPECTED[name]
    platform = make_forewarn_platform(fleet=FLEET, profile="dev")
    poller = Poller(platform, expected.vm)
    poller.poll()
    result = platform.run_flow(name, expected.vm, dev_timing=True, on_step=poller.poll)
    assert result.passed, result.failure
    documents = expected_documents(expected, poller.start)
    times = [at / 60 for at, _, _ in documents]
    ends_started = expected.cancelled is None and not expected.deleted
    if ends_started:
        times[-1] += DEV.impact_for(EventType(expected.event_type), expected.duration)
    assert [at for at, _, _ in poller.seen] == times


def test_a_flow_whose_impacts_outlast_its_started_period_is_refused() -> None:
    """A flow whose edge case takes longer than the profile keeps its event Started cannot
    be shown as its source tells it: refused before anything runs."""
    second = find_flow("second-impact")
    impatient = dataclasses.replace(
        second, during=lambda render: ([], second.started_for(render.timing) + SECOND)
    )
    with pytest.raises(FlowError, match="Started for 20s at least; the 'dev' profile keeps it"):
        impatient.scenario(FlowTarget("vm0", "h0"), dev_timing=True)


# -- on a real clock ------------------------------------------------------------------------


def test_on_a_system_clock_a_flow_waits_in_real_time_and_skips_the_exact_checks() -> None:
    """Off a manual clock the NotBefore text and a few seconds' reachability cannot be
    pinned to the second, so they are left out; waits read the clock until it has moved."""
    flow = find_flow("host-freeze")
    exact = flow.scenario(FlowTarget("vm0", "h0"), exact=True)
    loose = flow.scenario(FlowTarget("vm0", "h0"), exact=False)

    def kinds(scenario: Scenario) -> list[str]:
        return [step.kind for step in scenario.steps]

    assert kinds(exact).count("wait") == 3
    assert kinds(loose).count("wait") == 2
    scheduled = next(step for step in loose.steps if step.kind == "expect")
    assert "not_before" not in scheduled.value.events[0].model_dump(exclude_none=True)
    assert not any(
        step.kind == "expect" and step.value.reachable is not None for step in loose.steps
    )


class SteppedClock:
    """A system-like clock (not a manual one) that moves only when waited on."""

    def __init__(self, start: datetime) -> None:
        self.moment = start
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.moment

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.moment += timedelta(seconds=seconds * 60)  # a clock scaled 60 times


def test_a_wait_on_a_clock_that_cannot_be_moved_reads_it_until_it_has_gone_that_far() -> None:
    """``wait`` moves a manual clock; a system or scaled clock (which the control API refuses
    to move, 409) is waited for: the flow plays out in real time, each step after its wait
    seeing what fell due."""
    clock = SteppedClock(START)
    service = service_for_fleet(default_fleet(), clock, timing=DOCUMENTED)
    flow = find_flow("user-reboot")
    with in_process_control(service) as client:
        scenario = flow.scenario(FlowTarget("vm0", "host-vm0"), exact=False)
        result = run_scenario(scenario, client, sleep=clock.sleep)
    assert result.passed, result.failure
    assert clock.moment - START >= 25 * MINUTE
    assert max(clock.slept) <= WAIT_POLL
    assert clock.moment - START < 25 * MINUTE + 2 * WAIT_POLL * MINUTE

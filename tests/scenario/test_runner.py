"""The runner: every action, each kind of expectation, and how failures are reported."""

from __future__ import annotations

from forewarn.scenario import ControlClient, in_process_control, parse_scenario, run_scenario
from forewarn.testing import ForewarnPlatform

from .scenario_support import run_text

FREEZE = "[{EventType: Freeze}]"


def test_a_wrong_expectation_fails_with_expected_and_actual() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": the
    Freeze names both VMs; a scenario claiming only one fails at that step with both values
    shown."""
    result = run_text(
        "steps:\n"
        "  - host: {live-migrate: h1}\n"
        "  - expect: {vm: WestNO_0, incarnation: 2, events: [{Resources: [WestNO_0], NotBefore: '+15m'}]}\n"
    )
    failure = result.failure
    assert failure is not None
    assert (result.steps_run, failure.number) == (1, 2)
    assert failure.problems == (
        "events[0].Resources: expected ['WestNO_0'], actual ['WestNO_0', 'WestNO_1']",
        "events[0].NotBefore: expected 'Mon, 11 Apr 2022 22:26:58 GMT', "
        "actual 'Mon, 11 Apr 2022 22:12:01 GMT'",
    )
    assert failure.expected["events"] == [{"Resources": ["WestNO_0"], "NotBefore": "+15m"}]
    assert failure.actual["document"]["DocumentIncarnation"] == 2
    rendered = failure.render("test.yaml", 2)
    assert rendered.splitlines()[0].startswith("test.yaml: step 2 of 2 (expect vm: WestNO_0")


def test_a_host_update_step_freezes_every_vm_on_the_host() -> None:
    """SPEC 6 [seen]: "memory-preserving host update ... Freeze, "Host server is
    undergoing maintenance.", DurationInSeconds ~9"; the step key comes from the registry."""
    result = run_text(
        "steps:\n"
        "  - host: {update: h1}\n"
        "  - expect: {vm: WestNO_0, events: [{EventType: Freeze, DurationInSeconds: 9,"
        " Description: 'Host server is undergoing maintenance.', Resources: [WestNO_0, WestNO_1]}]}\n"
    )
    assert result.failure is None, result.failure


def test_event_count_and_older_api_versions() -> None:
    """SPEC 2, "What each api-version shows": 2019-01-01 is the first to know
    Terminate; an older version is not shown the event at all."""
    result = run_text(
        "steps:\n"
        "  - event: {type: Terminate, resources: [WestNO_0]}\n"
        "  - expect: {vm: WestNO_1, apiVersion: '2017-11-01', events: []}\n"
        "  - expect: {vm: WestNO_1, apiVersion: '2019-01-01', events: [{EventType: Terminate}]}\n"
        "  - expect: {vm: WestNO_1, events: []}\n"
    )
    assert result.failure is not None
    assert result.failure.number == 4
    assert result.failure.problems == (
        "events: expected 0 event(s), actual 1 ['Terminate/Scheduled']",
    )


def test_absent_fields_of_an_old_version_are_reported() -> None:
    """SPEC 2: Description appears with 2019-04-01; asking for it earlier fails."""
    result = run_text(
        "steps:\n"
        "  - host: {live-migrate: h1}\n"
        "  - expect: {vm: WestNO_0, apiVersion: '2017-08-01', events: [{Description: ''}]}\n"
    )
    assert result.failure is not None
    assert result.failure.problems == (
        "events[0].Description: expected '', but this api-version omits it",
    )


def test_approve_and_cancel_select_events_and_fail_on_nothing() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event"
    (approve) and "Event scheduling" (cancelled events are removed). A selection matching nothing is
    a failed step."""
    result = run_text(
        "steps:\n"
        "  - event: {type: Reboot, resources: [WestNO_0], notice: 10s}\n"
        "  - event: {type: Freeze, resources: [WestNO_1], notice: 20s}\n"
        f"  - cancel: {{vm: WestNO_0, events: {FREEZE}}}\n"
        "  - expect: {vm: WestNO_1, events: [{EventType: Reboot}]}\n"
        "  - approve: {vm: WestNO_1, events: [{EventType: Reboot, NotBefore: '+10s'}]}\n"
        "  - expect: {vm: WestNO_0, events: [{EventType: Reboot, EventStatus: Started}], reachable: false}\n"
        f"  - approve: {{vm: WestNO_1, events: {FREEZE}}}\n"
    )
    failure = result.failure
    assert failure is not None
    assert failure.number == 7
    assert failure.problems[0].startswith(
        "nothing to approve: no event of WestNO_1's document matches [{'EventType': 'Freeze'}]"
    )


def test_vm_existence_reachability_and_host() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    "Redeploy: The Virtual Machine is scheduled to move to another node"; "Preempt/Terminate": the
    VM is deleted."""
    result = run_text(
        "steps:\n"
        "  - expect: {vm: WestNO_0, exists: true, reachable: true, receiving: true, host: h1}\n"
        "  - event: {type: Terminate, resources: [WestNO_1], started: true}\n"
        "  - advance: 1s\n"
        "  - expect: {vm: WestNO_1, exists: false}\n"
        "  - expect: {vm: WestNO_0, exists: false}\n"
    )
    assert result.failure is not None
    assert result.failure.number == 5
    assert result.failure.problems == ("exists: expected WestNO_0 to be gone, but it still exists",)
    gone = run_text(
        "steps:\n"
        "  - event: {type: Terminate, resources: [WestNO_1], started: true}\n"
        "  - advance: 1s\n"
        "  - expect: {vm: WestNO_1, reachable: false}\n"
    )
    assert gone.failure is not None
    assert gone.failure.problems == ("exists: expected the VM WestNO_1, but it does not exist",)


def test_maintenance_evictions_and_clock_steps() -> None:
    """SPEC 4 [doc]: campaigns one fault domain at a time; section 6: only Spot VMs
    are evicted, so asking for a regular one fails the step with the API's 409."""
    result = run_text(
        "steps:\n"
        "  - set-clock: 2022-04-11T23:00:00Z\n"
        "  - maintenance: {eventType: Freeze}\n"
        "  - expect: {vm: WestNO_1, events: [{EventType: Freeze, Resources: [WestNO_0, WestNO_1], NotBefore: '+3s'}]}\n"
        "  - simulate-eviction: WestNO_0\n"
    )
    assert result.failure is not None
    assert (result.failure.number, result.failure.problems) == (
        4,
        ("409: WestNO_0 is not a Spot VM; only Spot VMs are evicted",),
    )


def test_scale_set_steps_reach_the_api() -> None:
    """SPEC 6 [doc]: scale-set steps name a set; an unknown one is the API's 404."""
    for step in (
        "delete-instances: {scaleSet: web, instanceIds: [0], autoscale: true}",
        "os-image-upgrade: {scaleSet: web, instanceIds: ['0']}",
        "simulate-eviction: {scaleSet: web, instanceIds: [0]}",
    ):
        result = run_text(f"steps:\n  - {step}\n")
        assert result.failure is not None
        assert result.failure.problems == ("404: no scale set named 'web'",)


def test_on_step_reports_progress_and_json_result() -> None:
    """SPEC 6 [ours]: the CLI's progress bar is fed one tick per step."""
    scenario = parse_scenario("steps:\n  - advance: 1m\n  - expect: {vm: vm0, incarnation: 1}\n")
    service = ForewarnPlatform(profile="fast").service
    seen: list[int] = []
    with in_process_control(service) as client:
        assert isinstance(client, ControlClient)
        result = run_scenario(scenario, client, on_step=lambda step: seen.append(step.number))
    assert seen == [1, 2]
    assert result.to_json() == {
        "scenario": "<scenario>",
        "source": "<scenario>",
        "passed": True,
        "steps": 2,
        "stepsRun": 2,
        "failure": None,
    }

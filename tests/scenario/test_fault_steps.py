"""The ``fault`` and ``clear-faults`` scenario steps (docs/faults.md): the same rules as
``POST /api/v1/faults``; the platform's own steps and expectations are not affected."""

from __future__ import annotations

import time

import pytest

from forewarn.faults import FaultKind
from forewarn.scenario import parse_scenario
from forewarn.scenario.schema import ScenarioFileError
from forewarn.service import ScheduledEventsService

from .scenario_support import EXAMPLES, run_on_platform


def run(text: str) -> tuple[ScheduledEventsService, bool]:
    platform, result = run_on_platform(text)
    return platform.service, result.passed


def test_fault_steps_set_faults_and_leave_the_platform_alone() -> None:
    service, passed = run(
        "steps:\n"
        "  - fault: {kind: gone, for: 70s}\n"
        "  - fault: {kind: latency, vm: WestNO_0, delay: 2s, count: 3, probability: 0.5, seed: 4}\n"
        "  - host: {live-migrate: h1}\n"
        "  - expect: {vm: WestNO_0, incarnation: 2, events: [{EventType: Freeze}]}\n"
    )
    assert passed
    faults = service.faults(time.monotonic())
    assert [(f.rule.kind, f.rule.vm) for f in faults] == [
        (FaultKind.GONE, None),
        (FaultKind.LATENCY, "WestNO_0"),
    ]
    assert faults[0].rule.seconds == 70
    assert (faults[1].rule.delay, faults[1].rule.count, faults[1].seed) == (2, 3, 4)


def test_clear_faults_steps() -> None:
    service, passed = run(
        "steps:\n"
        "  - fault: {kind: reset, vm: WestNO_0}\n"
        "  - fault: {kind: throttle, vm: WestNO_1}\n"
        "  - fault: {kind: error}\n"
        "  - clear-faults: {vm: WestNO_0}\n"
    )
    assert passed
    assert [f.rule.kind for f in service.faults(time.monotonic())] == [
        FaultKind.THROTTLE,
        FaultKind.ERROR,
    ]
    service, passed = run("steps:\n  - fault: {kind: error}\n  - clear-faults: all\n")
    assert passed
    assert service.faults(time.monotonic()) == ()


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("{kind: bogus}", "kind"),
        ("{kind: gone, count: 0}", "count"),
        ("{kind: gone, probability: 2}", "probability"),
        ("{kind: gone, when: now}", "when"),
        # what POST /api/v1/faults refuses for its body alone (FaultRule) is refused up front
        ("{kind: latency}", "a latency fault needs a delay"),
        ("{kind: gone, delay: 1s}", "a gone fault takes no delay"),
        ("{kind: gone, count: 1000001}", "count must be between 1 and 1000000"),
        ("{kind: gone, for: 2d}", "seconds must be above 0 and at most 86400"),
        ("{kind: gone, probability: .nan}", "probability"),
    ],
)
def test_bad_fault_steps_are_refused_before_anything_runs(step: str, message: str) -> None:
    with pytest.raises(ScenarioFileError, match=message):
        parse_scenario(f"steps:\n  - fault: {step}\n", "test.yaml", EXAMPLES)


def test_a_fault_the_api_refuses_fails_its_step() -> None:
    """What only the platform can tell (no VM of that name) fails when the step runs."""
    service, passed = run("steps:\n  - fault: {kind: gone, vm: nobody}\n")
    assert not passed
    assert service.faults(time.monotonic()) == ()

"""Running a scenario against a control API, step by step, stopping at the first failure.

Later steps build on earlier ones (an approval needs the event the previous step created), so
the run stops at the first step that fails and says which one, with what was expected and what
was found. Everything goes through :class:`~forewarn.scenario.client.ControlClient`: the same
run works against ``forewarn serve`` or in-process on a manual clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from forewarn.domain.clock import ManualClock
from forewarn.registry import HOST, SCALE_SET, VM, find
from forewarn.scenario._matching import (
    document_problems,
    matches,
    needs_time,
    vm_problems,
)
from forewarn.scenario.client import ControlClient, ControlError, segment
from forewarn.scenario.schema import (
    OPERATION_STEPS,
    ClearFaults,
    EventStep,
    Expectation,
    FaultStep,
    MaintenanceStep,
    PolicyStep,
    ScaleSetInstances,
    Scenario,
    SelectEvents,
    Step,
)


@dataclass(frozen=True)
class StepFailure:
    """Why step ``number`` failed (0: the scenario's requirements were not met)."""

    number: int
    label: str
    problems: tuple[str, ...]
    expected: Any = None
    actual: Any = None

    def render(self, source: str, total: int) -> str:
        where = "before step 1" if self.number == 0 else f"step {self.number} of {total}"
        lines = [f"{source}: {where} ({self.label}) failed: {self.problems[0]}"]
        lines += [f"  {problem}" for problem in self.problems[1:]]
        if self.expected is not None:
            lines.append(f"  expected: {self.expected}")
        if self.actual is not None:
            lines.append(f"  actual:   {self.actual}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    steps_run: int
    failure: StepFailure | None = None

    @property
    def passed(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        failure = self.failure
        return {
            "scenario": self.scenario.name,
            "source": self.scenario.source,
            "passed": self.passed,
            "steps": len(self.scenario.steps),
            "stepsRun": self.steps_run,
            "failure": None
            if failure is None
            else {
                "step": failure.number,
                "label": failure.label,
                "problems": list(failure.problems),
                "expected": failure.expected,
                "actual": failure.actual,
            },
        }


class _StepFailedError(Exception):
    def __init__(self, *problems: str, expected: Any = None, actual: Any = None) -> None:
        super().__init__(problems[0])
        self.problems = problems
        self.expected = expected
        self.actual = actual


#: How often a wait on a system or scaled clock reads the clock again, in real seconds.
WAIT_POLL = 0.2
#: The ``kind`` ``GET /clock`` names a manual clock by.
MANUAL_CLOCK = ManualClock.__name__


@dataclass
class _Run:
    client: ControlClient
    sleep: Callable[[float], None] = time.sleep

    def now(self) -> datetime:
        return datetime.fromisoformat(self.client.get("/clock")["now"])

    def document(self, vm: str, api_version: str | None = None) -> dict[str, Any]:
        params = {"api-version": api_version} if api_version else None
        document: dict[str, Any] = self.client.get(f"/vms/{segment(vm)}/document", params)
        return document

    def selected(self, selection: SelectEvents, verb: str) -> list[str]:
        """Ids of the events of the VM's document that ``selection`` names."""
        events = self.document(selection.vm)["Events"]
        if selection.events == "all":
            chosen = events
        else:
            now = self.now() if needs_time(selection.events) else None
            chosen = [e for e in events if any(matches(m, e, now) for m in selection.events)]
        if not chosen:
            wanted = (
                "any event" if selection.events == "all" else [m.fields() for m in selection.events]
            )
            raise _StepFailedError(
                f"nothing to {verb}: no event of {selection.vm}'s document matches {wanted}",
                actual=events,
            )
        return [event["EventId"] for event in chosen]


def _operation(kind: str) -> Callable[[_Run, Any], None]:
    """The step ``kind`` names a registry operation: a VM's name, a scale set's instances, or
    (``host``) one host action; the request is the one the operation's route takes."""

    def perform(run: _Run, value: Any) -> None:
        if isinstance(value, PolicyStep):
            operation, target = value.target
            arguments = {"policy": value.scheduled_events_policy.model_dump(by_alias=True)}
        elif isinstance(value, str):
            operation, target, arguments = find(VM, kind), value, {}
        elif isinstance(value, ScaleSetInstances):
            operation, target = find(SCALE_SET, kind), value.scale_set
            arguments = value.model_dump(exclude={"scale_set"})
        else:
            action, target = value.action
            operation, arguments = find(HOST, action), value.arguments
        run.client.post(operation.path(target), operation.body(arguments))

    return perform


def _maintenance(run: _Run, step: MaintenanceStep) -> None:
    payload: dict[str, Any] = {"vms": step.vms, "eventType": step.event_type}
    if step.kinds is not None:
        payload["kinds"] = [kind.value for kind in step.kinds]
    run.client.post("/campaigns", payload)


def _event(run: _Run, step: EventStep) -> None:
    payload: dict[str, Any] = {
        "type": step.type,
        "resources": step.resources,
        "source": step.source,
        "description": step.description,
        "durationInSeconds": step.duration_in_seconds,
        "started": step.started,
    }
    if step.notice is not None:
        payload["noticeSeconds"] = step.notice.total_seconds()
    if step.started_for is not None:
        payload["startedSeconds"] = step.started_for.total_seconds()
    run.client.post("/events", payload)


def _fault(run: _Run, step: FaultStep) -> None:
    payload: dict[str, Any] = {"kind": step.kind.value, "probability": step.probability}
    for key, value in (
        ("vm", step.vm),
        ("count", step.count),
        ("seconds", None if step.for_ is None else step.for_.total_seconds()),
        ("delay", None if step.delay is None else step.delay.total_seconds()),
        ("seed", step.seed),
    ):
        if value is not None:
            payload[key] = value
    run.client.post("/faults", payload)


def _clear_faults(run: _Run, which: Literal["all"] | ClearFaults) -> None:
    params = None if which == "all" else {"vm": which.vm}
    run.client.request("DELETE", "/faults", params=params)


def _approve(run: _Run, selection: SelectEvents) -> None:
    ids = run.selected(selection, "approve")
    run.client.post(f"/vms/{segment(selection.vm)}/approve", {"eventIds": ids})


def _cancel(run: _Run, selection: SelectEvents) -> None:
    for event_id in run.selected(selection, "cancel"):
        run.client.delete(f"/events/{segment(event_id)}")


def _advance(run: _Run, duration: timedelta) -> None:
    run.client.post("/clock/advance", {"seconds": duration.total_seconds()})


def _wait(run: _Run, duration: timedelta) -> None:
    """Let ``duration`` of platform time pass: a manual clock is moved; a system or scaled
    clock is waited for, reading it again until it has gone that far (so a flow plays out in
    real time, and whatever fell due meanwhile has happened when the next step reads)."""
    clock = run.client.get("/clock")
    if clock.get("kind") == MANUAL_CLOCK:
        _advance(run, duration)
        return
    until = datetime.fromisoformat(clock["now"]) + duration
    while (now := run.now()) < until:
        run.sleep(min(WAIT_POLL, (until - now).total_seconds()))


def _set_clock(run: _Run, moment: datetime) -> None:
    run.client.post("/clock/set", {"now": moment.isoformat()})


def _expect(run: _Run, expectation: Expectation) -> None:
    problems: list[str] = []
    actual: dict[str, Any] = {}
    if expectation.needs_vm():
        try:
            vm: Mapping[str, Any] | None = run.client.get(f"/vms/{segment(expectation.vm)}")
        except ControlError as exc:
            if exc.status != 404:
                raise
            vm = None
        if vm is not None:
            actual.update({k: vm[k] for k in ("reachable", "receiving", "host") if k in vm})
        else:
            actual["exists"] = False
        problems += vm_problems(expectation, vm)
    if expectation.needs_document() and not problems:
        now = run.now() if expectation.events and needs_time(expectation.events) else None
        document = run.document(expectation.vm, expectation.api_version)
        actual["document"] = document
        problems += document_problems(expectation, document, now)
    if problems:
        expected = expectation.model_dump(by_alias=True, exclude_none=True)
        raise _StepFailedError(*problems, expected=expected, actual=actual)


_ACTIONS: dict[str, Callable[[_Run, Any], None]] = {
    **{kind: _operation(kind) for kind in OPERATION_STEPS},
    "maintenance": _maintenance,
    "event": _event,
    "fault": _fault,
    "clear-faults": _clear_faults,
    "approve": _approve,
    "cancel": _cancel,
    "advance": _advance,
    "wait": _wait,
    "set-clock": _set_clock,
    "expect": _expect,
}


def _requirements(run: _Run, scenario: Scenario) -> None:
    if scenario.profile is not None:
        profile = run.client.get("/clock").get("profile")
        if profile != scenario.profile:
            raise _StepFailedError(
                f"the scenario needs timing profile {scenario.profile!r}; "
                f"the control API at {run.client.base} runs {profile!r}"
            )


def run_scenario(
    scenario: Scenario,
    client: ControlClient,
    *,
    on_step: Callable[[Step], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ScenarioResult:
    """Run every step in order; ``on_step`` is told of each step done (progress bars);
    ``sleep`` is what a ``wait`` on a system or scaled clock waits with."""
    run = _Run(client, sleep)
    try:
        _requirements(run, scenario)
    except (_StepFailedError, ControlError) as exc:
        return ScenarioResult(scenario, 0, _failure(0, "requirements", exc))
    for done, step in enumerate(scenario.steps):
        try:
            _ACTIONS[step.kind](run, step.value)
        except (_StepFailedError, ControlError) as exc:
            return ScenarioResult(scenario, done, _failure(step.number, step.label, exc))
        if on_step is not None:
            on_step(step)
    return ScenarioResult(scenario, len(scenario.steps))


def _failure(number: int, label: str, exc: _StepFailedError | ControlError) -> StepFailure:
    if isinstance(exc, ControlError):
        return StepFailure(number, label, (str(exc),))
    return StepFailure(number, label, exc.problems, exc.expected, exc.actual)


__all__ = [
    "MANUAL_CLOCK",
    "WAIT_POLL",
    "ScenarioResult",
    "StepFailure",
    "run_scenario",
]

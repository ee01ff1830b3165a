"""The example scenarios run in-process on a manual clock: their minutes pass as their steps
move it, not as the test waits."""

from __future__ import annotations

import pytest

from forewarn.scenario import load_scenario, run_in_process

from .scenario_support import EXAMPLES, run_text

SCENARIOS = sorted(p.name for p in EXAMPLES.glob("*.yaml") if not p.name.startswith("fleet-"))


@pytest.mark.parametrize("name", SCENARIOS)
def test_example_scenarios_pass(name: str) -> None:
    """Every scenario in examples/scenarios/ (the fleets beside them are not scenarios):
    live-migration.yaml: learn.microsoft.com/azure/virtual-machines/windows/scheduled-events,
    "Example responses"; every-operation.yaml: every row of SPEC 6 (each step cites its source);
    real-world-mix.yaml: host-update campaigns, the documented edge cases and a 410 burst."""
    scenario = load_scenario(EXAMPLES / name)
    result = run_in_process(scenario)
    assert result.failure is None, result.failure.render(scenario.source, len(scenario.steps))
    assert result.steps_run == len(scenario.steps)


def test_every_operation_covers_every_row_of_spec_6() -> None:
    """SPEC 6 [doc]: restart, redeploy, scale-set delete with terminate
    notification (User and autoscale), Spot eviction, live migration, host maintenance,
    predicted failure, hardware failure, OS image upgrade notification."""
    scenario = load_scenario(EXAMPLES / "every-operation.yaml")
    done = set()
    for step in scenario.steps:
        if step.kind == "host":
            done.add(f"host {step.value.action[0]}")
        elif step.kind == "delete-instances":
            done.add("autoscale" if step.value.autoscale else "delete-instances")
        else:
            done.add(step.kind)
    assert done >= {
        "restart", "redeploy", "delete-instances", "autoscale", "simulate-eviction",
        "host live-migrate", "host maintain", "host predict-failure", "host fail",
        "os-image-upgrade", "maintenance", "approve", "cancel", "advance", "expect",
    }  # fmt: skip
    expectations = [s.value for s in scenario.steps if s.kind == "expect"]
    seen = {m.event_type for e in expectations for m in (e.events or []) if m.event_type}
    assert seen == {"Freeze", "Reboot", "Redeploy", "Preempt", "Terminate"}


def test_live_migration_in_the_documented_profile_matches_the_example_byte_for_byte() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
    with the documented 15-minute Freeze notice from 22:11:58, NotBefore is exactly "Mon, 11 Apr
    2022 22:26:58 GMT"."""
    text = (EXAMPLES / "live-migration.yaml").read_text(encoding="utf-8")
    assert 'NotBefore: "+3s"' in text
    assert "profile: fast" in text
    documented = text.replace("profile: fast", "profile: documented").replace(
        'NotBefore: "+3s"', 'NotBefore: "Mon, 11 Apr 2022 22:26:58 GMT"'
    )
    result = run_text(documented, profile="documented")
    assert result.failure is None, result.failure

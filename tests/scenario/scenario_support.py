"""Running scenario text in-process, on a manual clock and the fast profile."""

from __future__ import annotations

from pathlib import Path

from forewarn.config.fleet import load_fleet
from forewarn.domain.clock import ManualClock
from forewarn.domain.timing import PROFILES
from forewarn.scenario import (
    ScenarioResult,
    in_process_control,
    parse_scenario,
    run_scenario,
    service_for_fleet,
)
from forewarn.scenario.inprocess import DEFAULT_START

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def run_text(
    text: str, fleet: str = "fleet-live-migration.yaml", profile: str = "fast"
) -> ScenarioResult:
    """Run scenario ``text`` on an examples fleet; failures are returned, not raised."""
    scenario = parse_scenario(text, "test.yaml", EXAMPLES)
    service = service_for_fleet(
        load_fleet(EXAMPLES / fleet), ManualClock(DEFAULT_START), timing=PROFILES[profile]
    )
    with in_process_control(service) as client:
        return run_scenario(scenario, client)

"""Running scenario text in-process, on a manual clock and the fast profile: a
:class:`forewarn.testing.ForewarnPlatform` on one of the examples' fleets."""

from __future__ import annotations

from pathlib import Path

from forewarn.scenario import ScenarioResult, parse_scenario
from forewarn.testing import ForewarnPlatform

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def run_on_platform(
    text: str, fleet: str = "fleet-live-migration.yaml", profile: str = "fast"
) -> tuple[ForewarnPlatform, ScenarioResult]:
    """Run scenario ``text`` on an examples fleet; the platform afterwards, and the result
    (failures are returned, not raised)."""
    scenario = parse_scenario(text, "test.yaml", EXAMPLES)
    platform = ForewarnPlatform(fleet=EXAMPLES / fleet, profile=profile)
    return platform, platform.run_scenario(scenario)


def run_text(
    text: str, fleet: str = "fleet-live-migration.yaml", profile: str = "fast"
) -> ScenarioResult:
    """Run scenario ``text`` on an examples fleet; failures are returned, not raised."""
    return run_on_platform(text, fleet, profile)[1]

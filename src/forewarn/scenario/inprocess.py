"""A whole forewarn in this process, on a manual clock: for tests and ``--in-process`` runs.

The control app is called through :class:`~forewarn.scenario._asgi.AsgiTransport`, so nothing
listens on a port and platform time moves only when a step says so; a scenario of days of
platform time runs in milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from forewarn.config.fleet import load_fleet
from forewarn.domain.clock import DEFAULT_START, ManualClock
from forewarn.domain.timing import PROFILES
from forewarn.scenario._asgi import in_process_client
from forewarn.scenario.client import ControlClient
from forewarn.scenario.schema import Scenario, ScenarioFileError
from forewarn.scenario.steps import ScenarioResult, run_scenario
from forewarn.server.control import create_control_app
from forewarn.service import ScheduledEventsService, service_for_fleet


@contextmanager
def in_process_control(service: ScheduledEventsService) -> Iterator[ControlClient]:
    """A control client talking to ``service``'s control app in this process."""
    with in_process_client(create_control_app(service)) as http:
        yield ControlClient(http)


def run_in_process(
    scenario: Scenario, *, start: datetime = DEFAULT_START, seed: int = 0
) -> ScenarioResult:
    """Run ``scenario`` on its own fleet file and profile, on a manual clock from ``start``,
    or from the moment its first step sets the clock to (a scenario made from a trace), so
    its VMs are not idle for the years between."""
    if scenario.steps and scenario.steps[0].kind == "set-clock":
        start = scenario.steps[0].value
    if scenario.fleet is None:
        raise ScenarioFileError(f"{scenario.source}: running in-process needs `fleet:` to name one")
    fleet = load_fleet(scenario.fleet)
    timing = PROFILES[scenario.profile or "documented"]
    service = service_for_fleet(fleet, ManualClock(start), timing=timing, seed=seed)
    with in_process_control(service) as client:
        return run_scenario(scenario, client)


__all__ = [
    "DEFAULT_START",
    "in_process_control",
    "run_in_process",
    "service_for_fleet",
]

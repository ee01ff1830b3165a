"""Scripted scenarios: YAML timelines of operations, clock steps and expectations.

``forewarn scenario run FILE`` runs one against a control API; :func:`run_scenario` does the
same from Python with any :class:`ControlClient`, and :func:`run_in_process` builds the whole
service in this process on a manual clock, as the tests do.
"""

from __future__ import annotations

from forewarn.scenario.client import (
    AsgiTransport,
    ControlClient,
    ControlError,
    connect,
    in_process_client,
)
from forewarn.scenario.durations import format_duration, parse_duration
from forewarn.scenario.inprocess import in_process_control, run_in_process, service_for_fleet
from forewarn.scenario.runner import ScenarioResult, StepFailure, run_scenario
from forewarn.scenario.schema import (
    Scenario,
    ScenarioFileError,
    Step,
    load_scenario,
    parse_scenario,
)

__all__ = [
    "AsgiTransport",
    "ControlClient",
    "ControlError",
    "Scenario",
    "ScenarioFileError",
    "ScenarioResult",
    "Step",
    "StepFailure",
    "connect",
    "format_duration",
    "in_process_client",
    "in_process_control",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
    "run_in_process",
    "run_scenario",
    "service_for_fleet",
]

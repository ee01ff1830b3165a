"""Scripted scenarios: YAML timelines of operations, clock steps and expectations.

``forewarn scenario run FILE`` runs one against a control API; :func:`run_scenario` does the
same from Python with any :class:`ControlClient`, and :func:`run_in_process` builds the whole
service in this process on a manual clock, as the tests do.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forewarn.scenario._asgi import AsgiTransport, in_process_client
    from forewarn.scenario.client import ControlClient, ControlError, connect
    from forewarn.scenario.durations import format_duration, parse_duration
    from forewarn.scenario.inprocess import in_process_control, run_in_process, service_for_fleet
    from forewarn.scenario.schema import (
        Scenario,
        ScenarioFileError,
        Step,
        load_scenario,
        parse_scenario,
    )
    from forewarn.scenario.steps import ScenarioResult, StepFailure, run_scenario

#: Where each public name lives. Loaded on first use (PEP 562): the control client is light,
#: while running in-process needs the whole server; ``forewarn.scenario.client`` alone must not
#: pull the server stack into the CLI.
_HOMES = {
    "AsgiTransport": "_asgi",
    "ControlClient": "client",
    "ControlError": "client",
    "connect": "client",
    "in_process_client": "_asgi",
    "format_duration": "durations",
    "parse_duration": "durations",
    "in_process_control": "inprocess",
    "run_in_process": "inprocess",
    "service_for_fleet": "inprocess",
    "ScenarioResult": "steps",
    "StepFailure": "steps",
    "run_scenario": "steps",
    "Scenario": "schema",
    "ScenarioFileError": "schema",
    "Step": "schema",
    "load_scenario": "schema",
    "parse_scenario": "schema",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


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

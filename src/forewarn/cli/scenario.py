"""``forewarn scenario ...``: run a YAML timeline of operations and expectations."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from forewarn.cli.common import control_api, control_option, output_option

if TYPE_CHECKING:
    from forewarn.scenario.runner import ScenarioResult
    from forewarn.scenario.schema import Scenario, Step


def _load(path: Path) -> Scenario:
    # pydantic and YAML are imported by the commands that read a scenario, not by every CLI start
    from forewarn.scenario.schema import ScenarioFileError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioFileError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def scenario() -> None:
    """Scripted scenarios (docs/control.md describes the file)."""


@scenario.command("validate")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def scenario_validate(file: Path) -> None:
    """Check FILE against the schema without running it."""
    loaded = _load(file)
    click.echo(f"{file}: {loaded.name!r}, {len(loaded.steps)} step(s), valid")


@scenario.command("run")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--in-process",
    is_flag=True,
    help="Build the scenario's own fleet here on a manual clock; no server needed.",
)
@control_option
@output_option
def scenario_run(file: Path, in_process: bool, control: str, output: str) -> None:
    """Run FILE against the control API; exit 1 naming the first step that fails."""
    from forewarn.scenario.runner import run_scenario
    from forewarn.scenario.schema import ScenarioFileError

    loaded = _load(file)
    if in_process:
        from forewarn.scenario.inprocess import run_in_process  # the whole server, in-process

        try:
            result = run_in_process(loaded)
        except ScenarioFileError as exc:
            raise click.ClickException(str(exc)) from None
    else:
        progress = click.progressbar(
            length=len(loaded.steps),
            label=loaded.name,
            show_pos=True,
            file=sys.stderr,
        )
        with control_api(control) as api, progress as bar:

            def advance(step: Step) -> None:
                bar.update(1)

            result = run_scenario(loaded, api, on_step=advance)
    _report(result, output)


def _report(result: ScenarioResult, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(result.to_json(), indent=2, default=str))
    elif result.passed:
        click.echo(f"{result.scenario.source}: all {result.steps_run} steps passed")
    if result.failure is not None:
        message = result.failure.render(result.scenario.source, len(result.scenario.steps))
        raise click.ClickException(message)


__all__ = [
    "scenario",
    "scenario_run",
    "scenario_validate",
]

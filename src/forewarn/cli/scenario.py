"""``forewarn scenario ...``: run a YAML timeline of operations and expectations."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from forewarn.cli.common import control_api, control_option, emit, examples, output_option

if TYPE_CHECKING:
    from forewarn.scenario.client import ControlClient
    from forewarn.scenario.schema import Scenario, Step
    from forewarn.scenario.steps import ScenarioResult


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


@scenario.command(
    "run",
    epilog=examples(
        "forewarn scenario run my-scenario.yaml               # against forewarn serve",
        "forewarn scenario run --in-process my-scenario.yaml  # no server needed",
        "forewarn scenario run --builtin live-migration --dev-timing",
        "forewarn scenario run --builtin user-reboot --vm vm0 -o json",
    ),
)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--builtin", "builtin", metavar="NAME", help="A built-in flow (scenario list).")
@click.option(
    "--dev-timing",
    is_flag=True,
    help="With --builtin: the flow's minutes read as seconds (serve --profile dev).",
)
@click.option(
    "--vm",
    "vm",
    help="With --builtin: the VM it runs on (default: the first that fits and is shown no event).",
)
@click.option(
    "--in-process",
    is_flag=True,
    help="Build the scenario's own fleet here on a manual clock; no server needed.",
)
@control_option
@output_option
def scenario_run(
    file: Path | None,
    builtin: str | None,
    dev_timing: bool,
    vm: str | None,
    in_process: bool,
    control: str,
    output: str,
) -> None:
    """Run FILE, or the built-in flow NAME, against the control API; exit 1 naming the first
    step that fails."""
    from forewarn.scenario.schema import ScenarioFileError
    from forewarn.scenario.steps import run_scenario

    if (file is None) == (builtin is None):
        raise click.UsageError("give a scenario FILE or --builtin NAME (not both)")
    if builtin is None and (dev_timing or vm is not None):
        raise click.UsageError("--dev-timing and --vm go with --builtin")
    if in_process:
        if file is None:
            raise click.UsageError("--in-process runs a FILE, which names its fleet")
        from forewarn.scenario.inprocess import run_in_process  # the whole server, in-process

        try:
            result = run_in_process(_load(file))
        except ScenarioFileError as exc:
            raise click.ClickException(str(exc)) from None
        _report(result, output)
        return
    with control_api(control) as api:
        if file is not None:
            loaded = _load(file)
        else:
            assert builtin is not None
            loaded = _builtin(api, builtin, vm, dev_timing)
        progress = click.progressbar(
            length=len(loaded.steps),
            label=loaded.name,
            show_pos=True,
            file=sys.stderr,
        )
        with progress as bar:

            def advance(step: Step) -> None:
                bar.update(1)

            result = run_scenario(loaded, api, on_step=advance)
    _report(result, output)


def _builtin(api: ControlClient, name: str, vm: str | None, dev_timing: bool) -> Scenario:
    from forewarn.scenario.flows import FlowError, flow_scenario

    try:
        return flow_scenario(api, name, vm=vm, dev_timing=dev_timing)
    except FlowError as exc:
        raise click.ClickException(str(exc)) from None


@scenario.command("list")
@output_option
def scenario_list(output: str) -> None:
    """The built-in flows: the captured ones of Microsoft's mock server, and the documented
    ones (docs/flows.md)."""
    from forewarn.scenario.flows import FLOWS

    data = {"flows": [flow.describe() for flow in FLOWS]}
    rows = [
        (
            f["name"],
            f["origin"],
            f"{f['eventSource']} {f['eventType']}",
            f["scheduledFor"] or "started at once",
            f"cancelled after {f['cancelledAfter']}" if f["cancelledAfter"] else f["startedFor"],
            f["durationInSeconds"],
        )
        for f in data["flows"]
    ]
    emit(data, output, rows, ("NAME", "ORIGIN", "EVENT", "SCHEDULED", "STARTED", "DURATION"))


@scenario.command("show")
@click.option("--builtin", "builtin", metavar="NAME", required=True, help="A built-in flow.")
@click.option("--dev-timing", is_flag=True, help="The flow's minutes read as seconds.")
@click.option("--vm", "vm", default="vm0", show_default=True, help="The VM it is written for.")
@click.option("--host", "host", help="That VM's host (default: host-VM).")
@click.option("--scale-set", "scale_set", help="The VM's scale set, for terminate.")
def scenario_show(
    builtin: str, dev_timing: bool, vm: str, host: str | None, scale_set: str | None
) -> None:
    """Print a built-in flow as a scenario file, to read or to start one of your own from."""
    from forewarn.scenario.flows import FlowError, FlowTarget, find_flow

    try:
        flow = find_flow(builtin)
    except FlowError as exc:
        raise click.ClickException(str(exc)) from None
    instance = vm.removeprefix(f"{scale_set}_") if scale_set else None
    target = FlowTarget(vm, host or f"host-{vm}", scale_set, instance)
    click.echo(flow.scenario_text(target, dev_timing=dev_timing), nl=False)


@scenario.command("from-trace")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--vm", "vm", help="The recorded VM's name (default: its compute metadata's).")
@click.option(
    "--profile",
    type=click.Choice(["documented", "dev", "fast"]),
    default="documented",
    show_default=True,
    help="The timing profile it runs on (its minimum notices bound what can be remade).",
)
@click.option(
    "--fleet-out",
    "fleet_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the fleet it needs here; the scenario names it (keep them side by side).",
)
def scenario_from_trace(trace: Path, vm: str | None, profile: str, fleet_out: Path | None) -> None:
    """Print a scenario that makes forewarn show the VM of TRACE (forewarn record) the same
    documents: forewarn scenario from-trace vm0.trace > scenario.yaml."""
    from forewarn.trace.format import TraceError, load_trace
    from forewarn.trace.to_scenario import convert

    try:
        conversion = convert(
            load_trace(trace),
            vm=vm,
            profile=profile,
            fleet_path=None if fleet_out is None else fleet_out.name,
        )
    except TraceError as exc:
        raise click.ClickException(str(exc)) from None
    if fleet_out is not None:
        fleet_out.write_text(conversion.fleet, encoding="utf-8")
        # On standard error: standard output is the scenario, usually redirected to a file.
        click.echo(f"wrote the fleet the scenario needs to {fleet_out}", err=True)
    click.echo(conversion.scenario, nl=False)


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
    "scenario_from_trace",
    "scenario_list",
    "scenario_run",
    "scenario_show",
    "scenario_validate",
]

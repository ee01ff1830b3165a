"""``forewarn scenario list``, ``scenario show --builtin`` and ``scenario run --builtin``:
the built-in flows (docs/flows.md) from the shell."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import yaml

from forewarn.scenario.flows import FLOWS
from forewarn.testing import ForewarnPlatform

from .cli_support import START, Cli

FLEET = Path(__file__).resolve().parents[2] / "examples" / "flows" / "fleet.yaml"


def flows_cli(profile: str = "documented") -> Cli:
    return Cli(ForewarnPlatform(fleet=FLEET, start=START, profile=profile))


def test_list_names_every_flow_with_its_figures() -> None:
    """The mock server's table (github.com/Azure-Samples/scheduled-events-mock-server,
    main.py): "Live Migration", Freeze, Platform, 15 minutes Scheduled, 5 Started, 5 s."""
    output = flows_cli().ok("scenario", "list")
    lines = output.splitlines()
    assert lines[0].split() == ["NAME", "ORIGIN", "EVENT", "SCHEDULED", "STARTED", "DURATION"]
    assert lines[1].split() == [
        "live-migration",
        "captured",
        "Platform",
        "Freeze",
        "15m",
        "5m",
        "5",
    ]
    cancelled = next(line for line in lines if line.startswith("canceled-maintenance"))
    assert cancelled.split()[4:] == ["15m", "cancelled", "after", "8m", "9"]
    assert len(lines) == 1 + len(FLOWS)
    data = json.loads(flows_cli().ok("scenario", "list", "-o", "json"))
    first = data["flows"][0]
    # dev: the 5 s Freeze, then 5 s Started (docs/flows.md, "Dev timing")
    assert (first["name"], first["startedFor"], first["devTiming"]["started"]) == (
        "live-migration",
        "5m",
        "10s",
    )


def test_show_prints_a_scenario_file_that_validates(tmp_path: Path) -> None:
    cli = flows_cli()
    text = cli.ok("scenario", "show", "--builtin", "user-reboot", "--vm", "web0")
    document = yaml.safe_load(text)
    assert document["profile"] == "documented"
    assert document["steps"][0] == {"restart": "web0"}
    path = tmp_path / "user-reboot.yaml"
    path.write_text(text, encoding="utf-8")
    assert cli.ok("scenario", "validate", str(path)).endswith("valid\n")
    dev = yaml.safe_load(cli.ok("scenario", "show", "--builtin", "user-reboot", "--dev-timing"))
    assert dev["profile"] == "dev"
    assert {"title": "its NotBefore comes", "wait": "15s"} in dev["steps"]


def test_run_builtin_passes_against_the_control_api() -> None:
    cli = flows_cli()
    result = cli("scenario", "run", "--builtin", "live-migration")
    assert result.exit_code == 0, result.output
    assert result.stdout == "builtin:live-migration: all 6 steps passed\n"
    assert result.stderr == "live-migration on vm0\n"
    assert cli.platform.now - START == timedelta(minutes=20)


def test_run_builtin_with_dev_timing_on_the_dev_profile() -> None:
    cli = flows_cli("dev")
    result = cli("scenario", "run", "--builtin", "terminate", "--dev-timing", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["passed"] is True
    assert "web_0" not in cli.platform.vm_names


def test_run_builtin_refusals_are_one_line() -> None:
    cli = flows_cli()
    assert "Error: no built-in flow 'nope'; known: live-migration" in cli.fails(
        "scenario", "run", "--builtin", "nope"
    )
    assert "Error: flow 'spot-eviction' needs a Spot VM; vm0 is not one" in cli.fails(
        "scenario", "run", "--builtin", "spot-eviction", "--vm", "vm0"
    )
    assert "give a scenario FILE or --builtin NAME" in cli.fails("scenario", "run", code=2)
    assert "--dev-timing and --vm go with --builtin" in cli.fails(
        "scenario", "run", "x.yaml", "--vm", "vm0", code=2
    )
    failed = cli.fails("scenario", "run", "--builtin", "user-reboot", "--dev-timing")
    assert "before step 1 (requirements) failed: the scenario needs timing profile 'dev'" in failed


def test_run_builtin_picks_a_vm_shown_no_event() -> None:
    """A flow's checks compare its VM's whole document (docs/flows.md): the first VM that
    fits but is shown a live event is passed over for one shown none."""
    cli = flows_cli()
    cli.platform.restart("vm0")
    result = cli("scenario", "run", "--builtin", "user-reboot")
    assert result.exit_code == 0, result.output
    assert result.stderr == "user-reboot on spot0\n"


def test_run_builtin_says_which_vm_is_busy_and_why() -> None:
    cli = flows_cli()
    (busy,) = cli.platform.restart("vm0")
    failed = cli.fails("scenario", "run", "--builtin", "user-reboot", "--vm", "vm0")
    assert failed == (
        "Error: flow 'user-reboot' checks vm0's whole document, and vm0 is shown "
        f"Reboot Scheduled {busy.event_id[:8]}: let it end, cancel it (forewarn events "
        "cancel), or choose another VM (--vm)\n"
    )
    (web,) = cli.platform.delete_instances("web", "0")
    failed = cli.fails("scenario", "run", "--builtin", "terminate")
    assert failed == (
        "Error: flow 'terminate' checks its VM's whole document, and every VM it fits (1) is "
        f"shown live events (web_0: Terminate Scheduled {web.event_id[:8]}): let them end, "
        "cancel them (forewarn events cancel), or add an idle VM\n"
    )

"""``forewarn events|clock``, and how every command finds and reports the control API."""

from __future__ import annotations

import json
import socket

from click.testing import CliRunner

from forewarn.cli import main
from forewarn.domain.clock import ManualClock

from .cli_support import Cli


def test_events_create_list_show_cancel(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling": a
    cancelled event "will be removed from the Events array"."""
    created = json.loads(
        cli.ok("events", "create", "--type", "reboot", "--vm", "app0", "--source", "User",
               "--notice", "20m", "--duration", "9", "-o", "json")
    )  # fmt: skip
    event_id = created["EventId"]
    assert (created["EventType"], created["EventSource"], created["NotBefore"]) == (
        "Reboot",  # choices are listed in lower case, taken in any, sent as Azure spells them
        "User",
        "Mon, 11 Apr 2022 22:31:58 GMT",
    )
    listed = cli.ok("events", "list").splitlines()
    assert listed[0].split()[-2:] == ["APPROVED", "BY"]
    assert listed[1].startswith(event_id)
    assert "DurationInSeconds  9" in cli.ok("events", "show", event_id)
    assert cli.ok("events", "cancel", event_id) == f"cancelled {event_id}\n"
    assert json.loads(cli.ok("events", "list", "-o", "json")) == {"events": []}
    assert f"Error: 404: unknown event id(s): {event_id}" in cli.fails("events", "cancel", event_id)


def test_events_create_refusals(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
    "Reboot 15 minutes" is the minimum."""
    output = cli.fails("events", "create", "--type", "Reboot", "--vm", "app0", "--notice", "1m")
    assert (
        output
        == "Error: 422: Reboot needs at least 900 s of notice in the 'documented' timing profile\n"
    )
    assert "is not a duration" in cli.fails(
        "events", "create", "--type", "Reboot", "--vm", "app0", "--notice", "soon", code=2
    )


def test_clock_show_advance_set(cli: Cli, clock: ManualClock) -> None:
    """SPEC 4 [ours]: `forewarn clock advance 15m` moves a manual clock."""
    assert (
        cli.ok("clock", "show") == "2022-04-11T22:11:58+00:00 (ManualClock, profile documented)\n"
    )
    cli.ok("vm", "restart", "-n", "app0")
    assert "next change due 2022-04-11T22:26:58+00:00" in cli.ok("clock", "show")
    assert cli.ok("clock", "advance", "15m").startswith("2022-04-11T22:26:58+00:00")
    assert (
        json.loads(cli.ok("events", "list", "-o", "json"))["events"][0]["EventStatus"] == "Started"
    )
    assert json.loads(cli.ok("clock", "set", "2022-04-12T00:00:00", "-o", "json"))["now"] == (
        "2022-04-12T00:00:00+00:00"
    )
    assert "only moves forward" in cli.fails("clock", "set", "2022-04-11T00:00:00Z")
    assert "not an ISO 8601 time" in cli.fails("clock", "set", "noon", code=2)
    assert "is not a duration" in cli.fails("clock", "advance", "5 minutes", code=2)
    assert clock.now().isoformat() == "2022-04-12T00:00:00+00:00"


def test_control_address_from_option_and_environment(cli: Cli) -> None:
    """SPEC 1 [ours]: `--control HOST:PORT`, else FOREWARN_CONTROL, else the default."""
    cli.ok("clock", "show")
    cli.ok("clock", "show", "--control", "10.1.2.3:4000")
    cli("clock", "show", env={"FOREWARN_CONTROL": "[::1]:4001"})
    assert cli.connections == [("127.0.0.1", 16955), ("10.1.2.3", 4000), ("::1", 4001)]
    assert "the port must be a number" in cli.fails("clock", "show", "--control", "h:99999", code=2)


def test_unreachable_control_api_is_one_line_exit_1() -> None:
    """SPEC 1 [ours]: a clear one-line error when nothing answers."""
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = CliRunner().invoke(main, ["vm", "list", "--control", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert result.output.startswith(
        f"Error: cannot reach the control API at http://127.0.0.1:{port}/api/v1"
    )
    assert result.output.count("\n") == 1

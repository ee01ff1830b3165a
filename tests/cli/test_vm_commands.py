"""``forewarn vm|vmss|host|maintenance``: tables, JSON, one-line errors, az spellings."""

from __future__ import annotations

import json

import pytest

from .cli_support import Cli

USER_RESTART = "Virtual machine is going to be restarted as requested by authorized user."


def test_vm_list_table_and_json(cli: Cli) -> None:
    """SPEC 7 [doc]: whether a VM receives events; section 4: whether it is up."""
    table = cli.ok("vm", "list").splitlines()
    assert table[0].split() == ["NAME", "ADDRESS", "HOST", "REACHABLE", "RECEIVING", "GROUP"]
    row = next(line for line in table if line.startswith("WestNO_0 "))
    assert row.split()[:5] == ["WestNO_0", "127.0.50.2", "h1", "yes", "yes"]
    assert row.endswith("availability set west")
    data = json.loads(cli.ok("vm", "list", "-o", "json"))
    assert {vm["name"] for vm in data["vms"]} >= {"app0", "spot0", "web_0", "web_2"}


def test_vm_show_and_a_one_line_error(cli: Cli) -> None:
    """SPEC 1 [ours]: errors are one line and exit 1."""
    shown = cli.ok("vm", "show", "--name", "spot0")
    assert ["priority", "Spot"] in [line.split() for line in shown.splitlines()]
    assert json.loads(cli.ok("vm", "show", "-n", "app0", "-o", "json"))["host"] == "host-app"
    output = cli.fails("vm", "show", "--name", "ghost")
    assert output == "Error: 404: no virtual machine named 'ghost'\n"


def test_vm_restart_prints_the_event(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": "If you restart a VM, an event with the type Reboot is scheduled"."""
    table = cli.ok("vm", "restart", "--name", "app0").splitlines()
    assert table[0].split() == [
        "EVENT",
        "ID",
        "TYPE",
        "STATUS",
        "SOURCE",
        "RESOURCES",
        "NOT",
        "BEFORE",
    ]
    assert table[1].split()[1:5] == ["Reboot", "Scheduled", "User", "app0"]
    assert table[1].endswith("Mon, 11 Apr 2022 22:26:58 GMT")  # 15 minutes (Event Scheduling)
    (event,) = json.loads(cli.ok("vm", "redeploy", "-n", "db0", "-o", "json"))["events"]
    assert (event["EventType"], event["EventSource"]) == ("Redeploy", "User")


def test_vm_simulate_eviction(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    "Preempt: The Spot Virtual Machine is being deleted"; only Spot VMs are evicted (SPEC 6 [doc]):
    409 otherwise."""
    assert "Preempt" in cli.ok("vm", "simulate-eviction", "--name", "spot0")
    assert "Error: 409: app0 is not a Spot VM" in cli.fails("vm", "simulate-eviction", "-n", "app0")


def test_vm_approve(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event":
    approving lets the event start; forewarn's control route approves as the VM (real VMs POST
    StartRequests)."""
    (event,) = json.loads(cli.ok("vm", "restart", "-n", "app0", "-o", "json"))["events"]
    assert cli.ok("vm", "approve", "-n", "app0", event["EventId"]) == (
        f"app0 approved {event['EventId']}\n"
    )
    listed = json.loads(cli.ok("events", "list", "-o", "json"))["events"]
    assert listed[0]["EventStatus"] == "Started"
    assert "is down" in cli.fails("vm", "approve", "-n", "app0", "--all")
    assert "shown no event" in cli.ok("vm", "approve", "-n", "WestNO_0", "--all")
    assert "or --all" in cli.fails("vm", "approve", "-n", "WestNO_0", code=2)


def test_vmss_delete_instances_takes_ids_as_az_does(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
    "Terminate User Configurable: 5 to 15 minutes"; SPEC 6: User, or Platform for autoscale. ``az
    vmss delete-instances --name SET --instance-ids 0 1`` is the spelling."""
    data = json.loads(
        cli.ok(
            "vmss", "delete-instances", "--name", "web", "--instance-ids", "0", "1", "-o", "json"
        )
    )
    assert [(e["EventType"], e["EventSource"], e["Resources"]) for e in data["events"]] == [
        ("Terminate", "User", ["web_0"]),
        ("Terminate", "User", ["web_1"]),
    ]
    table = cli.ok("vmss", "delete-instances", "-n", "web", "--instance-ids", "2", "--autoscale")
    assert "Terminate  Scheduled  Platform  web_2" in table
    assert "at least one instance" in cli.fails("vmss", "delete-instances", "-n", "web", code=2)
    assert "Error: 404: no scale set named 'nope'" in cli.fails(
        "vmss", "delete-instances", "-n", "nope", "--instance-ids", "0"
    )


def test_vmss_simulate_eviction_and_os_image_upgrade(cli: Cli) -> None:
    """SPEC 6 [doc]: Spot instances are evicted (409 for a regular set); an OS image
    upgrade with osImageNotification gives a Platform Reboot
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance")."""
    assert "Error: 409" in cli.fails("vmss", "simulate-eviction", "-n", "web", "--instance-id", "0")
    for command in ("os-image-upgrade", "reimage"):
        data = json.loads(cli.ok("vmss", command, "-n", "web", "--instance-ids", "0", "-o", "json"))
        assert [(e["EventType"], e["EventSource"]) for e in data["events"]] == [
            ("Reboot", "Platform")
        ]


@pytest.mark.parametrize(
    ("action", "event_type", "status"),
    [
        ("live-migrate", "Freeze", "Scheduled"),
        ("update", "Freeze", "Scheduled"),
        ("maintain", "Reboot", "Scheduled"),
        ("predict-failure", "Redeploy", "Scheduled"),
        ("fail", "Reboot", "Started"),
    ],
)
def test_host_actions(cli: Cli, action: str, event_type: str, status: str) -> None:
    """SPEC 6 [doc]: live migration Freeze, host maintenance Reboot, predicted
    failure Redeploy, hardware failure Reboot straight to Started (scheduled-events-windows-
    2024.txt, "Event scheduling": "EventType = Reboot and EventStatus = Started")."""
    (event,) = json.loads(cli.ok("host", action, "--name", "h1", "-o", "json"))["events"]
    assert (event["EventType"], event["EventStatus"]) == (event_type, status)
    assert event["Resources"] == ["WestNO_0", "WestNO_1"]
    assert "Error: 404: no virtual machine runs on host 'h9'" in cli.fails(
        "host", action, "-n", "h9"
    )


def test_host_list(cli: Cli) -> None:
    rows = cli.ok("host", "list").splitlines()
    assert rows[0].split() == ["HOST", "VMS"]
    assert rows[1].split() == ["h1", "WestNO_0,WestNO_1"]


def test_maintenance_start_and_list(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "VMs in different fault domains won't be impacted by routine maintenance operations at the same
    time"."""
    output = cli.ok(
        "maintenance", "start", "--vm", "WestNO_0", "--vm", "WestNO_2", "--type", "Freeze"
    )
    assert output.startswith("campaign ")
    assert "2 fault domain step(s)" in output
    (event,) = output.splitlines()[2:]
    assert event.split()[1:5] == ["Freeze", "Scheduled", "Platform", "WestNO_0"]
    listed = cli.ok("maintenance", "list").splitlines()
    assert listed[0].split() == ["CAMPAIGN", "STEP", "CURRENT", "EVENTS"]
    assert listed[1].split()[1] == "1/2"
    assert "Error: 404" in cli.fails("maintenance", "start", "--vm", "ghost")


def test_the_documented_edge_cases_from_the_shell(cli: Cli) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event properties",
    EventStatus: a Reboot that freezes instead, and a second shorter impact while Started; neither
    makes an event."""
    (event,) = json.loads(cli.ok("vm", "restart", "--name", "app0", "-o", "json"))["events"]
    assert "freeze-instead app0: done, with no event" in cli.ok(
        "vm", "freeze-instead", "--name", "app0"
    )
    cli.ok("vm", "approve", "--name", "app0", event["EventId"])
    assert "is still in its impact" in cli.fails("vm", "impact-again", "--name", "app0")
    assert "has no Scheduled Reboot to freeze instead" in cli.fails(
        "vm", "freeze-instead", "--name", "db0"
    )


def test_maintenance_kinds_from_the_shell(cli: Cli) -> None:
    """SPEC 6: a campaign of memory-preserving host updates, then rebooting maintenance."""
    output = cli.ok(
        "maintenance", "start", "--vm", "WestNO_0", "--vm", "WestNO_2", "--kind", "update",
        "--kind", "maintain", "-o", "json",
    )  # fmt: skip
    (event,) = json.loads(output)["events"]
    assert (event["EventType"], event["DurationInSeconds"]) == ("Freeze", 9)
    assert "'nap' is not one of 'update'" in cli.fails(
        "maintenance", "start", "--kind", "nap", code=2
    )

"""``forewarn events list`` and ``host list`` say what people need (README "Driving the
platform"): who approved, by VM; no event of a VM that is gone listed as live; a host
redeployed to twice named once.

Seen by a newcomer: "APPROVED BY 00000000-0000-0000-0000-000000000000" right after the
dashboard said "approved as WestNO_0" (approvals count per tenant, and the table showed the
tenant); an evicted Spot VM's Preempt still listed after the VM was gone; a VM redeployed
twice on a host named ``host-vm0-redeployed-redeployed``.
"""

from __future__ import annotations

import json

from forewarn.testing import MakePlatform

from .cli_support import START, Cli

#: The documented impact ("Impact Duration: 7 seconds",
#: learn.microsoft.com/azure/virtual-machines/windows/scheduled-events).
IMPACT = "7s"


def _rows(output: str) -> dict[str, list[str]]:
    """The table's rows by EventId."""
    return {line.split()[0]: line.split() for line in output.splitlines()[1:]}


def test_the_approving_vm_is_named(cli: Cli) -> None:
    (event,) = json.loads(cli.ok("host", "live-migrate", "--name", "h1", "-o", "json"))["events"]
    cli.ok("vm", "approve", "--name", "WestNO_1", "--all")
    row = _rows(cli.ok("events", "list"))[event["EventId"]]
    assert row[-1] == "WestNO_1"
    assert "00000000-0000-0000-0000-000000000000" not in cli.ok("events", "list")
    listed = json.loads(cli.ok("events", "list", "-o", "json"))["events"][0]
    assert listed["approvedByVms"] == ["WestNO_1"]
    assert listed["approvedBy"] == ["00000000-0000-0000-0000-000000000000"]  # the tenant


def test_a_deleted_vm_s_event_is_not_listed_as_live(cli: Cli) -> None:
    """ "Preempt: The Spot Virtual Machine is being deleted"
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties"): once
    its impact is over and the VM gone, nobody is shown its event, and it is over."""
    (event,) = json.loads(cli.ok("vm", "simulate-eviction", "--name", "spot0", "-o", "json"))[
        "events"
    ]
    cli.ok("clock", "advance", "30s")  # "Preempt: 30 seconds" (SPEC 4.1)
    assert _rows(cli.ok("events", "list"))[event["EventId"]][2] == "Started"
    cli.ok("clock", "advance", IMPACT)
    assert event["EventId"] not in cli.ok("events", "list")
    assert "spot0" not in cli.ok("vm", "list")


def test_a_terminate_seen_by_the_rest_of_its_set_stays_listed_for_them(cli: Cli) -> None:
    """Every VM of a placement group sees its events (SPEC 5): web_1 and web_2 still read
    web_0's Terminate, Started, after web_0 is gone, until the Started period ends."""
    created = cli.ok("vmss", "delete-instances", "--name", "web", "--instance-ids", "0", "-o",
                     "json")  # fmt: skip
    (event,) = json.loads(created)["events"]
    cli.ok("clock", "advance", "5m")  # the set's notBeforeTimeout
    cli.ok("clock", "advance", IMPACT)
    row = _rows(cli.ok("events", "list"))[event["EventId"]]
    assert row[1:3] == ["Terminate", "Started"]
    cli.ok("clock", "advance", "10m")  # the documented Started period
    assert event["EventId"] not in cli.ok("events", "list")


def test_a_vm_redeployed_twice_is_on_host_name_redeployed_2(
    make_forewarn_platform: MakePlatform,
) -> None:
    """A lone VM has no other host to go to: each redeploy makes a new one, numbered."""
    alone = Cli(make_forewarn_platform(vms=["vm0"], start=START, rate_limit=1000))
    hosts = []
    for _ in range(3):
        alone.ok("vm", "redeploy", "--name", "vm0")
        alone.ok("clock", "advance", "10m")  # "Redeploy: 10 minutes" (SPEC 4.1)
        alone.ok("clock", "advance", "15m")
        hosts.append(json.loads(alone.ok("vm", "show", "--name", "vm0", "-o", "json"))["host"])
    assert hosts == ["host-vm0-redeployed", "host-vm0-redeployed-2", "host-vm0-redeployed"]

"""``forewarn fault set|list|clear`` against the real control app, and the endpoint it faults.

learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging": "410
Gone | Retry after some time for a max of 70 seconds"; the fault answers the VM's next request with
it.
"""

from __future__ import annotations

import json

import httpx

from .cli_support import Cli


def poll(cli: Cli, vm: str) -> int:
    """The status of one poll from ``vm``, through the platform's in-process transport, which
    carries out faults as the socket server does."""
    with httpx.Client(transport=cli.platform.transport(vm)) as http:
        response = http.get(
            "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01",
            headers={"Metadata": "true"},
        )
    return response.status_code


def test_set_list_clear(cli: Cli) -> None:
    vm = cli.service.vms()[0].name
    other = cli.service.vms()[1].name
    assert cli.ok("fault", "list") == "no faults\n"
    created = json.loads(
        cli.ok("fault", "set", "gone", "--vm", vm, "--count", "2", "--seed", "9", "-o", "json")
    )
    assert (created["kind"], created["status"], created["remaining"], created["seed"]) == (
        "gone", 410, 2, 9,
    )  # fmt: skip
    table = cli.ok("fault", "list").splitlines()
    assert table[0].split()[:4] == ["ID", "KIND", "VM", "STATUS"]
    assert table[1].split()[:5] == [str(created["id"]), "gone", vm, "410", "2"]
    assert poll(cli, other) == 200
    assert [poll(cli, vm) for _ in range(3)] == [410, 410, 200]
    assert cli.ok("fault", "list") == "no faults\n"

    cli.ok("fault", "set", "error", "--for", "70s")
    cli.ok("fault", "set", "throttle", "--vm", vm)
    assert poll(cli, other) == 500
    assert cli.ok("fault", "clear", "--vm", vm) == "cleared 1 fault(s)\n"
    listed = json.loads(cli.ok("fault", "list", "-o", "json"))["faults"]
    assert [item["kind"] for item in listed] == ["error"]
    assert listed[0]["expiresIn"] <= 70
    assert cli.ok("fault", "clear", str(listed[0]["id"])) == f"cleared fault {listed[0]['id']}\n"
    assert "404" in cli.fails("fault", "clear", str(listed[0]["id"]))
    cli.ok("fault", "set", "latency", "--delay", "1.5s", "--probability", "0.5")
    assert cli.ok("fault", "clear") == "cleared 1 fault(s)\n"


def test_refusals_are_one_line(cli: Cli) -> None:
    assert "Error: 422" in cli.fails("fault", "set", "latency")
    assert "Error: 404" in cli.fails("fault", "set", "gone", "--vm", "nobody")
    assert "Invalid value" in cli.fails("fault", "set", "gone", "--count", "0", code=2)
    assert "Invalid value" in cli.fails("fault", "set", "bogus", code=2)


def test_faults_are_not_journaled_platform_changes(cli: Cli) -> None:
    before = cli.service.vm_state(cli.service.vms()[0].name)
    cli.ok("fault", "set", "reset")
    assert cli.service.vm_state(cli.service.vms()[0].name) == before
    assert cli.ok("events", "list", "-o", "json") == json.dumps({"events": []}, indent=2) + "\n"

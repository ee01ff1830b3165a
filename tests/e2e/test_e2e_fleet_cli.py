"""A multi-VM fleet driven through the CLI while every VM polls its own address.

Issue text (platform): "An end-to-end test drives a multi-VM fleet through the CLI while
several VMs poll their own addresses, and checks what each VM saw, in order." Scope rules:
learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics" (availability set,
placement group, standalone); learn.microsoft.com/azure/virtual-machines/windows/scheduled-events,
"Scope".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_support import StartServer

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet-full.yaml"
WATCHED = {
    "db0": "127.0.10.1",
    "db1": "127.0.10.2",
    "jumpbox": "127.0.10.3",
    "other-tenant-vm": "127.0.10.4",
    "web_0": "127.0.20.1",
    "web_1": "127.0.20.2",
}
pytestmark = pytest.mark.e2e


class Poller(threading.Thread):
    """One VM's client: polls its own address about 4 times a second, keeps every new document."""

    def __init__(self, name: str, url: str) -> None:
        super().__init__(daemon=True, name=f"poll-{name}")
        self.url = url
        self.seen: list[dict[str, Any]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(headers={"Metadata": "true"}, timeout=2) as client:
            while not self.stop.wait(0.25):
                try:
                    response = client.get(self.url)
                except httpx.TransportError:
                    continue  # the VM is rebooting or frozen: its endpoint does not answer
                if response.status_code != 200:
                    continue
                document = response.json()
                if not self.seen or self.seen[-1] != document:
                    self.seen.append(document)

    @property
    def incarnation(self) -> int:
        return int(self.seen[-1]["DocumentIncarnation"]) if self.seen else 0


@pytest.fixture
def fleet_server(start_server: StartServer) -> tuple[int, str]:
    """``forewarn serve`` on examples/fleet-full.yaml, every watched VM's address answering;
    the VMs' port and the control API's address."""
    server = start_server(
        fleet=FLEET.read_text(encoding="utf-8"),
        vm_hosts=tuple(WATCHED.values()),
        seed=3,
        extra=("--profile", "fast"),
    )
    return server.port, server.control_address


def forewarn(control: str, *args: str) -> Any:
    environment = {**os.environ, "FOREWARN_CONTROL": control}
    result = subprocess.run(
        [sys.executable, "-m", "forewarn", *args, "--output", "json"],
        capture_output=True, text=True, timeout=30, env=environment, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def forewarn_plain(control: str, *args: str) -> str:
    environment = {**os.environ, "FOREWARN_CONTROL": control}
    result = subprocess.run(
        [sys.executable, "-m", "forewarn", *args],
        capture_output=True, text=True, timeout=30, env=environment, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def settle(pollers: dict[str, Poller], control: str) -> None:
    """Wait (bounded) until every poller has seen the document its VM is shown now.

    A VM in impact (rebooting, frozen) cannot read its endpoint, so it is not waited for.
    """
    deadline = time.monotonic() + 10
    vms = httpx.get(f"http://{control}/api/v1/vms", headers=AUTH).json()["vms"]
    reachable = {vm["name"] for vm in vms if vm["reachable"]}
    for name, poller in pollers.items():
        if name not in reachable:
            continue
        want = httpx.get(f"http://{control}/api/v1/vms/{name}/document", headers=AUTH).json()
        while poller.incarnation < want["DocumentIncarnation"] or poller.seen[-1] != want:
            assert time.monotonic() < deadline, (name, want, poller.seen[-1:])
            time.sleep(0.05)


def test_each_vm_sees_its_scope_in_order(fleet_server: tuple[int, str]) -> None:
    port, control = fleet_server
    pollers = {
        name: Poller(
            name, f"http://{address}:{port}/metadata/scheduledevents?api-version=2020-07-01"
        )
        for name, address in WATCHED.items()
    }
    for poller in pollers.values():
        poller.start()
    try:
        settle(pollers, control)
        # 1. live migration of a host shared by two tenants and three scopes
        migrated = forewarn(control, "host", "live-migrate", "--name", "rack1-host1")
        settle(pollers, control)
        # 2. a user restarts db1 (availability set "backend"); jumpbox auto-approves reboots
        forewarn(control, "vm", "restart", "--name", "db1")
        forewarn(control, "vm", "restart", "--name", "jumpbox")
        settle(pollers, control)
        # 3. scale-in of web_0 with terminate notification (placement group sees it)
        forewarn(control, "vmss", "delete-instances", "--name", "web", "--instance-ids", "0")
        settle(pollers, control)
        # 4. time passes: every event starts, impacts and is removed
        # fast profile: 3 s notice, a 5 s Freeze, then 2 s Started after it
        # Each step is waited for: a VM back from its impact shows Started for 2 s of this
        # clock only, which a poller reading 4 times a second would miss if the clock ran on.
        still_there = {n: p for n, p in pollers.items() if n != "web_0"}
        forewarn_plain(control, "clock", "advance", "1s")
        settle(still_there, control)
        for _ in range(10):  # the same second by second, through the API the CLI calls
            advanced = httpx.post(
                f"http://{control}/api/v1/clock/advance", json={"seconds": 1}, headers=AUTH
            )
            assert advanced.status_code == 200, advanced.text
            settle(still_there, control)
    finally:
        for poller in pollers.values():
            poller.stop.set()
        for poller in pollers.values():
            poller.join(5)

    def event_sets(name: str) -> list[set[tuple[str, str, tuple[str, ...]]]]:
        return [
            {(e["EventType"], e["EventStatus"], tuple(e["Resources"])) for e in doc["Events"]}
            for doc in pollers[name].seen
        ]

    # every VM's incarnations only ever went up, in the order it saw them
    for name, poller in pollers.items():
        incarnations = [doc["DocumentIncarnation"] for doc in poller.seen]
        assert incarnations == sorted(set(incarnations)), (name, incarnations)

    # the host's Freeze: one event per tenant and scope; Resources name only impacted VMs
    resources = sorted(tuple(e["Resources"]) for e in migrated["events"])
    assert resources == [("db0",), ("jumpbox",), ("other-tenant-vm",)]
    # db1 shares db0's availability set: it sees db0's Freeze though it is not impacted
    assert ("Freeze", "Scheduled", ("db0",)) in set().union(*event_sets("db1"))
    # other tenants and standalone VMs see only their own
    seen_by_other = set().union(*event_sets("other-tenant-vm"))
    assert {resources for _, _, resources in seen_by_other} == {("other-tenant-vm",)}
    seen_by_jumpbox = set().union(*event_sets("jumpbox"))
    assert {resources for _, _, resources in seen_by_jumpbox} == {("jumpbox",)}
    # jumpbox auto-approves user reboots: its Reboot was never shown Scheduled
    assert ("Reboot", "Scheduled", ("jumpbox",)) not in seen_by_jumpbox
    assert ("Reboot", "Started", ("jumpbox",)) in seen_by_jumpbox
    # web_1 (same placement group) saw web_0's Terminate; web_0 saw it before being deleted
    assert ("Terminate", "Scheduled", ("web_0",)) in set().union(*event_sets("web_1"))
    assert ("Terminate", "Scheduled", ("web_0",)) in set().union(*event_sets("web_0"))
    # in the end everything is over for the VMs that are still there
    for name in ("db0", "db1", "jumpbox", "other-tenant-vm", "web_1"):
        assert pollers[name].seen[-1]["Events"] == [], name
    remaining = {vm["name"] for vm in forewarn(control, "vm", "list")["vms"]}
    assert "web_0" not in remaining

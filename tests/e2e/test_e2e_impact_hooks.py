"""``serve --impact-hook``: a command run when a VM's impact starts and ends (README
"Faithfulness"), with the VM, the event and the phase in its environment; bounded by a
timeout, and its failure never stops the platform."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from e2e_support import (
    PAIR_HOSTS,
    ForewarnServer,
    pair_fleet,
    start_forewarn,
    stopped_at_exit,
)

pytestmark = pytest.mark.e2e


def _eventually(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _restart_started(server: ForewarnServer) -> str:
    response = server.control.post("/vms/WestNO_1/restart")
    assert response.status_code in (200, 201), response.text
    event_id: str = response.json()["events"][0]["EventId"]
    assert server.approve_raw([event_id]).status == 200  # WestNO_0 approves for the set
    return event_id


def test_the_hook_runs_at_impact_start_and_end_with_the_event_in_its_environment(
    tmp_path: Path,
) -> None:
    log = tmp_path / "hook.log"
    hook = f'echo "$FOREWARN_IMPACT $FOREWARN_VM $FOREWARN_EVENT_TYPE $FOREWARN_EVENT_ID" >> {log}'
    server = start_forewarn(
        tmp_path, fleet=pair_fleet(*PAIR_HOSTS), vm_hosts=PAIR_HOSTS, extra=("--impact-hook", hook)
    )
    with stopped_at_exit(server):
        event_id = _restart_started(server)
        _eventually(lambda: log.exists() and "start" in log.read_text(), "the start hook")
        assert log.read_text().split() == ["start", "WestNO_1", "Reboot", event_id]
        server.advance(7)  # "Impact Duration: 7 seconds" (SPEC 4.1)
        _eventually(lambda: len(log.read_text().splitlines()) == 2, "the end hook")
        assert log.read_text().splitlines()[1].split() == ["end", "WestNO_1", "Reboot", event_id]


def test_a_failing_or_hanging_hook_is_logged_and_the_platform_goes_on(tmp_path: Path) -> None:
    hook = 'if [ "$FOREWARN_IMPACT" = start ]; then sleep 60; fi; exit 3'
    server = start_forewarn(
        tmp_path,
        fleet=pair_fleet(*PAIR_HOSTS),
        vm_hosts=PAIR_HOSTS,
        extra=("--impact-hook", hook, "--impact-hook-timeout", "1"),
    )
    with stopped_at_exit(server):
        event_id = _restart_started(server)
        _eventually(lambda: "killed after 1 s" in server.process.output(), "the timeout")
        assert server.events()[event_id]["EventStatus"] == "Started"
        server.advance(7)
        _eventually(lambda: "exited with status 3" in server.process.output(), "the failure")
        assert server.document()["Events"][0]["EventStatus"] == "Started"
        server.process.assert_healthy()


def test_a_deleted_vm_s_hook_says_deleted_after_its_impact_ends(tmp_path: Path) -> None:
    """A Preempt deletes its VM when its impact ends ("Preempt: The Spot Virtual Machine is
    being deleted", learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event
    Properties"): the hook is told the start, the end and then ``deleted``, with the event, so a
    harness stops the software of a VM that no longer exists; its address answers nothing from then
    on."""
    log = tmp_path / "hook.log"
    hook = f'echo "$FOREWARN_IMPACT $FOREWARN_VM $FOREWARN_EVENT_TYPE $FOREWARN_EVENT_ID" >> {log}'
    fleet = f"vms:\n  - {{name: spot0, address: {PAIR_HOSTS[0]}, priority: Spot}}\n"
    server = start_forewarn(
        tmp_path, fleet=fleet, vm_hosts=PAIR_HOSTS[:1], extra=("--impact-hook", hook)
    )
    with stopped_at_exit(server):
        response = server.control.post("/vms/spot0/simulate-eviction")
        assert response.status_code in (200, 201), response.text
        event_id = response.json()["events"][0]["EventId"]
        server.advance(30)  # "Preempt: 30 seconds" (SPEC 4.1)
        _eventually(lambda: log.exists() and "start" in log.read_text(), "the start hook")
        server.advance(7)
        _eventually(lambda: len(log.read_text().splitlines()) == 3, "the deleted hook")
        assert [line.split() for line in log.read_text().splitlines()] == [
            ["start", "spot0", "Preempt", event_id],
            ["end", "spot0", "Preempt", event_id],
            ["deleted", "spot0", "Preempt", event_id],
        ]
        server.process.assert_healthy()

"""Real client processes through whole events on the system clock, impact included.

What must hold (README "Faithfulness"): no client ever sees a reset, an exception or a
document out of order, from Scheduled through approval, impact and removal. The clients:
the documentation's Python sample (its functions unchanged but for the address,
scheduled-events-windows-2024.txt "Python Sample"), the documentation's curl command in a
loop, a poller with ``If-None-Match`` as Microsoft's sample service polls
(Azure/vm-scheduled-events, node/src/index.ts), and a client written as the documentation
shows, polling once a second with no error handling, which must exit cleanly after a restart,
a live migration and an eviction of its VM.

The impact lasts the documented 7 s ("Impact Duration: 7 seconds",
scheduled-events-windows-2024.txt "High level overview"); the eviction notice is the documented 30 s, other notices the fast profile's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_documented import sample_pointing_at, write_sample
from e2e_support import ForewarnServer, clean_environment, start_forewarn, stopped_at_exit

pytestmark = pytest.mark.e2e

CLIENTS = Path(__file__).parent / "clients"
VM_ADDRESS = "127.0.0.2"
FLEET = f"vms:\n  - {{name: vm0, address: {VM_ADDRESS}, host: node-0, priority: Spot}}\n"
#: Four clients share one VM: under its documented 5 requests a second only if none retries.
RATE_LIMIT = 20


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ForewarnServer]:
    started = start_forewarn(
        tmp_path,
        fleet=FLEET,
        vm_hosts=(VM_ADDRESS,),
        rate_limit=RATE_LIMIT,
        clock="system",
        # The documented impact and eviction notice ("Preempt: 30 seconds",
        # scheduled-events-linux.txt "Event Scheduling"); the fast profile's other notices;
        # Started for 10 s rather than the documented 10 minutes, so a call held through the
        # impact finds its event still Started, as it would on Azure.
        extra=(
            *("--profile", "fast", "--timing", "impact=7s"),
            *("--timing", "notice.Preempt=30s", "--timing", "started_period=10s"),
        ),
    )
    with stopped_at_exit(started) as running:
        yield running


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, env=clean_environment(), cwd=log.parent
        )


def _wait_until_gone(server: ForewarnServer, timeout: float = 40.0) -> None:
    """Until the platform holds no event: removed after its impact and Started period."""
    deadline = time.monotonic() + timeout
    while server.events():
        assert time.monotonic() < deadline, server.events()
        time.sleep(0.25)


def _operate(server: ForewarnServer, path: str) -> list[dict[str, Any]]:
    response = server.control.post(path)
    assert response.status_code in (200, 201), response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_clients_run_through_a_restart_a_live_migration_and_an_eviction(
    server: ForewarnServer, tmp_path: Path
) -> None:
    base = server.base_url(VM_ADDRESS)
    stop_file = tmp_path / "stop"
    sample = write_sample(tmp_path, sample_pointing_at(base))
    logs = {name: tmp_path / f"{name}.log" for name in ("client", "sample", "curl", "etag")}
    python = sys.executable
    processes = {
        "client": _start([python, str(CLIENTS / "polling_client.py"), base], logs["client"]),
        "sample": _start([python, str(CLIENTS / "sample_driver.py"), str(sample)], logs["sample"]),
        "curl": _start(["sh", str(CLIENTS / "curl_loop.sh"), base, str(stop_file)], logs["curl"]),
        "etag": _start(
            [python, str(CLIENTS / "etag_poller.py"), base, str(stop_file)], logs["etag"]
        ),
    }
    try:
        time.sleep(3)
        (restart,) = _operate(server, "/vms/vm0/restart")
        assert restart["EventType"] == "Reboot"
        _wait_until_gone(server)
        (freeze,) = _operate(server, "/hosts/node-0/live-migrate")
        assert freeze["EventType"] == "Freeze"
        _wait_until_gone(server)
        time.sleep(2)
        stop_file.touch()  # the pollers that never leave on their own stop before the VM goes
        for name in ("curl", "etag"):
            assert processes[name].wait(15) == 0, logs[name].read_text()
        (eviction,) = _operate(server, "/vms/vm0/simulate-eviction")
        assert eviction["EventType"] == "Preempt"
        for name in ("client", "sample"):
            assert processes[name].wait(30) == 0, logs[name].read_text()
    finally:
        for process in processes.values():
            process.kill()
            process.wait()

    for name, log in logs.items():
        assert "Traceback" not in log.read_text(), (name, log.read_text())

    # The documentation-style client: documents in order, and it was held through an impact
    # (its call "simply takes longer") rather than reset.
    client = _json_lines(logs["client"])
    incarnations = [line["incarnation"] for line in client]
    assert incarnations == sorted(incarnations)
    assert max(line["waited"] for line in client) > 3.0
    seen = {(kind, status) for line in client for kind, status in line["events"]}
    # Each event reached it (Scheduled may pass unseen when another client approves first).
    assert {("Reboot", "Started"), ("Freeze", "Started"), ("Preempt", "Scheduled")} <= seen

    # curl: every answer a whole document, in order.
    documents = _json_lines(logs["curl"])
    assert len(documents) >= 10
    curl_incarnations = [document["DocumentIncarnation"] for document in documents]
    assert curl_incarnations == sorted(curl_incarnations)

    # If-None-Match: a 200 for each new document with its incarnation as the tag, 304 between.
    answers = _json_lines(logs["etag"])
    assert {answer["status"] for answer in answers} == {200, 304}
    for answer in answers:
        if answer["status"] == 200:
            assert answer["etag"] == f'"{answer["incarnation"]}"'
        else:
            assert answer["length"] == 0
    new = [answer["incarnation"] for answer in answers if answer["status"] == 200]
    assert new == sorted(set(new))

    assert "eviction announced" in logs["sample"].read_text()

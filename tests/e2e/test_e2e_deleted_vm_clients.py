"""Real client processes on VMs that are deleted under them, and on a fresh VM that reads
instance metadata first (docs/faithfulness.md: "Deleted VMs", "First call").

- Deleted: "Preempt: The Spot Virtual Machine is being deleted", "Terminate: The virtual
  machine is scheduled to be deleted"
  (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties"). The
  documentation's Python sample
  (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample", its
  functions unchanged but for the address) and a poller with ``If-None-Match`` (as Microsoft's
  sample service polls: Azure/vm-scheduled-events, node/src/index.ts) run on each of two VMs, one
  evicted, one deleted from its scale set. After its deletion a VM's clients get no HTTP answer at
  all (each one's last call never completes), and none of them crashes before the harness stops it
  through ``--impact-hook``'s ``deleted`` phase, as Azure stops the software of a VM it deletes.
- First call: "Scheduled Events is enabled for your service the first time you make a request
  for events. You should expect a delayed response in your first call of up to two minutes"
  (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and Disabling
  Scheduled Events"): a client reading ``/metadata/instance`` first on a fresh VM is answered at
  once; its first events call is the one held.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_documented import sample_pointing_at, write_sample
from e2e_support import (
    ForewarnServer,
    clean_environment,
    start_forewarn,
    stopped_at_exit,
)

pytestmark = pytest.mark.e2e

CLIENTS = Path(__file__).parent / "clients"
SPOT, WEB, FRESH = "127.0.0.2", "127.0.0.3", "127.0.0.4"
FLEET = f"""\
vms:
  - {{name: spot0, address: {SPOT}, priority: Spot}}
  - {{name: fresh, address: {FRESH}, scheduledEventsEnabled: false}}
scaleSets:
  - {{name: web, capacity: 1, addressStart: {WEB},
     terminateNotification: {{enabled: true, notBeforeTimeout: PT5M}}}}
"""
#: The delay of a first call, long enough that a call held for it cannot pass for one
#: answered at once, short enough for the suite.
FIRST_CALL_DELAY = 5
#: The hook lets the deleted VM's software go on for this long (it keeps calling; nothing
#: may answer it) before stopping it.
GRACE = 2
HOOK = """\
[ "$FOREWARN_IMPACT" = deleted ] || exit 0
sleep {grace}
echo "$FOREWARN_VM $FOREWARN_EVENT_TYPE $FOREWARN_EVENT_ID" >> {dir}/deleted.log
for pid in $(cat {dir}/pids/$FOREWARN_VM); do
  kill "$pid" && echo "$FOREWARN_VM $pid" >> {dir}/killed.log
done
"""


class Vm:
    """The software running on one VM: the sample and the poller, as processes."""

    def __init__(self, name: str, address: str, server: ForewarnServer, workdir: Path) -> None:
        self.name = name
        self.logs = {kind: workdir / f"{name}-{kind}.log" for kind in ("sample", "etag")}
        base = server.base_url(address)
        sample_dir = workdir / name
        sample_dir.mkdir()
        sample = write_sample(sample_dir, sample_pointing_at(base))
        stop_file = workdir / "never"  # the poller runs until the harness stops it
        argvs = {
            "sample": [sys.executable, str(CLIENTS / "sample_until_stopped.py"), str(sample)],
            "etag": [sys.executable, str(CLIENTS / "etag_poller.py"), base, str(stop_file)],
        }
        argvs["etag"].append("--log-asks")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        for kind, argv in argvs.items():
            with self.logs[kind].open("wb") as log:
                self.processes[kind] = subprocess.Popen(
                    argv, stdout=log, stderr=subprocess.STDOUT, env=clean_environment()
                )
        pids = workdir / "pids" / name
        pids.write_text("".join(f"{p.pid}\n" for p in self.processes.values()))

    def lines(self, kind: str) -> list[dict[str, Any]]:
        text = self.logs[kind].read_text()
        assert "Traceback" not in text, (self.name, kind, text)
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def answered(self) -> bool:
        return all(
            any("answered" in line or "status" in line for line in self.lines(kind))
            for kind in self.logs
        )

    def stop(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "pids").mkdir()
    return tmp_path


@pytest.fixture
def server(workdir: Path) -> Iterator[ForewarnServer]:
    hook = workdir / "hook.sh"
    hook.write_text(HOOK.format(grace=GRACE, dir=workdir))
    extra = (
        *("--profile", "fast", "--timing", "impact=3s", "--timing", "started_period=60s"),
        *("--timing", f"first_call_delay={FIRST_CALL_DELAY}s"),
        *("--impact-hook", f"sh {hook}", "--rate-limit", "20"),
    )
    started = start_forewarn(
        workdir, fleet=FLEET, vm_hosts=(SPOT, WEB, FRESH), clock="system", extra=extra
    )
    with stopped_at_exit(started):
        yield started


def _until(check: Any, what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s"
        time.sleep(0.2)


def test_clients_of_deleted_vms_get_no_answer_and_run_until_the_hook_stops_them(
    server: ForewarnServer, workdir: Path
) -> None:
    vms = [Vm("spot0", SPOT, server, workdir), Vm("web_0", WEB, server, workdir)]
    try:
        _until(lambda: all(vm.answered() for vm in vms), "every client's first answer")
        evicted = server.control.post("/vms/spot0/simulate-eviction")
        terminated = server.control.post(
            "/scale-sets/web/delete-instances", json={"instanceIds": ["0"]}
        )
        assert evicted.status_code == terminated.status_code == 200, terminated.text
        deleting = {
            "spot0": ("Preempt", evicted.json()["events"][0]["EventId"]),
            "web_0": ("Terminate", terminated.json()["events"][0]["EventId"]),
        }
        killed = workdir / "killed.log"
        _until(
            lambda: killed.exists() and len(killed.read_text().splitlines()) == 4,
            "the hook stopping every client",
        )
        for vm in vms:
            for kind, process in vm.processes.items():
                # Stopped by the hook's SIGTERM while it still ran: it had not crashed.
                assert process.wait(10) == -signal.SIGTERM, (vm.name, kind)
        told = sorted(line.split() for line in (workdir / "deleted.log").read_text().splitlines())
        assert told == sorted([name, *deleting[name]] for name in deleting)
        for vm in vms:
            event_type, _ = deleting[vm.name]
            for kind in vm.logs:
                lines = vm.lines(kind)
                # Its last call never completed: nothing answered after the deletion.
                assert "asking" in lines[-1], (vm.name, kind, lines[-3:])
            # The sample was told of the event that deleted its VM before it went.
            documents = [line for line in vm.lines("sample") if line.get("answered") == "GET"]
            shown = {kind for document in documents for kind, _ in document["events"]}
            assert event_type in shown, documents[-3:]
    finally:
        for vm in vms:
            vm.stop()
    server.process.assert_healthy()


def test_instance_metadata_first_is_answered_at_once_and_the_first_events_call_waits(
    server: ForewarnServer,
) -> None:
    finished = subprocess.run(
        [sys.executable, str(CLIENTS / "instance_first.py"), server.base_url(FRESH)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_environment(),
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    timings = json.loads(finished.stdout)
    assert timings["instance"]["status"] == 200
    assert timings["instance"]["body"] == "fresh"
    # Held, it would have taken the whole delay: it was answered before that.
    assert timings["instance"]["seconds"] < FIRST_CALL_DELAY
    assert timings["events"]["status"] == 200
    assert timings["events"]["seconds"] >= FIRST_CALL_DELAY - 0.5  # the clock's rounding
    assert json.loads(timings["events"]["body"]) == {"DocumentIncarnation": 1, "Events": []}

"""Runs one whole-event session: ``forewarn serve`` on the system clock, four client processes
acting as its VM, and a restart, a live migration and an eviction of that VM in turn.

A script rather than test code so that the very same run can happen on loopback or inside a
network namespace at 169.254.169.254:80 (``ip netns exec NS python whole_event.py ...``),
where the test's own process cannot reach the control API. It writes each client's output
to ``WORKDIR/<client>.log`` and exits non-zero, saying why, when a step fails; the test reads
the logs and checks what the clients saw.

Usage: whole_event.py WORKDIR VM_ADDRESS PORT CONTROL_PORT [STORE]

With STORE (``postgresql://...?namespace=...``) the front-end keeps its state there as one of
several front-ends sharing a fleet would: time moves by its leader's journal records.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).parent
workdir, vm_address, port, control_port = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
store = sys.argv[5:6]
base = f"http://{vm_address}" + ("" if port == "80" else f":{port}")
control = httpx.Client(
    base_url=f"http://127.0.0.1:{control_port}/api/v1",
    timeout=10,
    headers={"Authorization": "Bearer " + os.environ["FOREWARN_TOKEN"]},
)
fleet = workdir / "fleet.yaml"
fleet.write_text(f"vms:\n  - {{name: vm0, address: {vm_address}, host: node-0, priority: Spot}}\n")
stop_file = workdir / "stop"
python = sys.executable
processes: dict[str, subprocess.Popen[bytes]] = {}


def start(name: str, argv: list[str]) -> None:
    with (workdir / f"{name}.log").open("wb") as log:
        processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def fail(why: str) -> None:
    sys.exit(f"whole-event run: {why}")


def until(check: object, what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            fail(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.25)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def operate(path: str) -> str:
    response = control.post(path)
    if response.status_code not in (200, 201):
        fail(f"{path}: {response.status_code} {response.text}")
    (event,) = response.json()["events"]
    event_type: str = event["EventType"]
    return event_type


def no_events() -> bool:
    return not control.get("/events").json()["events"]


# The documented impact and eviction notice ("Preempt: 30 seconds",
# learn.microsoft.com/azure/virtual-machines/linux/scheduled-events "Event Scheduling"), the fast
# profile's other notices, and Started for 10 s rather than the documented 10 minutes, so a call
# held through the impact finds its event still Started.
start(
    "serve",
    [
        *(python, "-m", "forewarn", "serve", "--fleet", str(fleet), "--clock", "system"),
        *("--bind", f"{vm_address}:{port}", "--control", f"127.0.0.1:{control_port}"),
        *("--profile", "fast", "--timing", "impact=7s", "--timing", "notice.Preempt=30s"),
        *("--timing", "started_period=10s", "--rate-limit", "20", "--seed", "7"),
        *(("--store", store[0]) if store else ()),
    ],
)
try:
    until(lambda: answers(f"{base}/") and answers(f"http://127.0.0.1:{control_port}/"), "start")
    sample = workdir / "scheduled_events_sample.py"
    start("client", [python, str(HERE / "polling_client.py"), base])
    start("sample", [python, str(HERE / "sample_driver.py"), str(sample)])
    start("curl", ["sh", str(HERE / "curl_loop.sh"), base, str(stop_file)])
    start("etag", [python, str(HERE / "etag_poller.py"), base, str(stop_file)])
    # every poller has read the document once before anything happens to its VM
    until(
        lambda: all(
            (workdir / f"{name}.log").stat().st_size for name in ("client", "curl", "etag")
        ),
        "the pollers' first reads",
    )
    if operate("/vms/vm0/restart") != "Reboot":
        fail("a restart is not a Reboot")
    until(no_events, "the Reboot's end")
    if operate("/hosts/node-0/live-migrate") != "Freeze":
        fail("a live migration is not a Freeze")
    until(no_events, "the Freeze's end")
    time.sleep(2)
    stop_file.touch()  # the pollers that never leave on their own stop before the VM goes
    for name in ("curl", "etag"):
        if processes[name].wait(15) != 0:
            fail(f"{name} exited with {processes[name].returncode}")
    if operate("/vms/vm0/simulate-eviction") != "Preempt":
        fail("an eviction is not a Preempt")
    for name in ("client", "sample"):
        if processes[name].wait(30) != 0:
            fail(f"{name} exited with {processes[name].returncode}")
finally:
    for process in processes.values():
        process.kill()
        process.wait()

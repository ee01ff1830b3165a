"""``forewarn serve --workers 2`` through real processes (docs/scale-out.md, "Workers"): two
worker processes answer the VMs at their addresses behind the same listeners, one fleet, on
the machine's PostgreSQL and on a PostgreSQL of serve's own.

Each VM's connections reach one worker, new connections too, so its rate limit counts all
its requests; what a VM sees does not depend on the worker that answers it: an approval
answered by one worker is in the next document the other answers for another VM of the set,
as Azure shows an approval to every VM of the set ("Start an event": the event proceeds for
all resources once approved), and a VM whose worker died is answered by the other. A worker
killed with SIGKILL is started again while the other answers; SIGTERM stops every process
serve started (its PostgreSQL too) with exit status 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_support import clean_environment, free_port

pytestmark = pytest.mark.e2e

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}
HEADERS = {"Metadata": "true"}
VMS = {"WestNO_0": "127.0.0.2", "WestNO_1": "127.0.0.3"}
FLEET = """
availabilitySets: [{name: west}]
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1}
"""
#: A first start of the embedded PostgreSQL runs initdb: seconds on a loaded machine.
UP_SECONDS = 120.0


def _children(pid: int) -> set[int]:
    """Every process whose parent is ``pid``."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextlib.contextmanager
def _embedded_home() -> Iterator[Path]:
    """A data directory PostgreSQL's user can reach when the test runs as root (pytest's
    own folders are mode 700)."""
    home = Path(tempfile.mkdtemp(prefix="forewarn-workers-"))
    home.chmod(0o711)
    try:
        yield home / "data"
    finally:
        shutil.rmtree(home, ignore_errors=True)


class Served:
    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=clean_environment()
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = UP_SECONDS) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.text())) is None:
            assert self.process.poll() is None, self.text()
            assert time.monotonic() < deadline, self.text()
            time.sleep(0.1)
        return found


def _poll(host: str, port: int) -> httpx.Response:
    """A poll on a connection of its own, as the documentation's sample polls; one retry
    when the connection was cut (a worker killed as it accepted it)."""
    url = f"http://{host}:{port}/metadata/scheduledevents?api-version=2020-07-01"
    try:
        return httpx.get(url, headers=HEADERS, timeout=10)
    except httpx.TransportError:
        return httpx.get(url, headers=HEADERS, timeout=10)


def _workers_answering(log: str, after: int = 0) -> dict[str, set[str]]:
    """Which workers answered each kind of request, from their debug lines."""
    seen: dict[str, set[str]] = {}
    for line in log[after:].splitlines():
        found = re.search(
            r"forewarn.requests: (GET|POST) \S+ vm=(\S+) status=200 .*worker=(\d)", line
        )
        if found:
            seen.setdefault(f"{found.group(1)} {found.group(2)}", set()).add(found.group(3))
    return seen


@pytest.mark.parametrize("store", ["machine-postgresql", "embedded-postgresql"])
def test_two_workers_answer_one_fleet_and_stop_with_everything_they_started(
    store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    port, control = free_port(["127.0.0.1", *VMS.values()]), free_port(["127.0.0.1"])
    argv = [sys.executable, "-m", "forewarn", "serve", "--workers", "2", "--fleet", str(fleet)]
    argv += ["--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}"]
    argv += ["--clock", "manual", "--log-level", "debug", "--rate-limit", "1000"]
    with contextlib.ExitStack() as cleanup:
        if store == "machine-postgresql":
            argv += ["--store", request.getfixturevalue("shared_store")]
            data = None
        else:
            data = cleanup.enter_context(_embedded_home())
            argv += ["--data-dir", str(data)]
        served = Served(argv, tmp_path / "serve.log")
        cleanup.callback(_kill_if_running, served.process)
        pids = served.wait_for(r"workers: 2 processes answer the VMs \(pids (\d+), (\d+)\)")
        served.wait_for("control: http")
        first, second = int(pids.group(1)), int(pids.group(2))
        started = _children(served.process.pid)
        assert {first, second} <= started
        health = httpx.get(f"http://127.0.0.1:{control}/healthz", timeout=10)
        assert health.json() == {"status": "ready", "workers": {"up": 2, "wanted": 2}}

        # VMs polled at their addresses, on new connections: each VM's connections all reach
        # one worker (its rate limit counts them all), the VMs spread over both (127.0.0.1
        # calling .2 and .3: addresses that differ in the bit the kernel's choice reads).
        for _ in range(20):
            for host in VMS.values():
                assert _poll(host, port).status_code == 200
        answering = _workers_answering(served.text())
        ((zero,), (one,)) = answering["GET WestNO_0"], answering["GET WestNO_1"]
        assert {zero, one} == {"1", "2"}, answering

        # An approval answered by one worker (WestNO_1's, approving its own event) is in what
        # the other answers next (WestNO_0's; WestNO_1 itself is rebooting).
        api = f"http://127.0.0.1:{control}/api/v1"
        created = httpx.post(
            f"{api}/events", headers=AUTH, json={"type": "Reboot", "resources": ["WestNO_1"]}
        )
        assert created.status_code == 201, created.text
        event_id = created.json()["EventId"]
        before = len(served.text())
        body = json.dumps({"StartRequests": [{"EventId": event_id}]})
        approved = httpx.post(
            f"http://{VMS['WestNO_1']}:{port}/metadata/scheduledevents?api-version=2020-07-01",
            headers=HEADERS,
            content=body,
            timeout=10,
        )
        assert approved.status_code == 200, approved.text
        for _ in range(5):
            events = _poll(VMS["WestNO_0"], port).json()["Events"]
            assert [(e["EventId"], e["EventStatus"]) for e in events] == [(event_id, "Started")]
        answering = _workers_answering(served.text(), before)
        assert answering["POST WestNO_1"] == {one}
        assert answering["GET WestNO_0"] == {zero}

        # A worker killed with SIGKILL is started again; the other answers meanwhile.
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert _poll(VMS["WestNO_0"], port).status_code == 200
            time.sleep(0.05)
        served.wait_for(
            rf"worker 1 \(pid {first}\) exited with status -9; starting it again in 0.5 s"
        )
        deadline = time.monotonic() + UP_SECONDS
        while httpx.get(f"http://127.0.0.1:{control}/healthz", timeout=10).json()["workers"] != {
            "up": 2,
            "wanted": 2,
        }:
            assert time.monotonic() < deadline, served.text()
            time.sleep(0.1)
        restarted = _children(served.process.pid) - started
        assert len(restarted) == 1, restarted
        assert not _alive(first)
        assert served.text().count("exited with status") == 1

        if data is not None:  # store check reads the running fleet through its server
            assert "2 VM(s)" in _store_check(data)

        # SIGTERM: every process serve started is gone, and the exit status is 0.
        started |= restarted
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(60) == 0, served.text()
        assert [pid for pid in started if _alive(pid)] == []
        if data is not None:
            assert (data / "postgres" / "PG_VERSION").exists(), "its data is kept"
            assert not (data / "postgres" / "postmaster.pid").exists(), "stopped cleanly"
        assert "Traceback" not in served.text()
        if data is not None:  # and a stopped one through a server started for the check
            assert "2 VM(s)" in _store_check(data)
            assert not (data / "postgres" / "postmaster.pid").exists()


def _kill_if_running(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(10)


def _store_check(data: Path) -> str:
    argv = [sys.executable, "-m", "forewarn", "store", "check", "--data-dir", str(data)]
    checked = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("ok: "), checked.stdout
    return checked.stdout

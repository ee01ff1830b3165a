"""The dev profile through real processes: a VM that polls once a second sees every state of
the built-in live migration, Started included.

The mock server's "Dev Timing" scenarios "have all the timing reduced by a factor of 60"
(github.com/Azure-Samples/scheduled-events-mock-server, docs/platform.md): its Live
Migration shows Scheduled for 15 s, Started for 5 s, then the event is gone. The mock pauses
no VM; forewarn pauses it for the Freeze's 5 s (DurationInSeconds 5: "The Virtual Machine is
scheduled to pause for a few seconds", learn.microsoft.com/azure/virtual-machines/
scheduled-events-overview, "Scheduled Event properties"), which would take the whole 5 s
Started period. So under the dev profile the period counts from the end of the impact
(docs/flows.md, "Dev timing"), and the VM's poller reads Scheduled, then Started, then no
event.

``forewarn serve --profile dev`` on the system clock, ``forewarn scenario run --builtin
live-migration --dev-timing`` and the poller (``clients/state_poller.py``) are each a
process of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import ForewarnServer, clean_environment, start_forewarn, stopped_at_exit

pytestmark = pytest.mark.e2e

CLIENTS = Path(__file__).parent / "clients"
FLEET = "vms:\n  - {name: vm0, address: 127.0.0.2, host: node-0}\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ForewarnServer]:
    started = start_forewarn(
        tmp_path,
        fleet=FLEET,
        vm_hosts=("127.0.0.2",),
        clock="system",
        extra=("--profile", "dev"),
    )
    with stopped_at_exit(started):
        yield started


def test_a_poller_sees_scheduled_started_and_the_end_of_a_dev_timing_live_migration(
    server: ForewarnServer, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    environment = {**clean_environment(), "FOREWARN_TOKEN": os.environ["FOREWARN_TOKEN"]}
    with (tmp_path / "poller.log").open("w") as log:
        poller = subprocess.Popen(
            [sys.executable, str(CLIENTS / "state_poller.py"), server.base_url(), str(stop)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
        )
        try:
            run = subprocess.run(
                [sys.executable, "-m", "forewarn", "scenario", "run", "--builtin",
                 "live-migration", "--dev-timing", "--control", server.control_address],
                capture_output=True, text=True, env=environment, timeout=120, check=False,
            )  # fmt: skip
        finally:
            stop.touch()
            poller.wait(timeout=40)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = (tmp_path / "poller.log").read_text().splitlines()
    seen = [tuple(json.loads(line)["statuses"]) for line in lines]
    changes = [state for i, state in enumerate(seen) if i == 0 or state != seen[i - 1]]
    assert changes == [(), ("Scheduled",), ("Started",), ()], lines
    assert seen.count(("Started",)) >= 3, "Started for its 5 s, polled once a second"
    assert max(json.loads(line)["waited"] for line in lines) >= 3, "a poll held by the Freeze"

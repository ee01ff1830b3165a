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
process of their own. The ``fast`` profile, a 2 s Started period beside the same 5 s Freeze,
counts it from the end of the impact too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import ForewarnServer, clean_environment, start_forewarn, stopped_at_exit

pytestmark = pytest.mark.e2e

CLIENTS = Path(__file__).parent / "clients"
FLEET = "vms:\n  - {name: vm0, address: 127.0.0.2, host: node-0}\n"


@pytest.fixture(params=["dev"])
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ForewarnServer]:
    started = start_forewarn(
        tmp_path,
        fleet=FLEET,
        vm_hosts=("127.0.0.2",),
        clock="system",
        extra=("--profile", request.param),
    )
    with stopped_at_exit(started):
        yield started


def polled(server: ForewarnServer, tmp_path: Path, *command: str) -> list[dict[str, Any]]:
    """What the VM's poller read, a line a poll, while ``forewarn COMMAND`` ran against the
    control port (and a little after: until the VM has no event)."""
    stop = tmp_path / "stop"
    environment = {**clean_environment(), "FOREWARN_TOKEN": os.environ["FOREWARN_TOKEN"]}
    log_path = tmp_path / "poller.log"
    with log_path.open("w") as log:
        poller = subprocess.Popen(
            [sys.executable, str(CLIENTS / "state_poller.py"), server.base_url(), str(stop)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
        )
        try:
            run = subprocess.run(
                [sys.executable, "-m", "forewarn", *command, "--control", server.control_address],
                capture_output=True, text=True, env=environment, timeout=120, check=False,
            )  # fmt: skip
            assert run.returncode == 0, run.stdout + run.stderr
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                whole = log_path.read_text().rpartition("\n")[0]  # lines written whole
                lines = [json.loads(line) for line in whole.splitlines()]
                if any(line["statuses"] for line in lines) and not lines[-1]["statuses"]:
                    break
                time.sleep(0.5)
        finally:
            stop.touch()
            poller.wait(timeout=40)
    return [json.loads(line) for line in log_path.read_text().splitlines()]


def test_a_poller_sees_scheduled_started_and_the_end_of_a_dev_timing_live_migration(
    server: ForewarnServer, tmp_path: Path
) -> None:
    lines = polled(
        server, tmp_path, "scenario", "run", "--builtin", "live-migration", "--dev-timing"
    )
    seen = [tuple(line["statuses"]) for line in lines]
    changes = [state for i, state in enumerate(seen) if i == 0 or state != seen[i - 1]]
    assert changes == [(), ("Scheduled",), ("Started",), ()], lines
    assert seen.count(("Started",)) >= 3, "Started for its 5 s, polled once a second"
    assert max(line["waited"] for line in lines) >= 3, "a poll held by the Freeze"


@pytest.mark.parametrize("server", ["fast"], indirect=True)
def test_a_poller_sees_started_after_a_fast_profile_live_migrations_freeze(
    server: ForewarnServer, tmp_path: Path
) -> None:
    """``--profile fast``: 3 s of notice, the 5 s Freeze, then Started for the profile's 2 s
    once the VM runs again, so the poller reads Scheduled, Started, then no event."""
    lines = polled(server, tmp_path, "host", "live-migrate", "--name", "node-0")
    seen = [tuple(line["statuses"]) for line in lines]
    changes = [state for i, state in enumerate(seen) if i == 0 or state != seen[i - 1]]
    assert changes[-3:] == [("Scheduled",), ("Started",), ()], lines
    assert seen.count(("Started",)) >= 2, "Started for its 2 s after the Freeze"

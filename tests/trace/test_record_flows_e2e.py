"""Recording forewarn itself as a VM would: a real ``forewarn record`` process polls a real
``forewarn serve`` (manual clock) while each built-in flow runs by name; the trace then
replays to the same documents byte for byte, and the scenario made from it, run on a fresh
platform, shows the VM the same documents at the same times.

EventIds aside in that last comparison: the fresh platform makes its own, and a scenario
cannot name them (docs/record-replay.md). The flow is paced for the recorder, which polls
five times a second: after each step the test waits until the recorder has the VM's
document, and while the VM is inside an impact (frozen or rebooting, asking nothing) it moves
the clock on to the impact's end first, as a VM's held poll is answered then.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from e2e_support import ForewarnServer, clean_environment, start_forewarn

from forewarn.config.fleet import parse_fleet
from forewarn.scenario.client import ControlClient, connect
from forewarn.scenario.flows import FLOWS, flow_scenario
from forewarn.scenario.schema import Scenario, Step
from forewarn.scenario.steps import run_scenario
from forewarn.testing import MakePlatform
from forewarn.trace.format import load_trace
from forewarn.trace.to_scenario import convert

from .trace_support import date_of, documents_shown, replayed, scenario_of, without_ids

pytestmark = pytest.mark.e2e

FLEET = Path(__file__).resolve().parents[2] / "examples" / "flows" / "fleet.yaml"
HOSTS = ("127.0.60.1", "127.0.60.2", "127.0.61.1")
ADDRESS = {"vm0": "127.0.60.1", "spot0": "127.0.60.2", "web_0": "127.0.61.1"}
#: The deleting flows last: they take their VM away.
ORDER = sorted(FLOWS, key=lambda flow: flow.deletes_vm)
WAIT = 15.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForewarnServer]:
    workdir = tmp_path_factory.mktemp("flows-serve")
    # The recorder polls every 0.2 s of real time while the manual clock jumps days at once
    # (predicted failure: 7): the idle rule would count those days as silence.
    idle = ("--timing", "idle_period=30d")
    started = start_forewarn(
        workdir, fleet=FLEET.read_text(), vm_hosts=HOSTS, clock="manual", extra=idle
    )
    try:
        yield started
    finally:
        started.stop()
        started.process.assert_healthy()


class Recording:
    """A ``forewarn record`` process on one VM's address, and its trace."""

    def __init__(self, server: ForewarnServer, vm: str, out: Path) -> None:
        self.out = out
        argv = [sys.executable, "-m", "forewarn", "record", "--out", str(out)]
        argv += ["--endpoint", f"http://{ADDRESS[vm]}:{server.port}", "--interval", "0.2"]
        self.log = out.with_suffix(".log")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=clean_environment()
            )

    def incarnations(self) -> list[int]:
        if not self.out.exists():
            return []
        found = []
        for line in self.out.read_bytes().splitlines():
            record = json.loads(line) if line.endswith(b"}") else {}
            if record.get("kind") == "document":
                found.append(json.loads(record["body"])["DocumentIncarnation"])
        return found

    def wait_for(self, incarnation: int) -> None:
        deadline = time.monotonic() + WAIT
        while incarnation not in self.incarnations():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, (
                f"not recorded: {incarnation}\n{self.log.read_text()}"
            )
            time.sleep(0.02)

    def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(10) == 0, self.log.read_text()
        output = self.log.read_text()
        assert "Traceback" not in output, output
        return output


def paced(client: ControlClient, scenario: Scenario, vm: str, recording: Recording) -> list[Any]:
    """Run ``scenario``, letting the recorder see each document the VM can be shown; the
    documents (EventIds aside) the VM was shown while it could ask, in order."""
    shown: list[Any] = []

    def reachable() -> bool | None:
        listed = {entry["name"]: entry for entry in client.get("/vms")["vms"]}
        return None if vm not in listed else bool(listed[vm]["reachable"])

    def after(step: Step) -> None:
        following = scenario.steps[step.number] if step.number < len(scenario.steps) else None
        if reachable() is False and (following is None or following.kind == "wait"):
            for _ in range(30):  # held polls are answered when the impact is over
                client.post("/clock/advance", {"seconds": 1})
                if reachable() is not False:
                    break
        if reachable():
            document = client.get(f"/vms/{vm}/document")
            recording.wait_for(document["DocumentIncarnation"])
            if not shown or shown[-1] != without_ids(document):
                shown.append(without_ids(document))

    assert reachable()
    first = client.get(f"/vms/{vm}/document")
    recording.wait_for(first["DocumentIncarnation"])
    shown.append(without_ids(first))
    result = run_scenario(scenario, client, on_step=after)
    assert result.passed, result.failure and result.failure.render(scenario.source, 0)
    return shown


@pytest.mark.parametrize("flow", ORDER, ids=[flow.name for flow in ORDER])
def test_record_a_flow_then_replay_it_and_remake_it(
    flow: Any, server: ForewarnServer, tmp_path: Path, make_forewarn_platform: MakePlatform
) -> None:
    host, port = server.control_address.split(":")
    with connect(host, int(port)) as http:
        client = ControlClient(http)
        scenario = flow_scenario(client, flow.name)
        vm = scenario.name.rpartition(" on ")[2]
        recording = Recording(server, vm, tmp_path / f"{flow.name}.trace")
        try:
            shown = paced(client, scenario, vm, recording)
        finally:
            recording.stop()

    trace = load_trace(recording.out)
    assert trace.vm_name == vm
    documents = trace.documents
    # what the recorder wrote is what the VM was shown while it could ask
    assert [without_ids(d) for d in documents] == shown
    assert len(shown) >= (2 if flow.deletes_vm else 3)

    # replayed: the same bytes at the same moments
    with replayed(recording.out, trace) as replay:
        for document in documents:
            replay.move_to(document.at)
            answer = replay.get()
            assert answer.content == document.body.encode()
            assert answer.headers["ETag"] == document.headers["ETag"]

    # remade from the trace on a fresh platform: the same documents at the same times
    conversion = convert(trace, fleet_path="fleet.yaml")
    start: datetime = date_of(documents[0]) - timedelta(hours=1)  # serve --start, earlier
    fresh = make_forewarn_platform(fleet=parse_fleet(conversion.fleet, "fleet.yaml"), start=start)
    remade = documents_shown(fresh, scenario_of(conversion.scenario), conversion.vm)
    # on the platform's clock, which a manual one keeps apart from the recording machine's
    events_of = [(date_of(d), without_ids(d)[1]) for d in documents]
    assert [(at, events) for at, _, events in remade] == events_of
    assert "incarnation:" in conversion.scenario or "not checked" in conversion.scenario

"""The shipped trace, made from the documentation's own live-migration example
(learn.microsoft.com/azure/virtual-machines/scheduled-events-overview, "Example Event Flow":
DocumentIncarnation 1 to 4, one Freeze of WestNO_0 and WestNO_1), through the real commands:
``forewarn replay`` serves it, a ``forewarn record`` process records the replay and gets the
same documents byte for byte, and the scenario ``forewarn scenario from-trace`` makes of it
passes on a fresh ``forewarn serve``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from e2e_support import ServerProcess, clean_environment, free_port, start_forewarn, wait_for

from forewarn.trace.format import load_trace

from .trace_support import EXAMPLE

pytestmark = pytest.mark.e2e

#: The overview's four documents (the event's fields as it prints them).
FREEZE = {
    "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
    "EventStatus": "Scheduled",
    "EventType": "Freeze",
    "ResourceType": "VirtualMachine",
    "Resources": ["WestNO_0", "WestNO_1"],
    "NotBefore": "Mon, 20 Apr 2026 22:26:58 GMT",
    "Description": "Virtual machine is being paused because of a memory-preserving Live "
    "Migration operation.",
    "EventSource": "Platform",
    "DurationInSeconds": 5,
}
OVERVIEW_EXAMPLE = [
    {"DocumentIncarnation": 1, "Events": []},
    {"DocumentIncarnation": 2, "Events": [FREEZE]},
    {"DocumentIncarnation": 3, "Events": [{**FREEZE, "EventStatus": "Started", "NotBefore": ""}]},
    {"DocumentIncarnation": 4, "Events": []},
]


def test_the_shipped_trace_is_the_documentation_example() -> None:
    trace = load_trace(EXAMPLE)
    assert [json.loads(d.body) for d in trace.documents] == OVERVIEW_EXAMPLE
    assert trace.vm_name == "WestNO_0"


def test_replayed_then_recorded_then_remade_by_the_real_commands(tmp_path: Path) -> None:
    trace = load_trace(EXAMPLE)
    port, control = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    replay = ServerProcess(
        [sys.executable, "-m", "forewarn", "replay", str(EXAMPLE), "--manual",
         "--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}"],
        tmp_path / "replay.log",
    )  # fmt: skip
    clock = httpx.Client(
        base_url=f"http://127.0.0.1:{control}/api/v1",
        headers={"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"},
        trust_env=False,
    )
    out = tmp_path / "recorded.trace"
    try:
        wait_for(lambda: clock.get("/clock").status_code == 200, what="the replay", server=replay)
        # `until forewarn health` waits on a replay as on a serve (it used to wait for ever:
        # a replay had no /healthz).
        health = subprocess.run(
            [sys.executable, "-m", "forewarn", "health", "--control", f"127.0.0.1:{control}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert (health.returncode, health.stdout.strip()) == (0, "ready"), health.stderr
        record = subprocess.Popen(
            [sys.executable, "-m", "forewarn", "record", "--out", str(out), "--interval", "0.2",
             "--endpoint", f"http://127.0.0.1:{port}"],
            stderr=subprocess.PIPE,
            env=clean_environment(),
        )  # fmt: skip
        try:
            for document in trace.documents:
                assert clock.post("/clock/set", json={"now": document.at.isoformat()}).is_success
                deadline = time.monotonic() + 15
                while f'"ETag":"\\"{document.incarnation}\\""'.encode() not in _read(out):
                    assert record.poll() is None
                    assert time.monotonic() < deadline, _read(out)
                    time.sleep(0.02)
        finally:
            record.send_signal(signal.SIGTERM)
            _, stderr = record.communicate(timeout=10)
        assert record.returncode == 0, stderr
        assert b"stopped: interrupted" in stderr
        replay_status = clock.get("/replay").json()
        assert replay_status["shown"]["incarnation"] == 4
    finally:
        clock.close()
        replay.stop()
    replay.assert_healthy()

    recorded = load_trace(out)
    assert [d.body for d in recorded.documents] == [d.body for d in trace.documents]
    assert [d.headers["ETag"] for d in recorded.documents] == [
        d.headers["ETag"] for d in trace.documents
    ]
    assert recorded.vm_name == "WestNO_0", "the replayed VM's compute metadata"

    # remade by the scenario from-trace makes of it, on a fresh forewarn serve
    made = subprocess.run(
        [sys.executable, "-m", "forewarn", "scenario", "from-trace", str(EXAMPLE),
         "--fleet-out", str(tmp_path / "fleet.yaml")],
        capture_output=True, text=True, env=clean_environment(), check=True, timeout=60,
    )  # fmt: skip
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(made.stdout)
    server = start_forewarn(
        tmp_path,
        fleet=(tmp_path / "fleet.yaml").read_text(),
        vm_hosts=("127.0.70.1", "127.0.70.2"),
        extra=("--start", trace.start.at.isoformat()),
    )
    try:
        ran = subprocess.run(
            [sys.executable, "-m", "forewarn", "scenario", "run", str(scenario),
             "--control", server.control_address],
            capture_output=True, text=True, env=clean_environment(), timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout == f"{scenario}: all 9 steps passed\n"
        shown = httpx.get(server.url(host="127.0.70.1"), headers={"Metadata": "true"}).json()
        assert shown == {"DocumentIncarnation": 4, "Events": []}
    finally:
        server.stop()
    server.process.assert_healthy()


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""

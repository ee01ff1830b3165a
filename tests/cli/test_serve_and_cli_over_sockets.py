"""One real-socket tier: ``forewarn serve`` as a process, the CLI over TCP on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from forewarn.cli import main

from .cli_support import EXAMPLES, free_port

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}

pytestmark = pytest.mark.e2e


@pytest.fixture
def served() -> Iterator[str]:
    """``forewarn serve`` with the live-migration fleet, manual clock, fast profile."""
    port, control_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "forewarn", "serve",
            "--bind", f"127.0.0.1:{port}",
            "--control", f"127.0.0.1:{control_port}",
            "--fleet", str(EXAMPLES / "fleet-live-migration.yaml"),
            "--clock", "manual", "--profile", "fast", "--seed", "7",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    address = f"127.0.0.1:{control_port}"
    try:
        deadline = time.monotonic() + 20
        while True:  # a bounded wait for the process to come up
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                pytest.fail(f"forewarn serve exited with {process.returncode}: {output}")
            try:
                httpx.get(f"http://{address}/api/v1/clock", timeout=1.0, headers=AUTH)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    pytest.fail("forewarn serve did not answer within 20 s")
                time.sleep(0.05)
        yield address
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_cli_and_scenario_against_a_real_server(served: str) -> None:
    """scheduled-events-windows-2024.txt, "Example responses", run against ``forewarn serve``
    over TCP: the same scenario passes as in-process; the CLI reads the result back."""
    runner = CliRunner()
    listed = runner.invoke(main, ["vm", "list", "--control", served])
    assert listed.exit_code == 0, listed.output
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [
        "NAME",
        "WestNO_0",
        "WestNO_1",
    ]
    run = runner.invoke(
        main, ["scenario", "run", str(EXAMPLES / "live-migration.yaml")],
        env={"FOREWARN_CONTROL": served},
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert run.stdout.endswith("all 12 steps passed\n")
    clock = runner.invoke(main, ["clock", "show", "--control", served])
    assert "(ManualClock, profile fast" in clock.stdout
    again = runner.invoke(
        main, ["scenario", "run", str(EXAMPLES / "live-migration.yaml"), "--control", served]
    )
    assert again.exit_code == 1  # incarnations have moved on: the first expectation fails
    assert "step 1 of 12" in again.stderr
    assert "incarnation: expected 1, actual 4" in again.stderr


def test_scenario_refuses_another_timing_profile(served: str, tmp_path: Path) -> None:
    """SPEC.md section 4 [ours]: a scenario written for one profile says so and stops."""
    needs = tmp_path / "documented.yaml"
    needs.write_text("profile: documented\nsteps:\n  - advance: 1s\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["scenario", "run", str(needs), "--control", served])
    assert result.exit_code == 1
    assert (
        "before step 1 (requirements) failed: the scenario needs timing profile 'documented'"
        in (result.stderr)
    )

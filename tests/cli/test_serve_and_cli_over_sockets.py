"""One real-socket tier: ``forewarn serve`` as a process, the CLI over TCP on loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from e2e_support import start_forewarn, stopped_at_exit

from forewarn.cli import main

from .cli_support import EXAMPLES

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}

pytestmark = pytest.mark.e2e


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``forewarn serve`` with the live-migration fleet, manual clock, fast profile (started
    and stopped by e2e_support); the control API's address."""
    fleet = (EXAMPLES / "fleet-live-migration.yaml").read_text(encoding="utf-8")
    started = start_forewarn(tmp_path, fleet=fleet, seed=7, extra=("--profile", "fast"))
    with stopped_at_exit(started) as server:
        yield server.control_address


def test_cli_and_scenario_against_a_real_server(served: str) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses", run
    against ``forewarn serve`` over TCP: the same scenario passes as in-process; the CLI reads the
    result back."""
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
    """SPEC 4 [ours]: a scenario written for one profile says so and stops."""
    needs = tmp_path / "documented.yaml"
    needs.write_text("profile: documented\nsteps:\n  - advance: 1s\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["scenario", "run", str(needs), "--control", served])
    assert result.exit_code == 1
    assert (
        "before step 1 (requirements) failed: the scenario needs timing profile 'documented'"
        in (result.stderr)
    )

"""``forewarn init``: the example fleet, agent configuration and hooks for users who installed
the wheel and have no ``examples/`` (README "Quick start")."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from forewarn.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WRITTEN = [
    "fleet.yaml",
    "agent.yaml",
    "agent-local.yaml",
    "hooks/k8s-drain.sh",
    "hooks/lb-remove.sh",
]


def test_init_writes_the_examples_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in [*WRITTEN, "hooks/notify-webhook.sh"]:
        assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), name
    for hook in (tmp_path / "hooks").iterdir():
        assert os.access(hook, os.X_OK), hook
    assert f"forewarn serve --fleet {tmp_path / 'fleet.yaml'}" in result.output


def test_init_never_overwrites_without_force(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text("mine")
    refused = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert refused.exit_code == 1
    assert "fleet.yaml exist already" in refused.output
    assert (tmp_path / "fleet.yaml").read_text() == "mine"
    forced = CliRunner().invoke(main, ["init", str(tmp_path), "--force"])
    assert forced.exit_code == 0, forced.output
    assert (tmp_path / "fleet.yaml").read_bytes() == (EXAMPLES / "fleet.yaml").read_bytes()


def test_the_written_fleet_serves(tmp_path: Path) -> None:
    """What init writes is a fleet ``forewarn serve`` accepts."""
    from forewarn.config.fleet import load_fleet

    assert CliRunner().invoke(main, ["init", str(tmp_path)]).exit_code == 0
    assert [vm.name for vm in load_fleet(tmp_path / "fleet.yaml").vms]

"""``forewarn serve``'s control token as a user meets it (README "Security"): printed at start
in a link, written 0600 where the CLI finds it, required on every control call; and a control
API off loopback refused unless the user chose a token."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from e2e_support import banner_printed, free_port, run

pytestmark = pytest.mark.e2e


def _environment(runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FOREWARN_TOKEN"}
    env["FOREWARN_RUNTIME_DIR"] = str(runtime)
    return env


def test_the_cli_finds_the_token_serve_wrote_and_nobody_else_gets_in(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    env = _environment(runtime)
    port, control_port = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    control = f"127.0.0.1:{control_port}"
    argv = [sys.executable, "-m", "forewarn", "serve", "--bind", f"127.0.0.1:{port}"]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*argv, "--control", control, "--clock", "manual"], stdout=out, stderr=out, env=env
        )
    try:
        banner_printed(log, process, "control: http://")
        match = re.search(
            r"control: (http://\S+)/\?token=(\S+) \(the token is also in (\S+)\)", log.read_text()
        )
        assert match is not None, log.read_text()
        base, token, path = match.group(1), match.group(2), Path(match.group(3))
        assert path.read_text().strip() == token
        assert stat.S_IMODE(path.stat().st_mode) == 0o600

        refused = httpx.get(f"{base}/api/v1/vms")
        assert refused.status_code == 401
        allowed = httpx.get(f"{base}/api/v1/vms", headers={"Authorization": f"Bearer {token}"})
        assert allowed.status_code == 200

        listed = run(
            [sys.executable, "-m", "forewarn", "vm", "list", "--control", control, "-o", "json"],
            env=env,
        )
        assert listed.returncode == 0, listed.stderr
        assert "vm0" in listed.stdout
        stranger = run(
            [sys.executable, "-m", "forewarn", "vm", "list", "--control", control],
            env={**env, "FOREWARN_TOKEN": "guessed"},
        )
        assert stranger.returncode == 1
        assert "token" in stranger.stderr
    finally:
        process.terminate()
        process.wait(10)


def test_a_control_api_off_loopback_needs_a_chosen_token(tmp_path: Path) -> None:
    env = _environment(tmp_path / "runtime")
    argv = [sys.executable, "-m", "forewarn", "serve", "--control", "0.0.0.0:16999"]
    refused = run(argv, env=env)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "without a token" in lines[0]

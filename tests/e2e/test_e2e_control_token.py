"""``forewarn serve``'s control token as a user meets it (docs/security.md): printed at start
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
from e2e_support import free_port, run, start_up_lines

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
        match = re.search(
            r"control: (http://\S+)/\?token=(\S+) \(the token is also in (\S+)\)",
            start_up_lines(log, process),
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


def _serve_argv() -> list[str]:
    port, control = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    argv = [sys.executable, "-m", "forewarn", "serve", "--bind", f"127.0.0.1:{port}"]
    return [*argv, "--control", f"127.0.0.1:{control}", "--clock", "manual"]


def test_a_token_the_user_chose_is_never_printed(tmp_path: Path) -> None:
    """A token given with FOREWARN_TOKEN (a Kubernetes secret, a CI variable) must not be
    copied into the start-up lines, which pod and job logs keep: the line says where the CLI
    finds it instead. Only a token forewarn made up is printed in the link."""
    runtime = tmp_path / "runtime"
    chosen = "chosen-secret-token-" + "x" * 20
    log = tmp_path / "serve.log"
    argv = _serve_argv()
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=out, env={**_environment(runtime), "FOREWARN_TOKEN": chosen}
        )
    try:
        text = start_up_lines(log, process)
        assert chosen not in text
        match = re.search(
            r"control: (http://\S+)/\?token=<the token given with --token or "
            r"FOREWARN_TOKEN, not shown here; the CLI finds it in (\S+)>",
            text,
        )
        assert match is not None, text
        assert Path(match.group(2)).read_text().strip() == chosen
        answer = httpx.get(
            f"{match.group(1)}/api/v1/vms", headers={"Authorization": f"Bearer {chosen}"}
        )
        assert answer.status_code == 200
    finally:
        process.terminate()
        process.wait(10)


def test_a_link_planted_at_the_token_path_is_refused_and_never_followed(tmp_path: Path) -> None:
    """Someone who can write where the token file goes plants a symbolic link to a file of
    the user's: serve must neither write the token there nor change its mode; one line."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's own file\n")
    precious.chmod(0o644)
    argv = _serve_argv()
    control = argv[argv.index("--control") + 1]
    host, port = control.split(":")
    (runtime / f"control-{host}-{port}.token").symlink_to(precious)
    refused = run(argv, env=_environment(runtime), timeout=30)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line == (
        f"Error: refusing to write the control API's token to "
        f"{runtime / f'control-{host}-{port}.token'}: it is a symbolic link "
        "(forewarn never follows one there; remove it)"
    )
    assert precious.read_text() == "the user's own file\n"
    assert stat.S_IMODE(precious.stat().st_mode) == 0o644

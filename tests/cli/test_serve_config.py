"""``forewarn serve``'s configuration like the agent's (docs/serve.md, "`forewarn serve` options"):
every option from a ``--config`` file, the environment (``FOREWARN_SERVE_<OPTION>``) and
flags, in that order of strength, shown by ``--print-config``; and its log."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml
from click.testing import CliRunner
from e2e_support import free_port, json_lines

from forewarn.cli import main

LOOPBACK = ["127.0.0.1"]


def _printed(args: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    result = CliRunner().invoke(main, ["serve", *args, "--print-config"], env=env)
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert isinstance(printed, dict)
    return printed


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("rate-limit: 12\nclock: manual\nscale: 2\nimpact: Reboot=drop\n")
    from_file = _printed(["--config", str(config)])
    assert (from_file["rate-limit"], from_file["clock"], from_file["scale"]) == (
        12.0,
        "manual",
        2.0,
    )
    assert from_file["impact"] == ["Reboot=drop"]
    env = {"FOREWARN_SERVE_RATE_LIMIT": "20", "FOREWARN_SERVE_SCALE": "3"}
    from_env = _printed(["--config", str(config)], env)
    assert (from_env["rate-limit"], from_env["scale"], from_env["clock"]) == (20.0, 3.0, "manual")
    from_flag = _printed(["--config", str(config), "--rate-limit", "30"], env)
    assert from_flag["rate-limit"] == 30.0
    assert _printed([])["rate-limit"] == 5.0  # the documented default


def test_a_bad_config_file_says_what_and_where(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("rate-limits: 12\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 2
    assert "unknown option 'rate-limits'" in result.output
    assert "rate-limit" in result.output
    config.write_text("rate-limit: many\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--print-config"])
    assert result.exit_code == 2
    assert "many" in result.output


def test_the_token_is_never_printed() -> None:
    printed = _printed(["--token", "s3cret"])
    assert printed["token"] == "(set)"


CLI = [sys.executable, "-m", "forewarn"]


def test_operations_and_changes_at_info_and_requests_at_debug(tmp_path: Path) -> None:
    port, control = free_port(LOOPBACK), free_port(LOOPBACK)
    argv = [sys.executable, "-m", "forewarn", "serve", "--clock", "manual", "--log-format", "json"]
    argv += ["--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}"]
    errors = tmp_path / "stderr.log"

    def lines() -> list[dict[str, object]]:
        return json_lines(errors)

    for level, expect_requests in (("debug", True), ("info", False)):
        with errors.open("wb") as out:
            process = subprocess.Popen(
                [*argv, "--log-level", level], stdout=subprocess.DEVNULL, stderr=out
            )
        try:
            up = False
            deadline = time.monotonic() + 20
            while not up:
                assert process.poll() is None, errors.read_text()
                assert time.monotonic() < deadline
                try:
                    httpx.get(f"http://127.0.0.1:{port}/")
                    up = True
                except httpx.TransportError:
                    time.sleep(0.1)
            document = f"http://127.0.0.1:{port}/metadata/scheduledevents?api-version=2020-07-01"
            assert httpx.get(document, headers={"Metadata": "true"}).status_code == 200
            restart = subprocess.run(
                [*CLI, "vm", "restart", "--name", "vm0", "--control", f"127.0.0.1:{control}"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert restart.returncode == 0, restart.stderr
            deadline = time.monotonic() + 10
            while not any(line["logger"] == "forewarn.events" for line in lines()):
                assert time.monotonic() < deadline, errors.read_text()
                time.sleep(0.1)
        finally:
            process.terminate()
            process.wait(10)
        logged = lines()
        assert {"logger": "forewarn.operations", "message": "restart", "vm": "vm0"}.items() <= next(
            line for line in logged if line["logger"] == "forewarn.operations"
        ).items()
        event = next(line for line in logged if line["logger"] == "forewarn.events")
        assert (event["message"], event["type"]) == ("event Scheduled", "Reboot")
        requests = [line for line in logged if line["logger"] == "forewarn.requests"]
        assert bool(requests) is expect_requests, level

"""A failure tells the user what to do, in one line (the project's standards: "A start-up
failure is one clear line and a non-zero exit, never a traceback").

Each message below was met by a newcomer in its earlier form, which said what failed but not
what to do: "Event Grid's state in PostgreSQL: connection failed" and libpq's two lines;
``('127.0.0.1', 16954): address already in use``, a Python tuple; ``--port`` answered with "did
you mean --start, --store?"; "Connection refused" (``[Errno 111] Connection refused`` from
``forewarn health``); a stale ``FOREWARN_TOKEN`` given the same 401 as no token; "use another
data directory" for a PostgreSQL namespace; a profile mismatch with no remedy;
``FOREWARN_SERVE_PROFILE=slow`` reported as ``--profile``; a fleet's typo in pydantic's words
(an agent configuration's too, and a misspelt required field said twice); a missing
``--tls-key`` reported as the certificate.
Messages produced at start-up are read from real ``forewarn serve`` processes.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trustme
from click.testing import CliRunner
from e2e_support import clean_environment, free_port, start_up_lines
from postgres_support import require_postgres

from forewarn.cli import main

LOOPBACK = ["127.0.0.1"]


def _forewarn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {
        key: value
        for key, value in clean_environment().items()
        if not key.startswith("FOREWARN_") or key == "FOREWARN_RUNTIME_DIR"
    }
    return subprocess.run(
        [sys.executable, "-m", "forewarn", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environ, **(env or {})},
        check=False,
    )


def _error_line(ran: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The one ``Error:`` line a refused command printed, its exit status checked."""
    assert ran.returncode == code, (ran.returncode, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, ran.stderr
    if code == 1:
        assert ran.stderr == errors[0] + "\n", ran.stderr
    return errors[0]


def _addresses() -> list[str]:
    return [
        "--bind",
        f"127.0.0.1:{free_port(LOOPBACK)}",
        "--control",
        f"127.0.0.1:{free_port(LOOPBACK)}",
    ]


@pytest.fixture
def runtime(tmp_path: Path) -> dict[str, str]:
    """Token files of the test's own."""
    return {"FOREWARN_RUNTIME_DIR": str(tmp_path / "runtime")}


@pytest.mark.parametrize("given", ["--store", "FOREWARN_STORE"])
def test_a_postgresql_that_cannot_be_reached_says_which_store_and_what_to_check(
    runtime: dict[str, str], given: str
) -> None:
    port = free_port(LOOPBACK)  # nothing listens there
    url = f"postgresql://postgres:s3cret@127.0.0.1:{port}/test?namespace=fleet"
    args, env = (["--store", url], runtime) if given == "--store" else ([], {**runtime, given: url})
    line = _error_line(_forewarn("serve", *args, *_addresses(), env=env))
    assert line == (
        f"Error: cannot reach the store postgresql://postgres@127.0.0.1:{port}/test"
        "?namespace=fleet: Connection refused; is PostgreSQL running? check "
        "--store/FOREWARN_STORE"
    )
    assert "s3cret" not in line
    checked = _forewarn("store", "check", "--store", url)
    assert _error_line(checked) == line


def test_an_address_in_use_says_which_option_moves_it(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        free = free_port(LOOPBACK)
        vm_facing = _forewarn(
            "serve", "--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{free}", env=runtime
        )
        assert _error_line(vm_facing) == (
            f"Error: the VM-facing endpoint cannot listen on 127.0.0.1:{port}: Address already "
            "in use; pass --bind HOST:PORT"
        )
        data = tmp_path / "data"
        control = _forewarn(
            "serve",
            "--bind",
            f"127.0.0.1:{free}",
            "--control",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(data),
            env=runtime,
        )
        assert _error_line(control) == (
            f"Error: the control API cannot listen on 127.0.0.1:{port}: Address already in "
            "use; pass --control HOST:PORT"
        )
        # The control address is claimed before anything else: no store was made.
        assert not data.exists()
        replayed = _forewarn(
            "replay",
            str(_example_trace()),
            "--bind",
            f"127.0.0.1:{port}",
            "--control",
            f"127.0.0.1:{free}",
            env=runtime,
        )
        assert _error_line(replayed) == (
            f"Error: the VM-facing endpoint cannot listen on 127.0.0.1:{port}: Address already "
            "in use; pass --bind HOST:PORT"
        )


def _example_trace() -> Path:
    return Path(__file__).resolve().parents[2] / "examples" / "traces" / "live-migration.trace"


def test_port_is_answered_with_bind() -> None:
    assert _error_line(_forewarn("serve", "--port", "8080"), code=2) == (
        "Error: No such option '--port': the port goes with the host, as --bind HOST:PORT "
        "(e.g. --bind 127.0.0.1:8080)"
    )
    assert _error_line(_forewarn("events", "list", "--port", "16955"), code=2) == (
        "Error: No such option '--port': the port goes with the host, as --control "
        "HOST:PORT (e.g. --control 127.0.0.1:8080)"
    )


def test_a_bad_value_from_the_environment_names_the_variable() -> None:
    ran = _forewarn("serve", env={"FOREWARN_SERVE_PROFILE": "slow"})
    assert _error_line(ran, code=2) == (
        "Error: Invalid value for '--profile' (from FOREWARN_SERVE_PROFILE): 'slow' is not "
        "one of 'dev', 'documented', 'fast'."
    )
    typed = _forewarn("serve", "--profile", "slow")
    assert _error_line(typed, code=2) == (
        "Error: Invalid value for '--profile': 'slow' is not one of 'dev', 'documented', 'fast'."
    )


def test_nothing_at_the_control_address_asks_whether_serve_runs_there() -> None:
    port = free_port(LOOPBACK)
    result = CliRunner().invoke(main, ["events", "list", "--control", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: cannot reach the control API at http://127.0.0.1:{port}/api/v1: Connection "
        f"refused; is forewarn serve running at 127.0.0.1:{port}? see --control (or "
        "FOREWARN_CONTROL)\n"
    )


def test_a_health_check_with_nothing_there_says_what_to_check() -> None:
    """``until forewarn health; do sleep 1; done`` (README, "Container or CI") prints this
    line at each try until the server listens: the same words as any command's, not
    ``[Errno 111]``."""
    port = free_port(LOOPBACK)
    result = CliRunner().invoke(main, ["health", "--control", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: no answer from 127.0.0.1:{port}: Connection refused; is forewarn serve "
        f"running at 127.0.0.1:{port}? see --control (or FOREWARN_CONTROL)\n"
    )


def test_a_vm_facing_endpoint_with_nothing_there_is_said_without_the_errno() -> None:
    """The SDK's words (docs/client.md: ``ImdsConnectionError``), which ``events get`` and
    the agent's log show: the system's reason, not Python's ``[Errno 111]`` before it."""
    port = free_port(LOOPBACK)
    result = CliRunner().invoke(
        main, ["events", "get", "--endpoint", f"127.0.0.1:{port}", "--retries", "0"]
    )
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: http://127.0.0.1:{port}: no answer from http://127.0.0.1:{port}"
        "/metadata/scheduledevents: Connection refused\n"
    )


def test_a_namespace_of_another_fleet_says_namespace(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    """docs/scale-out.md: a namespace is one fleet; a fleet file of another is refused."""
    postgres = require_postgres()
    namespace = f"msg_{uuid.uuid4().hex[:12]}"
    url = f"{postgres}?namespace={namespace}"
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("vms:\n  - name: a1\n")
    second.write_text("vms:\n  - name: b1\n")
    _started_once(tmp_path, ["--store", url, "--fleet", str(first)], runtime)
    try:
        line = _error_line(
            _forewarn("serve", "--store", url, "--fleet", str(second), *_addresses(), env=runtime)
        )
        shown = url.removeprefix("postgresql://postgres@")
        assert line == (
            f"Error: {shown} holds the state of another fleet ({first}); start it with that "
            "fleet file, or use another namespace (--store ...?namespace=NAME)"
        )
        profile = _forewarn(
            "serve", "--store", url, "--profile", "fast", *_addresses(), env=runtime
        )
        assert _error_line(profile) == (
            f"Error: {shown} was created with profile documented, not fast: leave out "
            "--profile (the store keeps its own), or use another namespace "
            "(--store ...?namespace=NAME)"
        )
    finally:
        _drop_namespace(postgres, namespace)


def _drop_namespace(postgres: str, namespace: str) -> None:
    """Forget the namespace, and Event Grid's schema beside it, as ``forewarn store delete``
    does."""
    ran = _forewarn("store", "delete", "--store", f"{postgres}?namespace={namespace}", "--yes")
    assert ran.returncode == 0, ran.stderr


def _started_once(tmp_path: Path, args: list[str], runtime: dict[str, str]) -> None:
    """``forewarn serve ARGS`` up (its store made) and stopped."""
    log = tmp_path / "once.log"
    environ = {**clean_environment(), **runtime}
    environ = {k: v for k, v in environ.items() if k not in ("FOREWARN_STORE", "FOREWARN_TOKEN")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "forewarn", "serve", *args, *_addresses()],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
        )
    try:
        start_up_lines(log, process)
    finally:
        process.terminate()
        process.wait(30)


def test_a_data_directory_of_another_profile_gives_the_remedy(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    data = tmp_path / "data"
    _started_once(tmp_path, ["--data-dir", str(data), "--seed", "7"], runtime)
    sqlite = f"sqlite:///{(data / 'forewarn.sqlite3').resolve()}"
    profile = _forewarn(
        "serve", "--data-dir", str(data), "--profile", "fast", *_addresses(), env=runtime
    )
    assert _error_line(profile) == (
        f"Error: {sqlite} was created with profile documented, not fast: leave out --profile "
        "(the store keeps its own), or use another data directory (--data-dir)"
    )
    seed = _forewarn("serve", "--data-dir", str(data), "--seed", "8", *_addresses(), env=runtime)
    assert _error_line(seed) == (
        f"Error: {sqlite} was created with seed 7, not 8: leave out --seed (the store keeps "
        "its own), or use another data directory (--data-dir)"
    )


def test_a_fleet_typo_is_an_unknown_field_with_the_nearest_one(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("vms:\n  - name: web0\n    adress: 127.0.0.2\n")
    ran = _forewarn("serve", "--fleet", str(fleet), *_addresses(), env=runtime)
    assert _error_line(ran) == (
        f"Error: {fleet}: vms.0: unknown field 'adress' (did you mean 'address'?)"
    )


def test_a_misspelt_required_field_is_said_once_as_the_typo(tmp_path: Path) -> None:
    """pydantic refuses ``step:`` for ``steps:`` twice, "steps: Field required" first: the
    typo's line says both."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("name: x\nstep:\n  - advance: 1s\n")
    ran = _forewarn("scenario", "run", "--in-process", str(scenario))
    assert _error_line(ran) == f"Error: {scenario}: unknown field 'step' (did you mean 'steps'?)"


def test_an_agent_configuration_typo_reads_as_a_fleets_does(tmp_path: Path) -> None:
    """The agent's configuration file (docs/agent.md) in the fleet's words, not pydantic's
    "Extra inputs are not permitted"; every other refusal still listed, one a line."""
    config = tmp_path / "agent.yaml"
    config.write_text("pol_interval: 1\npolicies:\n  - {name: x, action: reboot-now}\n")
    ran = _forewarn("agent", "--config", str(config), "--dry-run")
    assert (ran.returncode, "Traceback" in ran.stderr) == (1, False), ran.stderr
    assert ran.stderr.splitlines() == [
        f"Error: {config}: invalid agent configuration",
        "  policies.0.action: Input should be 'approve', 'prepare-then-approve' or 'observe'",
        "  unknown field 'pol_interval' (did you mean 'poll_interval'?)",
    ]


def test_a_missing_tls_key_is_named_as_the_key(tmp_path: Path, runtime: dict[str, str]) -> None:
    """issue text: a missing ``--tls-key`` was reported as the certificate."""
    certificate = trustme.CA().issue_cert("127.0.0.1")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    certificate.cert_chain_pems[0].write_to_path(str(cert))
    certificate.private_key_pem.write_to_path(str(key))
    tls = ["--control-tls", f"127.0.0.1:{free_port(LOOPBACK)}", "--tls-cert", str(cert)]
    missing = tmp_path / "missing.key"
    ran = _forewarn("serve", *tls, "--tls-key", str(missing), *_addresses(), env=runtime)
    assert _error_line(ran) == (
        f"Error: cannot read the TLS key {missing}: No such file or directory; check --tls-key"
    )
    gone = tmp_path / "gone.pem"
    ran = _forewarn("serve", *tls[:3], str(gone), "--tls-key", str(key), *_addresses(), env=runtime)
    assert _error_line(ran) == (
        f"Error: cannot read the TLS certificate {gone}: No such file or directory; check "
        "--tls-cert"
    )

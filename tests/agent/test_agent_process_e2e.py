"""``forewarn agent --config examples/agent.yaml`` as a process against ``forewarn serve``.

The issue's definition of done: the agent "drains, approves and recovers through a restart,
an eviction and a live migration, with logs and metrics to show it". The example hooks run
unchanged; ``kubectl`` is a stand-in on PATH that writes down how it was called. Platform
time moves only through the control API's manual clock; the waits below poll for the agent
(a separate process) to catch up, bounded in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from e2e_support import ServerProcess, free_port, json_lines, start_forewarn, stopped_at_exit

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent.yaml"
WAIT_SECONDS = 20.0

FLEET = "vms:\n  - {name: vm0, host: h0, priority: Spot}\n"


def wait_for(what: str, check: Callable[[], bool], process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        if process.poll() is not None:
            pytest.fail(f"{what}: the process exited with {process.returncode}")
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        raise


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[str, httpx.Client, ServerProcess]]:
    """``forewarn serve`` on the fleet above (e2e_support, stopped at teardown); the VM's
    endpoint URL, the control API's client and the process."""
    started = start_forewarn(
        tmp_path, fleet=FLEET, rate_limit=100, seed=1, extra=("--timing", "first_call_delay=0")
    )
    with stopped_at_exit(started) as server:
        yield server.base_url(), server.control, server.process


def test_drains_approves_and_recovers_through_restart_migration_and_eviction(
    serve: tuple[str, httpx.Client, ServerProcess], tmp_path: Path
) -> None:
    endpoint, control, _ = serve
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl_log = tmp_path / "kubectl.log"
    (bin_dir / "kubectl").write_text(f'#!/bin/sh\necho "$@" >> {kubectl_log}\n')
    (bin_dir / "kubectl").chmod(0o755)
    marker = tmp_path / "out-of-rotation"
    metrics_port = free_port(["127.0.0.1"])
    log_path = tmp_path / "agent.log"
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "FOREWARN_K8S_NODE": "node-0",
        "FOREWARN_LB_MARKER": str(marker),
        "FOREWARN_AGENT_POLL_INTERVAL": "0.05",  # environment over the file's 1 s
    }
    environ.pop("FOREWARN_WEBHOOK_URL", None)
    command = [
        sys.executable, "-m", "forewarn", "agent", "--config", str(EXAMPLE),
        "--endpoint", endpoint, "--state-dir", str(tmp_path / "state"),
        "--metrics-address", f"127.0.0.1:{metrics_port}",
    ]  # fmt: skip
    with log_path.open("wb") as agent_log:
        agent = subprocess.Popen(command, env=environ, stdout=subprocess.DEVNULL, stderr=agent_log)
    metrics = httpx.Client(base_url=f"http://127.0.0.1:{metrics_port}", trust_env=False)

    def logs() -> list[dict[str, object]]:
        return json_lines(log_path)

    def kubectl() -> list[str]:
        return kubectl_log.read_text().splitlines() if kubectl_log.exists() else []

    def approved(event_id: str) -> bool:
        events = control.get("/events").json()["events"]
        return any(e["EventId"] == event_id and e["approvedBy"] for e in events)

    def gone(event_id: str) -> bool:
        return all(e["EventId"] != event_id for e in control.get("/events").json()["events"])

    def healthy() -> bool:
        try:
            return (
                metrics.get("/healthz").status_code == 200
                and "forewarn_agent_polls_total 0.0" not in metrics.get("/metrics").text
            )
        except httpx.TransportError:
            return False

    def hook_ran(event_id: str, hook: str, count: int = 1) -> Callable[[], bool]:
        return lambda: (
            sum(
                1
                for r in logs()
                if r["msg"] == "hook ran"
                and r.get("event_id") == event_id
                and r.get("hook") == hook
            )
            >= count
        )

    try:
        wait_for("the agent's first poll", healthy, agent)

        # 1. A restart: Reboot, User -> cordon, drain, approve; Started; removed -> uncordon.
        reboot = control.post("/vms/vm0/restart").json()["events"][0]["EventId"]
        wait_for("the reboot's approval", lambda: approved(reboot), agent)
        assert kubectl() == [
            "cordon node-0",
            "drain node-0 --ignore-daemonsets --delete-emptydir-data --timeout=5m",
        ]
        assert marker.exists()
        control.post("/clock/advance", json={"seconds": 8})
        wait_for("the reboot's started hook", hook_ran(reboot, "started"), agent)
        control.post("/clock/advance", json={"seconds": 600})
        assert gone(reboot)
        wait_for("the uncordon", lambda: "uncordon node-0" in kubectl(), agent)
        wait_for("the reboot's recovery", hook_ran(reboot, "recover", 3), agent)
        assert not marker.exists()

        # 2. A live migration: a 5 s Freeze is approved at once, without draining.
        freeze = control.post("/hosts/h0/live-migrate").json()["events"][0]["EventId"]
        wait_for("the freeze's approval", lambda: approved(freeze), agent)
        assert kubectl()[-1] == "uncordon node-0"  # no new drain
        control.post("/clock/advance", json={"seconds": 8})
        wait_for("the freeze's started hook", hook_ran(freeze, "started"), agent)
        control.post("/clock/advance", json={"seconds": 600})
        wait_for("the freeze's recovery", hook_ran(freeze, "recover", 3), agent)

        # 3. An eviction: Preempt, 30 s -> drain, approve; the Spot VM is then deleted.
        drains = sum(1 for line in kubectl() if line.startswith("drain"))
        evict = control.post("/vms/vm0/simulate-eviction").json()["events"][0]["EventId"]
        wait_for("the eviction's approval", lambda: approved(evict), agent)
        assert sum(1 for line in kubectl() if line.startswith("drain")) == drains + 1

        # The agent counts an approval once its POST is answered, after the server has it.
        wait_for(
            "the third approval counted",
            lambda: (
                'forewarn_agent_approvals_total{outcome="ok"} 3.0' in metrics.get("/metrics").text
            ),
            agent,
        )
        text = metrics.get("/metrics").text
        assert 'forewarn_agent_events_seen_total{source="User",type="Reboot"} 1.0' in text
        assert 'forewarn_agent_hook_duration_seconds_count{hook="prepare"}' in text
        control.post("/clock/advance", json={"seconds": 40})
        wait_for(
            "a poll error once the VM is gone",
            lambda: "forewarn_agent_poll_errors_total{kind=" in metrics.get("/metrics").text,
            agent,
        )
        messages = [r["msg"] for r in logs()]
        assert messages.count("approved") == 3
        assert (
            "prepare failed: this VM will not approve; the event starts at NotBefore"
            not in messages
        )
    finally:
        metrics.close()
        code = stop(agent)
    assert code == 0
    assert [r["msg"] for r in logs()][-1] == "agent stopped"


LOCAL_EXAMPLE = ROOT / "examples" / "agent-local.yaml"


def test_the_local_example_is_safe_as_it_is() -> None:
    """Seen by a newcomer: the example the README ran "beside forewarn serve" polled the real
    169.254.169.254, needed port 9464 and /var/lib, and its hooks ran kubectl against the
    current context and wrote under /run. The local one talks to the local serve only, keeps
    its state beside itself, opens no port, and its hooks only print; the production one says
    it is the production one."""
    from forewarn.agent import load_config
    from forewarn.defaults import DEFAULT_HOST, DEFAULT_PORT

    config = load_config(LOCAL_EXAMPLE, environ={})
    assert config.endpoint == f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
    assert config.state_dir.is_relative_to(LOCAL_EXAMPLE.parent)
    assert config.metrics_address is None
    moments = (config.hooks.prepare, config.hooks.started, config.hooks.recover)
    commands = [hook.command for moment in moments for hook in moment]
    assert commands
    assert all(isinstance(c, str) and c.startswith("echo ") for c in commands), commands
    production = EXAMPLE.read_text()
    assert production.startswith("# PRODUCTION EXAMPLE: for a real Azure VM.")
    assert "agent-local.yaml" in production


def test_the_local_example_drains_and_approves_beside_serve(
    serve: tuple[str, httpx.Client, ServerProcess], tmp_path: Path
) -> None:
    """The local example run as it is, a copy in a directory of its own (its state goes
    beside it); only its endpoint is pointed at this test's serve, which is not on the
    default port. A restart is prepared for (its hook prints) and approved."""
    endpoint, control, _ = serve
    config = tmp_path / "agent-local.yaml"
    config.write_bytes(LOCAL_EXAMPLE.read_bytes())
    log_path = tmp_path / "agent.log"
    command = [sys.executable, "-m", "forewarn", "agent", "--config", str(config)]
    with log_path.open("wb") as agent_log:
        agent = subprocess.Popen(
            [*command, "--endpoint", endpoint], stdout=subprocess.DEVNULL, stderr=agent_log
        )

    def logs() -> list[dict[str, object]]:
        return json_lines(log_path)

    try:
        wait_for("its name", lambda: any(r["msg"] == "this VM" for r in logs()), agent)
        reboot = control.post("/vms/vm0/restart").json()["events"][0]["EventId"]
        wait_for(
            "the approval",
            lambda: any(r["msg"] == "approved" and r.get("event_id") == reboot for r in logs()),
            agent,
        )
        prepared = [r for r in logs() if r["msg"] == "hook ran" and r.get("hook") == "prepare"]
        assert f"prepare: would drain vm0 for Reboot {reboot}" in str(prepared[0]["output"])
        assert (tmp_path / ".forewarn-agent-state").is_dir()
    finally:
        code = stop(agent)
    assert code == 0

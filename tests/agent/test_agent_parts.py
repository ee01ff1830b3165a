"""The agent's parts on their own: configuration, policies, leader election, store, hooks,
metrics and health."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from forewarn.agent import (
    AgentConfig,
    AgentConfigError,
    HandledStore,
    Outcome,
    Policy,
    Step,
    build_agent,
    leader,
    load_config,
)
from forewarn.agent.config import DOCUMENTED_SAMPLE_POLICY, HookSpec
from forewarn.agent.hooks import HookOutcome, HookRunner, Moment
from forewarn.agent.metrics import AgentMetrics, Health, MetricsServer
from forewarn.cli import main
from forewarn.client import ScheduledEvent, parse_document

from .agent_support import FakeTime

AT = datetime(2024, 1, 1, tzinfo=UTC)


def event(**fields: object) -> ScheduledEvent:
    raw: dict[str, object] = {
        "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
        "EventStatus": "Scheduled",
        "EventType": "Freeze",
        "ResourceType": "VirtualMachine",
        "Resources": ["WestNO_0", "WestNO_1"],
        "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
        "Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
        "EventSource": "Platform",
        "DurationInSeconds": 5,
    }
    raw.update(fields)
    version = "2017-03-01" if str(raw["Resources"]).startswith("['_") else "2020-07-01"
    return parse_document({"DocumentIncarnation": 2, "Events": [raw]}, version).events[0]


# -- policies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "action", "rule"),
    [
        ({"EventSource": "User", "EventType": "Reboot"}, "approve", "approve-user-events"),
        ({"EventSource": "User", "EventType": "Redeploy"}, "approve", "approve-user-events"),
        ({"DurationInSeconds": 0}, "approve", "approve-short-freeze"),
        ({"DurationInSeconds": 8}, "approve", "approve-short-freeze"),
        ({"DurationInSeconds": 9}, "observe", "log-the-rest"),
        ({"DurationInSeconds": -1}, "observe", "log-the-rest"),
        ({"EventType": "Reboot"}, "observe", "log-the-rest"),
        ({"EventType": "Preempt", "DurationInSeconds": 5}, "observe", "log-the-rest"),
    ],
)
def test_the_default_policy_is_the_documented_sample(
    fields: dict[str, object], action: str, rule: str
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample":
    "Approve all user initiated events"; "freeze events less that 9 seconds are considered no
    impact. This will immediately approve them" (``DurationInSeconds >= 0 and < 9``); everything
    else is logged."""
    decision = Policy.from_specs(DOCUMENTED_SAMPLE_POLICY).decide(event(**fields), "WestNO_0")
    assert (decision.action.value, decision.rule) == (action, rule)


def test_rules_are_ordered_and_match_resources(tmp_path: Path) -> None:
    """SPEC 5: "``Resources`` still lists only the impacted VMs; readers check it"."""
    path = tmp_path / "agent.yaml"
    path.write_text(
        "policies:\n"
        "  - {name: bystander, match: {in_resources: false}, action: observe}\n"
        "  - {name: long, match: {duration_at_least: 9, type: [Freeze, Reboot]}, action: prepare-then-approve}\n"
        "  - {name: rest, action: approve}\n"
    )
    policy = Policy.from_specs(load_config(path, environ={}).policies)
    assert policy.decide(event(), "other").rule == "bystander"
    assert policy.decide(event(DurationInSeconds=30), "WestNO_1").rule == "long"
    assert policy.decide(event(), "WestNO_1").rule == "rest"


def test_leader_election() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "elect
    a leader ... which might be as simple as the first machine in the Resources field"."""
    shown = event(Resources=["WestNO_1", "WestNO_0"])
    assert leader(shown, "first-by-name") == "WestNO_0"
    assert leader(shown, "first-listed") == "WestNO_1"
    assert leader(shown, "every-vm") is None
    # SPEC 2: 2017-03-01 prefixes IaaS VM names with "_".
    assert leader(event(Resources=["_WestNO_1", "_WestNO_0"]), "first-by-name") == "WestNO_0"


# -- configuration -----------------------------------------------------------------------------


def test_precedence_file_then_environment_then_flags(tmp_path: Path) -> None:
    """SPEC-free, ``docs/agent.md``: defaults < file < environment < flags."""
    path = tmp_path / "agent.yaml"
    path.write_text("poll_interval: 2\nvm_name: from-file\nstate_dir: state\nhook_workers: 2\n")
    environ = {"FOREWARN_AGENT_VM_NAME": "from-env", "FOREWARN_AGENT_HOOK_WORKERS": "3"}
    config = load_config(path, environ=environ, flags={"hook_workers": 7, "dry_run": None})
    assert config.poll_interval == 2.0  # file over default
    assert config.vm_name == "from-env"  # environment over file
    assert config.hook_workers == 7  # flag over environment
    assert config.dry_run is False  # a flag not given overrides nothing
    assert config.state_dir == tmp_path / "state"  # relative to the file
    assert config.policies == DOCUMENTED_SAMPLE_POLICY


def test_errors_name_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("poll_interval: -1\npolicies:\n  - {name: x, action: reboot-now}\n")
    with pytest.raises(AgentConfigError) as caught:
        load_config(path, environ={})
    message = str(caught.value)
    assert str(path) in message
    assert "poll_interval" in message
    assert "policies.0.action" in message
    path.write_text("pol_interval: 1\n")
    with pytest.raises(AgentConfigError, match="pol_interval"):
        load_config(path, environ={})
    with pytest.raises(AgentConfigError, match=r"FOREWARN|poll_interval"):
        load_config(None, environ={"FOREWARN_AGENT_POLL_INTERVAL": "soon"})


def test_print_config_shows_the_effective_values(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("poll_interval: 2\nmetrics_address: 127.0.0.1:9999\n")
    result = CliRunner().invoke(
        main,
        ["agent", "--config", str(path), "--vm-name", "flagged", "--print-config"],
        env={"FOREWARN_AGENT_POLL_INTERVAL": "0.5"},
    )
    assert result.exit_code == 0, result.output
    assert "poll_interval: 0.5\n" in result.output
    assert "vm_name: flagged\n" in result.output
    assert "metrics_address: 127.0.0.1:9999\n" in result.output
    assert "name: approve-short-freeze" in result.output
    bad = CliRunner().invoke(main, ["agent", "--config", str(tmp_path / "missing.yaml")])
    assert bad.exit_code != 0
    assert "cannot read" in bad.output


# -- store -------------------------------------------------------------------------------------


def test_store_survives_reopening(tmp_path: Path) -> None:
    store = HandledStore.in_directory(tmp_path / "state")
    store.record("c7061bac-afdc-4513-b24b-aa5f13a16123", Step.DECIDED, Outcome.OK, AT, "{}")
    store.record("C7061BAC-AFDC-4513-B24B-AA5F13A16123", Step.PREPARED, Outcome.OK, AT)
    store.record("00000000-0000-0000-0000-000000000001", Step.DECIDED, Outcome.SKIPPED, AT)
    store.close()
    again = HandledStore.in_directory(tmp_path / "state")
    try:
        steps = again.steps("C7061BAC-AFDC-4513-B24B-AA5F13A16123")
        assert set(steps) == {Step.DECIDED, Step.PREPARED}
        assert again.unrecovered() == ["C7061BAC-AFDC-4513-B24B-AA5F13A16123"]
        again.record("C7061BAC-AFDC-4513-B24B-AA5F13A16123", Step.RECOVERED, Outcome.OK, AT)
        assert again.unrecovered() == []
        assert again.forget_before(datetime(2025, 1, 1, tzinfo=UTC)) == 3
        assert again.steps("C7061BAC-AFDC-4513-B24B-AA5F13A16123") == {}
    finally:
        again.close()


# -- hooks -------------------------------------------------------------------------------------


def run_hook(
    tmp_path: Path, command: str | tuple[str, ...], timeout: float = 10, limit: int = 4096
) -> HookOutcome:
    runner = HookRunner(
        {Moment.PREPARE: (HookSpec(command=command, timeout=timeout),)},
        cwd=tmp_path,
        output_limit=limit,
        environ={"PATH": "/usr/bin:/bin"},
    )
    return runner.run(Moment.PREPARE, event(), "WestNO_0")


def test_a_hook_sees_the_event_in_its_environment_and_on_stdin(tmp_path: Path) -> None:
    outcome = run_hook(tmp_path, "env | grep ^FOREWARN_ | sort > env.txt; cat > stdin.json")
    assert outcome.ok
    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines())
    assert env == {
        "FOREWARN_EVENT_ID": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
        "FOREWARN_EVENT_TYPE": "Freeze",
        "FOREWARN_EVENT_STATUS": "Scheduled",
        "FOREWARN_EVENT_SOURCE": "Platform",
        "FOREWARN_EVENT_RESOURCES": "WestNO_0,WestNO_1",
        "FOREWARN_EVENT_NOT_BEFORE": "Mon, 11 Apr 2022 22:26:58 GMT",
        "FOREWARN_EVENT_DURATION": "5",
        "FOREWARN_EVENT_DESCRIPTION": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
        "FOREWARN_VM_NAME": "WestNO_0",
        "FOREWARN_HOOK": "prepare",
    }
    assert json.loads((tmp_path / "stdin.json").read_text())["DurationInSeconds"] == 5


def test_a_timed_out_hook_is_killed_with_its_children(tmp_path: Path) -> None:
    outcome = run_hook(tmp_path, "sleep 60 & echo $! > child.pid; wait", timeout=0.3)
    assert not outcome.ok
    assert outcome.failure == "timeout"
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the hook's child outlived the timeout")


def test_hook_output_is_bounded_and_failures_explained(tmp_path: Path) -> None:
    outcome = run_hook(
        tmp_path, "head -c 100000 /dev/zero | tr '\\0' x; echo END; exit 4", limit=64
    )
    (result,) = outcome.results
    assert (result.exit_code, outcome.failure) == (4, "exit-code")
    assert result.output.endswith("END\n")
    assert len(result.output) <= 64 + 3
    missing = run_hook(tmp_path, ("./no-such-hook",))
    assert missing.failure == "not-started"
    assert missing.results[0].error


# -- metrics and health ------------------------------------------------------------------------


def test_metrics_and_health_over_loopback() -> None:
    time_ = FakeTime()
    metrics = AgentMetrics()
    health = Health(30, time_.monotonic)
    server = MetricsServer("127.0.0.1", 0, metrics, health)
    server.start()
    host, port = server.address
    try:
        with httpx.Client(base_url=f"http://{host}:{port}", trust_env=False) as http:
            metrics.poll_errors.labels("http-500").inc()
            metrics.incarnation.set(7)
            text = http.get("/metrics").text
            assert 'forewarn_agent_poll_errors_total{kind="http-500"} 1.0' in text
            assert "forewarn_agent_document_incarnation 7.0" in text
            assert http.get("/healthz").status_code == 200  # starting up
            time_.sleep(31)
            stale = http.get("/healthz")
            assert stale.status_code == 503
            assert stale.json()["status"] == "stale"
            health.succeeded()
            assert http.get("/healthz").json()["status"] == "ok"
            assert http.get("/other").status_code == 404
    finally:
        server.close()


def test_the_agent_forgets_events_recovered_over_a_week_before_it_starts(tmp_path: Path) -> None:
    """The state keeps what a restart needs: a recovered event never comes back (EventIds are
    never reused), so once it is older than the week kept for reading it is dropped at start."""
    started = datetime(2024, 3, 10, tzinfo=UTC)
    old, recent = "00000000-0000-0000-0000-00000000000A", "00000000-0000-0000-0000-00000000000B"
    store = HandledStore.in_directory(tmp_path / "state")
    for event_id, at in (
        (old, started - timedelta(days=7, seconds=1)),
        (recent, started - timedelta(days=6)),
    ):
        store.record(event_id, Step.DECIDED, Outcome.OK, at, "{}")
        store.record(event_id, Step.RECOVERED, Outcome.OK, at)
    waiting = "00000000-0000-0000-0000-00000000000C"
    store.record(waiting, Step.DECIDED, Outcome.OK, started - timedelta(days=30), "{}")
    store.record(waiting, Step.APPROVED, Outcome.OK, started - timedelta(days=30))
    store.close()
    stream = io.StringIO()
    agent = build_agent(
        AgentConfig.model_validate(
            {
                "endpoint": "http://169.254.169.254",
                "state_dir": tmp_path / "state",
                "metrics_address": None,
            }
        ),
        transport=httpx.MockTransport(lambda request: httpx.Response(500)),
        log_stream=stream,
        now=lambda: started,
        inline=True,
        serve_metrics=False,
    )
    try:
        assert agent.store.steps(old) == {}
        assert set(agent.store.steps(recent)) == {Step.DECIDED, Step.RECOVERED}
        # never recovered: still waiting for its event to leave, however old
        assert agent.store.unrecovered() == [waiting]
        (line,) = [json.loads(text) for text in stream.getvalue().splitlines()]
        assert line["msg"] == "forgot events recovered long ago"
        assert line["steps"] == 2
    finally:
        agent.close()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"not a database, a note someone left here" * 100, "not the agent's state"),
        (None, "agent state of schema 7, not 1"),
    ],
)
def test_a_state_file_it_cannot_use_stops_the_agent_with_one_line(
    tmp_path: Path, content: bytes | None, says: str
) -> None:
    """A start-up failure is one clear line and a non-zero exit, never a traceback."""
    state = tmp_path / "state"
    state.mkdir()
    path = state / "agent-state.sqlite3"
    if content is None:
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA user_version=7")
    else:
        path.write_bytes(content)
    result = CliRunner().invoke(
        main,
        [
            "agent",
            "--state-dir",
            str(state),
            "--endpoint",
            "http://127.0.0.1:9",
            "--metrics-address",
            "",
        ],
    )
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: cannot start: ")
    assert says in line
    assert str(path) in line

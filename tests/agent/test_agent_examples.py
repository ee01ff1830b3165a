"""The shipped examples: ``examples/agent.yaml``, the hooks in ``examples/hooks/`` and the
systemd unit, run as a user would run them."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from e2e_support import http_server_in_thread
from machine_support import require_tool

from forewarn.agent import Policy, load_config
from forewarn.client import parse_document

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
EVENT_ID = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
EVENT: dict[str, object] = {
    "EventId": EVENT_ID,
    "EventStatus": "Scheduled",
    "EventType": "Reboot",
    "ResourceType": "VirtualMachine",
    "Resources": ["vm0"],
    "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
    "Description": "Virtual machine is going to be restarted as requested by authorized user.",
    "EventSource": "User",
    "DurationInSeconds": -1,
}


def run(script: str, hook: str, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    environ = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "FOREWARN_HOOK": hook,
        "FOREWARN_EVENT_ID": EVENT_ID,
        "FOREWARN_EVENT_TYPE": "Reboot",
        "FOREWARN_VM_NAME": "vm0",
        **extra,
    }
    return subprocess.run(
        [str(EXAMPLES / "hooks" / script)],
        input=json.dumps(EVENT),
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_example_configuration_is_valid_and_prepares_for_reboots(tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample": short
    freezes are approved at once; the example prepares (drains) for everything else that impacts
    this VM."""
    config = load_config(EXAMPLES / "agent.yaml", environ={})
    policy = Policy.from_specs(config.policies)
    reboot = parse_document({"DocumentIncarnation": 2, "Events": [EVENT]}).events[0]
    assert policy.decide(reboot, "vm0").action.value == "prepare-then-approve"
    assert policy.decide(reboot, "other-vm").action.value == "observe"
    for hook in (*config.hooks.prepare, *config.hooks.started, *config.hooks.recover):
        assert isinstance(hook.command, tuple)
        assert os.access(EXAMPLES / hook.command[0], os.X_OK), hook.command


def test_k8s_drain_cordons_drains_and_uncordons(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    (tmp_path / "kubectl").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (tmp_path / "kubectl").chmod(0o755)
    assert run("k8s-drain.sh", "prepare", tmp_path, FOREWARN_K8S_NODE="n1").returncode == 0
    assert run("k8s-drain.sh", "started", tmp_path, FOREWARN_K8S_NODE="n1").returncode == 0
    assert run("k8s-drain.sh", "recover", tmp_path, FOREWARN_K8S_NODE="n1").returncode == 0
    assert calls.read_text().splitlines() == [
        "cordon n1",
        "drain n1 --ignore-daemonsets --delete-emptydir-data --timeout=5m",
        "uncordon n1",
    ]


def test_k8s_drain_fails_when_kubectl_fails(tmp_path: Path) -> None:
    """A failing drain must fail the hook, so the agent does not approve."""
    (tmp_path / "kubectl").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "kubectl").chmod(0o755)
    assert run("k8s-drain.sh", "prepare", tmp_path, FOREWARN_K8S_NODE="n1").returncode != 0


def test_lb_remove_marks_and_unmarks(tmp_path: Path) -> None:
    marker = tmp_path / "lb" / "out"
    assert run("lb-remove.sh", "prepare", tmp_path, FOREWARN_LB_MARKER=str(marker)).returncode == 0
    assert marker.read_text().startswith(EVENT_ID)
    assert run("lb-remove.sh", "recover", tmp_path, FOREWARN_LB_MARKER=str(marker)).returncode == 0
    assert not marker.exists()


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[bytes]]]:
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with http_server_in_thread(Handler) as url:
        yield f"{url}/hook", received


def test_notify_webhook_posts_the_event(tmp_path: Path, webhook: tuple[str, list[bytes]]) -> None:
    require_tool("curl", "the webhook hook posts with it")
    url, received = webhook
    assert run("notify-webhook.sh", "prepare", tmp_path).returncode == 0  # no URL: nothing sent
    assert received == []
    result = run("notify-webhook.sh", "prepare", tmp_path, FOREWARN_WEBHOOK_URL=url)
    assert result.returncode == 0, result.stderr
    (body,) = received
    assert json.loads(body) == {"hook": "prepare", "vm": "vm0", "event": EVENT}


def test_systemd_unit_runs_the_agent() -> None:
    unit = (EXAMPLES / "systemd" / "forewarn-agent.service").read_text()
    sections = [line for line in unit.splitlines() if line.startswith("[")]
    assert sections == ["[Unit]", "[Service]", "[Install]"]
    assert "ExecStart=/usr/local/bin/forewarn agent --config /etc/forewarn/agent.yaml" in unit
    assert "Restart=always" in unit

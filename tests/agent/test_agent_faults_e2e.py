"""``forewarn agent`` (a process) retrying through every injected fault of ``forewarn serve``.

learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging": "410
Gone | Retry after some time for a max of 70 seconds", "500 Service Error | Retry after some time",
"429 Too Many Requests"; timeouts, cut bodies and resets are the network's share. Each fault
outlasts one poll's retries, so the agent records a poll error of the right kind, and then still
approves the live migration's Freeze (examples/agent.yaml approves short freezes at once).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_support import ServerProcess, free_port

from .test_agent_process_e2e import EXAMPLE, serve, stop, wait_for

__all__ = ["serve"]  # the fixture, imported to be used here

pytestmark = pytest.mark.e2e

#: Each fault, what it is set with, and the poll-error kind the agent reports for it.
FAULTS: list[tuple[dict[str, object], str]] = [
    ({"kind": "gone"}, "http-410"),
    ({"kind": "error"}, "http-500"),
    ({"kind": "throttle"}, "http-429"),
    ({"kind": "unavailable"}, "http-503"),
    ({"kind": "reset"}, "connection"),
    ({"kind": "truncate"}, "connection"),
    ({"kind": "timeout"}, "timeout"),
    ({"kind": "latency", "delay": 2.0}, "timeout"),
]
#: The client's default policy tries 4 times per poll: 5 faulted requests fail one poll.
COUNT = 5


@pytest.fixture
def agent(
    serve: tuple[str, httpx.Client, ServerProcess], tmp_path: Path
) -> Iterator[tuple[httpx.Client, httpx.Client, subprocess.Popen[bytes]]]:
    endpoint, control, _ = serve
    metrics_port = free_port(["127.0.0.1"])
    environ = {
        **os.environ,
        "FOREWARN_K8S_NODE": "node-0",
        "FOREWARN_LB_MARKER": str(tmp_path / "marker"),
        "FOREWARN_AGENT_POLL_INTERVAL": "0.05",
        "FOREWARN_AGENT_REQUEST_TIMEOUT": "0.5",
    }
    environ.pop("FOREWARN_WEBHOOK_URL", None)
    command = [
        sys.executable, "-m", "forewarn", "agent", "--config", str(EXAMPLE),
        "--endpoint", endpoint, "--state-dir", str(tmp_path / "state"),
        "--metrics-address", f"127.0.0.1:{metrics_port}",
    ]  # fmt: skip
    with (tmp_path / "agent.log").open("wb") as log:
        process = subprocess.Popen(command, env=environ, stdout=subprocess.DEVNULL, stderr=log)
    metrics = httpx.Client(base_url=f"http://127.0.0.1:{metrics_port}", trust_env=False)
    try:
        yield control, metrics, process
    finally:
        metrics.close()
        stop(process)


def test_the_agent_retries_through_every_fault_and_still_approves(
    agent: tuple[httpx.Client, httpx.Client, subprocess.Popen[bytes]],
) -> None:
    control, metrics, process = agent

    def text() -> str:
        try:
            return metrics.get("/metrics").text
        except httpx.TransportError:
            return ""

    wait_for(
        "the agent's first poll",
        lambda: (
            "forewarn_agent_polls_total" in text()
            and "forewarn_agent_polls_total 0.0" not in text()
        ),
        process,
    )
    for rule, kind in FAULTS:
        assert control.post("/faults", json={**rule, "count": COUNT}).status_code == 201
        wait_for(
            f"a {kind} poll error from {rule}",
            lambda kind=kind: f'forewarn_agent_poll_errors_total{{kind="{kind}"}}' in text(),  # type: ignore[misc]
            process,
        )
        event = control.post("/hosts/h0/live-migrate").json()["events"][0]["EventId"]

        def approved(event_id: str = event) -> bool:
            events = control.get("/events").json()["events"]
            return any(e["EventId"] == event_id and e["approvedBy"] for e in events)

        wait_for(f"the approval after {rule}", approved, process)
        assert control.get("/faults").json()["faults"] == []
        control.post("/clock/advance", json={"seconds": 600})

"""An agent against forewarn's real VM-facing endpoint, in process, on a manual clock.

Each VM of the fleet gets its own ``httpx.MockTransport`` that hands requests to the same
:class:`ImdsEndpoint` with the VM's address as the local address, exactly as ``forewarn
serve`` tells VMs apart. Platform time moves only through :meth:`World.advance`; the client's
retry waits move a fake monotonic clock and never sleep.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from forewarn.agent import Agent, AgentConfig, build_agent
from forewarn.agent.config import HookSpec, HooksSpec, RuleSpec
from forewarn.server.imds import ImdsEndpoint, ImdsRequest
from forewarn.server.runner import ServeSettings, build_service
from forewarn.service import ScheduledEventsService

LOG_TIME = datetime(2024, 1, 1, tzinfo=UTC)

FLEET = """
availabilitySets:
  - {name: west, faultDomains: 2, updateDomains: 5}
vms:
  - {name: vm0, address: 127.0.0.2, host: h0, priority: Spot}
  - {name: WestNO_0, address: 127.0.0.3, availabilitySet: west, faultDomain: 0, updateDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.4, availabilitySet: west, faultDomain: 0, updateDomain: 0, host: h1}
scaleSets:
  - name: web
    capacity: 1
    addressStart: 127.0.0.10
    hosts: [h2]
    terminateNotification: {enabled: true, notBeforeTimeout: PT5M}
    osImageNotification: true
"""

ADDRESSES = {
    "vm0": "127.0.0.2",
    "WestNO_0": "127.0.0.3",
    "WestNO_1": "127.0.0.4",
    "web_0": "127.0.0.10",
}

#: examples/agent.yaml's rules in short: act on what impacts this VM, approve short freezes
#: at once, prepare for everything else.
PREPARE_POLICY = (
    RuleSpec.model_validate(
        {"name": "others", "match": {"in_resources": False}, "action": "observe"}
    ),
    RuleSpec.model_validate(
        {
            "name": "short-freeze",
            "match": {"type": "Freeze", "duration_below": 9},
            "action": "approve",
        }
    ),
    RuleSpec.model_validate({"name": "the-rest", "action": "prepare-then-approve"}),
)


class FakeTime:
    """Monotonic time that moves only when slept on (retry waits, health ages)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def recording_hook(log: Path, exit_code: int = 0) -> HookSpec:
    """A hook that appends ``moment event-id vm`` to ``log`` and exits with ``exit_code``."""
    script = (
        f'echo "$FOREWARN_HOOK $FOREWARN_EVENT_ID $FOREWARN_VM_NAME" >> {shlex.quote(str(log))};'
        f" exit {exit_code}"
    )
    return HookSpec(command=script, timeout=10)


def hook_lines(log: Path) -> list[tuple[str, str, str]]:
    if not log.exists():
        return []
    return [tuple(line.split(" ", 2)) for line in log.read_text().splitlines()]  # type: ignore[misc]


@dataclass
class Request:
    vm: str
    method: str
    body: bytes


@dataclass
class World:
    """The fleet above, served in process."""

    tmp_path: Path
    service: ScheduledEventsService = field(init=False)
    endpoint: ImdsEndpoint = field(init=False)
    time: FakeTime = field(default_factory=FakeTime)
    requests: list[Request] = field(default_factory=list)
    agents: list[Agent] = field(default_factory=list)

    def __post_init__(self) -> None:
        fleet = self.tmp_path / "fleet.yaml"
        fleet.write_text(FLEET)
        self.service = build_service(
            ServeSettings(
                clock="manual",
                seed=1,
                fleet=fleet,
                timing_overrides=(("first_call_delay", timedelta(0)),),
            )
        )
        self.endpoint = ImdsEndpoint(self.service, rate_limit=1000, monotonic=self.time.monotonic)

    def handler(self, vm: str) -> Callable[[httpx.Request], httpx.Response]:
        def handle(request: httpx.Request) -> httpx.Response:
            self.requests.append(Request(vm, request.method, request.content))
            answer = self.endpoint.handle(
                ImdsRequest(
                    method=request.method,
                    path=request.url.path,
                    query=request.url.query.decode("ascii"),
                    headers={name.lower(): value for name, value in request.headers.items()},
                    body=request.content,
                    local_address=ADDRESSES[vm],
                    peer_address="10.0.0.4",
                )
            )
            if answer.status == 0:
                raise httpx.RemoteProtocolError("closed without an answer", request=request)
            headers = (
                {}
                if answer.content_type is None
                else {"content-type": answer.content_type.decode()}
            )
            return httpx.Response(answer.status, content=answer.body, headers=headers)

        return handle

    def agent(
        self,
        vm: str,
        *,
        transport: httpx.BaseTransport | None = None,
        policies: Sequence[RuleSpec] | None = None,
        hooks: HooksSpec | None = None,
        **settings: Any,
    ) -> Agent:
        options: dict[str, Any] = {
            "endpoint": "http://169.254.169.254",
            "state_dir": self.tmp_path / f"state-{vm}",
            "metrics_address": None,
        }
        if policies is not None:
            options["policies"] = tuple(policies)
        if hooks is not None:
            options["hooks"] = hooks
        options.update(settings)
        config = AgentConfig.model_validate(options)
        built = build_agent(
            config,
            transport=transport or httpx.MockTransport(self.handler(vm)),
            environ={"PATH": "/usr/bin:/bin"},
            log_stream=io.StringIO(),
            sleep=self.time.sleep,
            monotonic=self.time.monotonic,
            now=lambda: LOG_TIME,
            inline=True,
            serve_metrics=False,
        )
        built.log.records = []
        self.agents.append(built)
        return built

    def advance(self, **delta: float) -> None:
        self.service.advance_clock(timedelta(**delta))

    def posts(self, vm: str | None = None) -> list[list[str]]:
        """The EventIds of each approval sent (by ``vm``)."""
        return [
            [item["EventId"] for item in json.loads(r.body)["StartRequests"]]
            for r in self.requests
            if r.method == "POST" and (vm is None or r.vm == vm)
        ]

    def approvals(self, event_id: str) -> frozenset[str]:
        for view in self.service.events():
            if view.event.event_id == event_id:
                return view.approvals
        raise AssertionError(f"{event_id} is not a live event")

    def status(self, event_id: str) -> str | None:
        for view in self.service.events():
            if view.event.event_id == event_id:
                return str(view.event.status.value)
        return None

    def close(self) -> None:
        for agent in self.agents:
            agent.close()


def messages(agent: Agent) -> list[str]:
    assert agent.log.records is not None
    return [str(record["msg"]) for record in agent.log.records]


PYTHON = sys.executable

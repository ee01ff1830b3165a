"""An agent against forewarn's real VM-facing endpoint, in process, on a manual clock.

The platform is a :class:`forewarn.testing.ForewarnPlatform` on the fleet below; each VM's
agent talks through the platform's in-process transport for that VM, so the endpoint tells
VMs apart by address exactly as ``forewarn serve`` does. Platform time moves only through
:meth:`World.advance`; the client's retry waits move a fake monotonic clock, which is also the
rate limit's, and never sleep.
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
from forewarn.domain.events import EventType
from forewarn.service import ScheduledEventsService
from forewarn.testing import ForewarnPlatform, RecordedRequest

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
class World:
    """The fleet above, served in process."""

    tmp_path: Path
    platform: ForewarnPlatform = field(init=False)
    time: FakeTime = field(default_factory=FakeTime)
    agents: list[Agent] = field(default_factory=list)
    #: The requests earlier platforms saw, before :meth:`restart_endpoint`.
    earlier: list[RecordedRequest] = field(default_factory=list)
    #: Each VM's transport on the platform of the moment: it keeps the VM's address after the
    #: VM is gone, as a network route would.
    transports: dict[str, httpx.MockTransport] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.platform = self._new_platform()

    def restart_endpoint(self) -> None:
        """The endpoint restarts with nothing of its past (the same seed, so the same EventIds);
        the agents' transports reach the new one, and the requests so far are kept."""
        self.earlier += self.platform.requests()
        self.platform.close()
        self.platform = self._new_platform()
        self.transports.clear()

    def _new_platform(self) -> ForewarnPlatform:
        return ForewarnPlatform(
            fleet=FLEET,
            seed=1,
            timing={"first_call_delay": 0},
            rate_limit=1000,
            monotonic=self.time.monotonic,
            # A VM under an impact closes the agent's connections unanswered (its connection
            # errors); held requests, the default, are the socket tier's.
            impact=dict.fromkeys((t.value for t in EventType), "drop"),
        )

    @property
    def service(self) -> ScheduledEventsService:
        return self.platform.service

    def handler(self, vm: str) -> Callable[[httpx.Request], httpx.Response]:
        """The real endpoint's answer to a request from ``vm`` (on the platform of the moment),
        for a test's own transport to put faults in front of."""

        def handle(request: httpx.Request) -> httpx.Response:
            if vm not in self.transports:
                self.transports[vm] = self.platform.transport(vm)
            return self.transports[vm].handle_request(request)

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
        self.platform.advance(timedelta(**delta))

    def posts(self, vm: str | None = None) -> list[list[str]]:
        """The EventIds of each approval sent (by ``vm``)."""
        return [
            [item["EventId"] for item in json.loads(r.body)["StartRequests"]]
            for r in [*self.earlier, *self.platform.requests()]
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
        self.platform.close()


def messages(agent: Agent) -> list[str]:
    assert agent.log.records is not None
    return [str(record["msg"]) for record in agent.log.records]


PYTHON = sys.executable

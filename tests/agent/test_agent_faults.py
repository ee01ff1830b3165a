"""The agent facing a misbehaving endpoint: it keeps polling and never approves unprepared.

SPEC 1: "410/500 are transient platform errors that clients retry", "429 over the
rate limit"; the issue's fault list adds timeouts, malformed JSON and an endpoint that
restarts. Each test scripts the answers with ``httpx.MockTransport``, some of them in front
of the real endpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from forewarn.agent.config import HooksSpec
from forewarn.commands import Restart

from .agent_support import PREPARE_POLICY, World, hook_lines, recording_hook

Answer = Callable[[httpx.Request], httpx.Response]


def scripted(world: World, vm: str, faults: Iterator[Answer | None]) -> httpx.MockTransport:
    """Each request takes the next scripted answer; None (or the end) lets the real one through."""
    real = world.handler(vm)

    def handle(request: httpx.Request) -> httpx.Response:
        fault = next(faults, None)
        return real(request) if fault is None else fault(request)

    return httpx.MockTransport(handle)


def status(code: int) -> Answer:
    return lambda request: httpx.Response(code, json={"error": f"status {code}"})


def timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def body(text: bytes) -> Answer:
    return lambda request: httpx.Response(
        200, content=text, headers={"content-type": "application/json"}
    )


FAULTS: dict[str, tuple[Answer, str]] = {
    "410": (status(410), "http-410"),
    "429": (status(429), "http-429"),
    "500": (status(500), "http-500"),
    "timeout": (timeout, "timeout"),
    "refused": (refused, "connection"),
    "not-json": (body(b'{"DocumentIncarnation": 3, "Events": ['), "malformed"),
    "not-a-document": (body(b'{"Events": "none"}'), "malformed"),
    "bad-event": (
        body(b'{"DocumentIncarnation": 3, "Events": [{"EventType": "Reboot"}]}'),
        "malformed",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_keeps_polling_through_a_fault(world: World, fault: str) -> None:
    """Every poll meets the fault until the client's retries give up; the error is counted
    by kind, the loop goes on, and the next healthy document is handled as usual."""
    answer, kind = FAULTS[fault]
    failing = {"on": True}
    real = world.handler("vm0")

    def handle(request: httpx.Request) -> httpx.Response:
        return answer(request) if failing["on"] else real(request)

    agent = world.agent("vm0", vm_name="vm0", transport=httpx.MockTransport(handle))
    assert agent.loop.poll_once() is None
    assert agent.loop.poll_once() is None
    assert agent.metrics.value("forewarn_agent_poll_errors_total", kind=kind) == 2
    _healthy, report = agent.health.report()
    assert kind in report["lastError"]
    failing["on"] = False
    (event,) = world.service.execute(Restart("vm0"))
    change = agent.loop.poll_once()
    assert change is not None
    assert change.added[0].event_id == event.event_id
    assert world.posts("vm0") == [[event.event_id]]  # a User event: the sample approves it


def test_run_survives_every_fault_in_a_row(world: World) -> None:
    """The daemon loop itself, not one poll: a run through all faults and an internal error
    ends only when told to stop."""
    stop = threading.Event()
    faults: list[Answer | None] = [answer for answer, _ in FAULTS.values()]
    calls = {"n": 0}

    def handle(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] >= 40:
            stop.set()
        fault = faults[calls["n"] % len(faults)] if calls["n"] < 30 else None
        return world.handler("vm0")(request) if fault is None else fault(request)

    agent = world.agent(
        "vm0", vm_name="vm0", transport=httpx.MockTransport(handle), poll_interval=0.001
    )
    original = agent.pipeline.reconcile
    broken = {"once": True}

    def reconcile() -> None:
        if broken.pop("once", False):
            raise RuntimeError("a bug in a step")
        original()

    agent.pipeline.reconcile = reconcile  # type: ignore[method-assign]
    agent.loop.run(stop)
    assert calls["n"] >= 40
    assert agent.metrics.value("forewarn_agent_poll_errors_total", kind="internal") == 1
    assert agent.metrics.value("forewarn_agent_polls_total") >= 1


def test_an_endpoint_that_restarts_empty(world: World, tmp_path: Path) -> None:
    """An endpoint restarted without its state answers with a lower DocumentIncarnation and
    without the old event: the agent warns, recovers from the vanished event and goes on."""
    log = tmp_path / "hooks.log"
    hook = recording_hook(log)
    mode = {"down": False, "fresh": False}
    real = world.handler("vm0")

    def handle(request: httpx.Request) -> httpx.Response:
        if mode["down"]:
            raise httpx.ConnectError("connection refused", request=request)
        if mode["fresh"] and request.method == "GET":
            return httpx.Response(200, json={"DocumentIncarnation": 1, "Events": []})
        return real(request)

    agent = world.agent(
        "vm0",
        vm_name="vm0",
        transport=httpx.MockTransport(handle),
        policies=PREPARE_POLICY,
        hooks=HooksSpec(prepare=(hook,), recover=(hook,)),
    )
    agent.loop.poll_once()
    world.advance(minutes=1)
    agent.loop.poll_once()
    (_event,) = world.service.execute(Restart("vm0"))
    agent.loop.poll_once()
    mode["down"] = True
    assert agent.loop.poll_once() is None
    mode.update(down=False, fresh=True)
    agent.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["prepare", "recover"]
    assert "DocumentIncarnation went backwards: the endpoint lost its state" in [
        r["msg"] for r in agent.log.records or []
    ]


def test_approval_errors_are_retried_at_later_polls_then_given_up(
    world: World, tmp_path: Path
) -> None:
    """Issue: "bounded retries for approval". A POST that keeps failing (after the client's
    own retries) is tried again at the next polls, ``approval_attempts`` times in all."""
    real = world.handler("vm0")
    posts = {"n": 0}

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            posts["n"] += 1
            return httpx.Response(500, json={"error": "Internal server error"})
        return real(request)

    agent = world.agent(
        "vm0", vm_name="vm0", transport=httpx.MockTransport(handle), approval_attempts=3
    )
    agent.loop.poll_once()
    (event,) = world.service.execute(Restart("vm0"))
    for _ in range(6):
        agent.loop.poll_once()
    assert posts["n"] == 3 * 3  # three agent attempts of three client tries each
    assert agent.metrics.value("forewarn_agent_approvals_total", outcome="gave-up") == 1
    assert world.status(event.event_id) == "Scheduled"


def test_approval_lost_once_then_delivered(world: World) -> None:
    real = world.handler("vm0")
    failures = iter([status(500)] * 3)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            fault = next(failures, None)
            if fault is not None:
                return fault(request)
        return real(request)

    agent = world.agent("vm0", vm_name="vm0", transport=httpx.MockTransport(handle))
    agent.loop.poll_once()
    (event,) = world.service.execute(Restart("vm0"))
    agent.loop.poll_once()
    assert world.approvals(event.event_id) == frozenset()
    agent.loop.poll_once()
    assert world.approvals(event.event_id)
    assert agent.metrics.value("forewarn_agent_approvals_total", outcome="ok") == 1


def test_flaky_endpoint_never_approves_a_failed_prepare(world: World, tmp_path: Path) -> None:
    """Issue: the agent facing faults "never approves an event whose prepare hook failed"."""
    log = tmp_path / "hooks.log"
    faults: list[Answer | None] = [
        status(410),
        None,
        status(429),
        None,
        timeout,
        None,
        status(500),
    ] * 4
    agent = world.agent(
        "vm0",
        vm_name="vm0",
        transport=scripted(world, "vm0", iter(faults)),
        policies=PREPARE_POLICY,
        hooks=HooksSpec(prepare=(recording_hook(log, exit_code=1),)),
    )
    agent.loop.poll_once()
    (event,) = world.service.execute(Restart("vm0"))
    for _ in range(12):
        agent.loop.poll_once()
    assert hook_lines(log) == [("prepare", event.event_id, "vm0")]
    assert world.posts() == []

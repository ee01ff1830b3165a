"""The agent through every operation of SPEC 6, against the real endpoint in process.

Each test puts an event in front of a VM with the same command the control API runs, polls
with the agent, moves platform time, and checks the hooks that ran (in order), the approvals
the platform received, and the recovery once the event is gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forewarn.agent import Agent
from forewarn.agent.config import HooksSpec
from forewarn.commands import (
    Command,
    DeleteInstances,
    HostOperation,
    OsImageUpgrade,
    Redeploy,
    Restart,
    SimulateEviction,
)

from .agent_support import PREPARE_POLICY, World, hook_lines, recording_hook


def hooked(world: World, vm: str, log: Path) -> Agent:
    hook = recording_hook(log)
    return world.agent(
        vm,
        policies=PREPARE_POLICY,
        hooks=HooksSpec(prepare=(hook,), started=(hook,), recover=(hook,)),
    )


@pytest.mark.parametrize(
    ("vm", "command", "event_type", "source"),
    [
        # SPEC 6: "restart a VM | Reboot | User | 15 min or approval"
        ("vm0", Restart("vm0"), "Reboot", "User"),
        # SPEC 6: "redeploy a VM | Redeploy | User | 10 min or approval"
        ("vm0", Redeploy("vm0"), "Redeploy", "User"),
        # SPEC 6: "host maintenance needing reboot | Reboot | Platform | 15 min"
        ("vm0", HostOperation("h0", "maintain"), "Reboot", "Platform"),
        # SPEC 6: "predicted hardware failure | Redeploy | Platform | days"
        ("vm0", HostOperation("h0", "predict-failure"), "Redeploy", "Platform"),
        # SPEC 6: "scale-set guest OS upgrade / reimage with
        # osImageNotificationProfile on | Reboot-like notification | Platform | 15 min"
        ("web_0", OsImageUpgrade("web", ("0",)), "Reboot", "Platform"),
    ],
)
def test_prepare_approve_start_recover(
    world: World, tmp_path: Path, vm: str, command: Command, event_type: str, source: str
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "For events in the EventStatus:"Scheduled" state, you'll need to take steps to prepare your
    workload. Once the preparation is complete, you should then approve the event"; "When the event
    has reached a terminal state, it's removed from the list of events. That serves as the signal
    for the customer to recover"."""
    log = tmp_path / "hooks.log"
    agent = hooked(world, vm, log)
    agent.loop.poll_once()  # the first call turns Scheduled Events on for the VM
    (event,) = world.service.execute(command)
    event_id = event.event_id
    assert (str(event.event_type.value), str(event.source.value)) == (event_type, source)

    agent.loop.poll_once()
    assert hook_lines(log) == [("prepare", event_id, vm)]
    assert world.posts(vm) == [[event_id]]
    assert world.approvals(event_id)  # the platform recorded this VM's tenant's approval

    world.advance(seconds=8)  # the VM answers again after the documented 7 s of impact
    agent.loop.poll_once()
    assert world.status(event_id) == "Started"  # approval lets it start before NotBefore
    assert hook_lines(log)[-1] == ("started", event_id, vm)

    world.advance(minutes=10)  # "Started to Completed ... 10 minutes"
    agent.loop.poll_once()
    agent.loop.poll_once()
    assert world.status(event_id) is None
    assert [line[0] for line in hook_lines(log)] == ["prepare", "started", "recover"]
    assert world.posts(vm) == [[event_id]]  # approved once, never again
    assert agent.metrics.value("forewarn_agent_approvals_total", outcome="ok") == 1


@pytest.mark.parametrize(
    ("vm", "command", "event_type", "source"),
    [
        # SPEC 6: "Spot eviction (incl. simulate-eviction) | Preempt | Platform | 30 s"
        ("vm0", SimulateEviction(("vm0",)), "Preempt", "Platform"),
        # SPEC 6: "delete or scale in a scale-set VM with terminate notification
        # enabled | Terminate | User"
        ("web_0", DeleteInstances("web", ("0",)), "Terminate", "User"),
    ],
)
def test_prepare_and_approve_before_the_vm_goes_away(
    world: World, tmp_path: Path, vm: str, command: Command, event_type: str, source: str
) -> None:
    """An evicted or deleted VM does not come back, so there is nothing to start or recover
    on it: the agent prepares (drains) and approves, then keeps polling through the errors of
    a VM that no longer exists (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events,
    "Python Sample": approve once prepared; SPEC 6 for the event each operation gives)."""
    log = tmp_path / "hooks.log"
    agent = hooked(world, vm, log)
    agent.loop.poll_once()
    (event,) = world.service.execute(command)
    assert (str(event.event_type.value), str(event.source.value)) == (event_type, source)
    agent.loop.poll_once()
    assert hook_lines(log) == [("prepare", event.event_id, vm)]
    assert world.posts(vm) == [[event.event_id]]
    for seconds in (1, 8, 600):
        world.advance(seconds=seconds)
        assert agent.loop.poll_once() is None
    assert vm not in {known.name for known in world.service.vms()}
    # Nothing answers a deleted VM (docs/faithfulness.md, "Deleted VMs"): no HTTP error,
    # each poll meets no answer at all (in process: a timeout at once).
    timeouts = agent.metrics.value("forewarn_agent_poll_errors_total", kind="timeout")
    assert agent.loop.poll_once() is None
    assert agent.metrics.value("forewarn_agent_poll_errors_total", kind="timeout") == timeouts + 1
    assert agent.metrics.value("forewarn_agent_poll_errors_total", kind="http-400") == 0
    assert world.posts(vm) == [[event.event_id]]


def test_live_migration_short_freeze_is_approved_without_preparing(
    world: World, tmp_path: Path
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample": "freeze
    events less that 9 seconds are considered no impact. This will immediately approve them"; SPEC
    6: "live migration ... | Freeze (DurationInSeconds few s) | Platform | 15 min"."""
    log = tmp_path / "hooks.log"
    agent = hooked(world, "vm0", log)
    agent.loop.poll_once()
    (event,) = world.service.execute(HostOperation("h0", "live-migrate"))
    assert 0 <= event.duration_seconds < 9
    agent.loop.poll_once()
    assert world.posts("vm0") == [[event.event_id]]
    assert hook_lines(log) == []  # approved at once: no prepare hook
    world.advance(seconds=8)
    agent.loop.poll_once()
    world.advance(minutes=11)
    agent.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["started", "recover"]


def test_hardware_failure_goes_straight_to_started(world: World, tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling" note:
    on hardware failure "an event will be created for all impacted VMs with EventType = Reboot and
    EventStatus = Started"; nothing to approve, the started and recover hooks still run."""
    log = tmp_path / "hooks.log"
    agent = hooked(world, "vm0", log)
    agent.loop.poll_once()
    (event,) = world.service.execute(HostOperation("h0", "fail"))
    assert agent.loop.poll_once() is None  # rebooting: the connection closes unanswered
    world.advance(seconds=8)
    agent.loop.poll_once()
    assert hook_lines(log) == [("started", event.event_id, "vm0")]
    assert world.posts() == []
    world.advance(minutes=11)
    agent.loop.poll_once()
    agent.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["started", "recover"]


def test_cancelled_event_is_recovered_from(world: World, tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling": "in
    rare cases, the operation will be canceled by Azure before it starts. In that case the event
    will be removed from the Events array" -- the agent recovers (uncordons) what it prepared."""
    from forewarn.commands import CancelEvent

    log = tmp_path / "hooks.log"
    hook = recording_hook(log)
    failing_approval = HooksSpec(prepare=(recording_hook(log, exit_code=1),), recover=(hook,))
    agent = world.agent("vm0", policies=PREPARE_POLICY, hooks=failing_approval)
    agent.loop.poll_once()
    (event,) = world.service.execute(HostOperation("h0", "maintain"))
    agent.loop.poll_once()
    world.service.execute(CancelEvent(event.event_id))
    agent.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["prepare", "recover"]

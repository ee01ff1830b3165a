"""Leader election, failing hooks, agent restarts and dry runs, against the real endpoint."""

from __future__ import annotations

from pathlib import Path

from forewarn.agent.config import HookSpec, HooksSpec
from forewarn.agent.store import Outcome, Step
from forewarn.commands import HostOperation, Restart

from .agent_support import PREPARE_POLICY, World, hook_lines, messages, recording_hook


def both_hooks(log: Path, exit_code: int = 0) -> HooksSpec:
    hook = recording_hook(log, exit_code)
    return HooksSpec(
        prepare=(hook,), started=(recording_hook(log),), recover=(recording_hook(log),)
    )


def test_only_the_leader_approves_both_prepare(world: World, tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event":
    "Acknowledging an event allows the event to proceed for all Resources in the event ... you can
    choose to elect a leader to coordinate the acknowledgement, which might be as simple as the
    first machine in the Resources field." Two VMs of one availability set on one host: one Freeze
    for both."""
    log = tmp_path / "hooks.log"
    agents = {
        vm: world.agent(vm, policies=PREPARE_POLICY[2:], hooks=both_hooks(log))
        for vm in ("WestNO_1", "WestNO_0")
    }
    for agent in agents.values():
        agent.loop.poll_once()
    (event,) = world.service.execute(HostOperation("h1", "live-migrate"))
    assert sorted(r.name for r in event.resources) == ["WestNO_0", "WestNO_1"]
    for agent in agents.values():
        agent.loop.poll_once()
    assert sorted(hook_lines(log)) == [
        ("prepare", event.event_id, "WestNO_0"),
        ("prepare", event.event_id, "WestNO_1"),
    ]
    assert world.posts("WestNO_0") == [[event.event_id]]
    assert world.posts("WestNO_1") == []
    steps = agents["WestNO_1"].store.steps(event.event_id)
    assert steps[Step.APPROVED] == (Outcome.SKIPPED, "leader is WestNO_0")
    world.advance(seconds=8)
    for agent in agents.values():
        agent.loop.poll_once()
    assert world.status(event.event_id) == "Started"  # one approval covered both VMs


def test_a_vm_not_in_resources_never_approves(world: World, tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope": events reach
    "All the VMs in an availability set" and "check the Resources field in the event to identify
    which VMs are affected"; a restart of WestNO_0 is shown to WestNO_1, which must not approve it,
    even under the sample's policy that approves every User event."""
    bystander = world.agent("WestNO_1")  # the documented sample's policy (the default)
    owner = world.agent("WestNO_0")
    bystander.loop.poll_once()
    owner.loop.poll_once()
    (event,) = world.service.execute(Restart("WestNO_0"))
    bystander.loop.poll_once()
    assert world.posts("WestNO_1") == []
    owner.loop.poll_once()
    assert world.posts("WestNO_0") == [[event.event_id]]


def test_a_failing_prepare_hook_never_approves(world: World, tmp_path: Path) -> None:
    """Issue: "A failing hook never approves." The event then starts only at its NotBefore
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "Otherwise, the event is automatically approved when the NotBefore time is reached")."""
    log = tmp_path / "hooks.log"
    agent = world.agent("vm0", policies=PREPARE_POLICY, hooks=both_hooks(log, exit_code=3))
    agent.loop.poll_once()
    (event,) = world.service.execute(Restart("vm0"))
    for _ in range(5):
        agent.loop.poll_once()
        world.advance(minutes=1)
    assert world.posts() == []
    assert world.status(event.event_id) == "Scheduled"
    assert hook_lines(log) == [("prepare", event.event_id, "vm0")]  # not retried either
    assert (
        agent.metrics.value(
            "forewarn_agent_hook_failures_total", hook="prepare", reason="exit-code"
        )
        == 1
    )
    world.advance(minutes=11)  # past NotBefore (15 min) and the reboot's impact
    agent.loop.poll_once()
    assert world.status(event.event_id) == "Started"
    assert world.posts() == []


def test_a_hook_that_times_out_never_approves(world: World, tmp_path: Path) -> None:
    """Issue: hooks run "with a timeout"; a timed-out prepare is a failed prepare."""
    slow = HooksSpec(prepare=(HookSpec(command="sleep 30", timeout=0.2),))
    agent = world.agent("vm0", policies=PREPARE_POLICY, hooks=slow)
    agent.loop.poll_once()
    world.service.execute(Restart("vm0"))
    agent.loop.poll_once()
    assert world.posts() == []
    assert (
        agent.metrics.value("forewarn_agent_hook_failures_total", hook="prepare", reason="timeout")
        == 1
    )


def test_a_restarted_agent_neither_reruns_hooks_nor_reapproves(
    world: World, tmp_path: Path
) -> None:
    """Issue: "what was already handled survives an agent restart"; the documented loop
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview")
    would prepare again for every event of the first document it reads after a restart."""
    log = tmp_path / "hooks.log"
    first = world.agent("vm0", policies=PREPARE_POLICY, hooks=both_hooks(log))
    first.loop.poll_once()
    (event,) = world.service.execute(HostOperation("h0", "maintain"))
    first.loop.poll_once()
    world.advance(seconds=8)
    first.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["prepare", "started"]
    first.close()

    second = world.agent("vm0", policies=PREPARE_POLICY, hooks=both_hooks(log))
    for _ in range(3):
        second.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["prepare", "started"]
    assert world.posts() == [[event.event_id]]
    world.advance(minutes=10)
    second.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["prepare", "started", "recover"]


def test_an_event_gone_while_the_agent_was_down_is_recovered(world: World, tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    an event no longer in the list is the signal to recover; the store remembers what was prepared,
    so an agent that was down when the event disappeared still recovers (uncordons) after its
    restart."""
    log = tmp_path / "hooks.log"
    first = world.agent("vm0", policies=PREPARE_POLICY, hooks=both_hooks(log))
    first.loop.poll_once()
    (event,) = world.service.execute(Restart("vm0"))
    first.loop.poll_once()
    first.close()
    world.advance(minutes=11)  # started, impact over, removed: all while the agent is down
    second = world.agent("vm0", policies=PREPARE_POLICY, hooks=both_hooks(log))
    second.loop.poll_once()
    assert hook_lines(log) == [
        ("prepare", event.event_id, "vm0"),
        ("recover", event.event_id, "vm0"),
    ]
    second.loop.poll_once()
    assert len(hook_lines(log)) == 2


def test_dry_run_decides_and_logs_only(world: World, tmp_path: Path) -> None:
    """Issue: "``--dry-run`` decides and logs only": no hook runs, nothing is approved,
    nothing is written to the store (so a real run later still does everything)."""
    log = tmp_path / "hooks.log"
    agent = world.agent("vm0", policies=PREPARE_POLICY, hooks=both_hooks(log), dry_run=True)
    agent.loop.poll_once()
    (event,) = world.service.execute(Restart("vm0"))
    agent.loop.poll_once()
    agent.loop.poll_once()
    world.advance(minutes=16)
    agent.loop.poll_once()
    world.advance(minutes=10)
    agent.loop.poll_once()
    assert hook_lines(log) == []
    assert world.posts() == []
    assert agent.store.steps(event.event_id) == {}
    assert agent.log.records is not None
    dry = [r for r in agent.log.records if r["msg"] == "dry run: nothing done"]
    assert [r["would"] for r in dry] == [
        ["run prepare hooks", "approve"],
        ["run started hooks"],
        ["run recover hooks"],
    ]
    assert messages(agent).count("event seen") == 1


def test_an_event_back_after_its_recovery_is_prepared_again(world: World, tmp_path: Path) -> None:
    """An endpoint that lost its state shows an event the agent already recovered from as
    Scheduled again (the same EventId from the same seed). The recover hooks undid what the
    prepare hooks did, so approving straight away would approve an unprepared VM: the agent
    prepares again first."""
    log = tmp_path / "hooks.log"
    agent = world.agent("vm0", policies=PREPARE_POLICY, hooks=both_hooks(log))
    agent.loop.poll_once()
    (event,) = world.service.execute(Restart("vm0"))
    agent.loop.poll_once()
    assert world.posts() == [[event.event_id]]
    world.advance(minutes=11)  # impact and Started period: the event is over
    agent.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["prepare", "recover"]

    world.restart_endpoint()  # the endpoint restarts with nothing of its past
    agent.loop.poll_once()
    (again,) = world.service.execute(Restart("vm0"))
    assert again.event_id == event.event_id
    agent.loop.poll_once()
    assert [line[0] for line in hook_lines(log)] == ["prepare", "recover", "prepare"]
    assert world.posts() == [[event.event_id], [event.event_id]]
    assert "event back after recovery: preparing again" in messages(agent)

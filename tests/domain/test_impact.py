"""What a VM's requests meet while it cannot be answered (docs/faithfulness.md, impact).

A paused VM "simply takes longer" (held), the policy per event type can drop or refuse
instead, a VM warming up after its first call is always held ("You should expect a delayed
response in your first call of up to two minutes",
learn.microsoft.com/azure/virtual-machines/linux/scheduled-events "Enabling and disabling Scheduled
Events"), and a VM that is gone has nothing to hold a request for.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from forewarn.domain.events import EventSource, EventType
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.impact import ImpactPolicies, ImpactPolicy, Pause
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Priority, Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


def platform_with(*names: str, **fields: Any) -> Platform:
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(5))
    for name in names:
        platform.add_vm(Vm(name=name, vm_id=f"id-{name}", host="h1", **fields))
    return platform


def started(platform: Platform, event_type: EventType, *vms: str, seconds: int = -1) -> str:
    event = platform.schedule(
        event_type, list(vms), source=EventSource.PLATFORM, duration_seconds=seconds
    )
    platform.approve(vms[0], [event.event_id])
    return event.event_id


def test_an_impact_pauses_every_resource_until_it_ends_with_its_event() -> None:
    """SPEC 4: the impact lasts DurationInSeconds (5 s live migration here), every resource of
    the event is down for it, and nothing is paused before or after."""
    platform = platform_with("a", "b", "c")
    assert platform.pause("a") is None
    event_id = started(platform, EventType.FREEZE, "a", "b", seconds=5)
    end = START + timedelta(seconds=5)
    for vm in ("a", "b"):
        assert platform.pause(vm) == Pause(end, EventType.FREEZE, event_id)
    assert platform.pause("c") is None
    assert set(platform.impacts()) == {"a", "b"}
    platform.advance_to(end - timedelta(microseconds=1))
    assert platform.pause("b") is not None
    platform.advance_to(end)
    assert platform.pause("a") is None
    assert platform.pause("b") is None
    assert platform.impacts() == {}


def test_the_longer_of_two_overlapping_impacts_decides() -> None:
    platform = platform_with("a")
    started(platform, EventType.FREEZE, "a", seconds=9)
    reboot = started(platform, EventType.REBOOT, "a", seconds=3)
    pause = platform.pause("a")
    assert pause is not None
    assert pause.until == START + timedelta(seconds=9)
    assert pause.event_type is EventType.FREEZE
    assert pause.event_id != reboot


def test_a_vm_warming_up_after_its_first_call_is_paused_until_enabled() -> None:
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(5))
    platform.add_vm(Vm(name="a", vm_id="id-a", host="h1"), receiving=False)
    assert platform.pause("a") is None  # it has not asked yet
    assert platform.touch("a") is True
    assert platform.pause("a") == Pause(START + DOCUMENTED.first_call_delay)
    platform.advance_to(START + DOCUMENTED.first_call_delay)
    assert platform.pause("a") is None


def test_a_gone_vm_is_paused_for_ever() -> None:
    platform = platform_with("a")
    platform.delete_vm("a")
    assert platform.pause("a") == Pause(None)


@pytest.mark.parametrize("event_type", list(EventType))
def test_every_impact_is_held_unless_told_otherwise(event_type: EventType) -> None:
    pause = Pause(START, event_type, "X")
    assert ImpactPolicies().for_pause(pause) is ImpactPolicy.HOLD
    chosen = ImpactPolicies.parse([f"{event_type.value}=refuse"])
    assert chosen.for_pause(pause) is ImpactPolicy.REFUSE
    others = [t for t in EventType if t is not event_type]
    assert chosen.for_pause(Pause(START, others[0], "Y")) is ImpactPolicy.HOLD


def test_a_warm_up_is_always_held_and_a_gone_vm_held_for_ever() -> None:
    """A deleted VM gets no HTTP answer a real VM could get: on Azure its software is gone
    with it and nothing answers at its address
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties": Preempt
    "The Spot Virtual Machine is being deleted", Terminate "The virtual machine is scheduled to be
    deleted"). Held with no end, whatever the policies."""
    everything = ImpactPolicies.parse([f"{t.value}=refuse" for t in EventType])
    assert everything.for_pause(Pause(START)) is ImpactPolicy.HOLD
    assert ImpactPolicies().for_pause(Pause(None)) is ImpactPolicy.HOLD
    gone = Pause(None, EventType.PREEMPT, "Z")
    assert gone.gone
    assert everything.for_pause(gone) is ImpactPolicy.HOLD
    assert not Pause(START).gone


def test_settings_are_type_equals_policy_in_any_case() -> None:
    parsed = ImpactPolicies.parse(["reboot=DROP", " Freeze = hold "])
    assert parsed.by_type == {
        EventType.REBOOT: ImpactPolicy.DROP,
        EventType.FREEZE: ImpactPolicy.HOLD,
    }
    for bad in ("Reboot", "Reboot=maybe", "Rebooting=hold", "=hold"):
        with pytest.raises(ValueError, match="TYPE=POLICY"):
            ImpactPolicies.parse([bad])


def test_a_duration_of_zero_means_no_impact() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    DurationInSeconds 0 means "no impact": a started Freeze of 0 s pauses nobody, while -1
    ("unknown") takes the profile's impact."""
    platform = platform_with("a", "b")
    started(platform, EventType.FREEZE, "a", seconds=0)
    assert platform.pause("a") is None
    assert platform.reachable("a")
    started(platform, EventType.FREEZE, "b", seconds=-1)
    pause = platform.pause("b")
    assert pause is not None
    assert pause.until == START + DOCUMENTED.impact


def test_every_resource_is_moved_at_the_end_of_a_redeploy_even_past_a_deleted_one() -> None:
    """SPEC 6: a Redeploy moves the VM to another host when its impact ends; all resources of
    the event move, also when an earlier one in the list is gone by then."""
    platform = platform_with("a", "b", "c")
    platform.add_vm(Vm(name="d", vm_id="id-d", host="h2"))
    started(platform, EventType.REDEPLOY, "a", "b", "c", seconds=5)
    platform.delete_vm("a")
    platform.advance_to(START + timedelta(seconds=5))
    assert platform.vm("b").host != "h1"
    assert platform.vm("c").host != "h1"


def test_an_eviction_deletes_every_resource_when_its_impact_ends() -> None:
    platform = platform_with("a", "b", priority=Priority.SPOT)
    started(platform, EventType.PREEMPT, "a", "b", seconds=5)
    assert {vm.name for vm in platform.vms()} == {"a", "b"}
    platform.advance_to(START + timedelta(seconds=5))
    assert platform.vms() == ()


def test_the_impacts_list_names_every_paused_vm_with_its_event_and_end() -> None:
    """What the impact hooks run on (docs/faithfulness.md, impact hooks): each VM under an
    impact, until when, and the event's type and id; nobody before the start or after the end."""
    platform = platform_with("a", "b", "c")
    assert platform.impacts() == {}
    event_id = started(platform, EventType.FREEZE, "a", "b", seconds=5)
    end = START + timedelta(seconds=5)
    assert platform.impacts() == {
        "a": Pause(end, EventType.FREEZE, event_id),
        "b": Pause(end, EventType.FREEZE, event_id),
    }
    platform.advance_to(end)
    assert platform.impacts() == {}


@pytest.mark.parametrize("event_type", [EventType.PREEMPT, EventType.TERMINATE])
def test_a_deleting_event_nobody_can_be_shown_is_over_with_its_impact(
    event_type: EventType,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    Preempt "is being deleted", Terminate "is scheduled to be deleted". Once the impact deleted
    every VM that could be shown the event, it is over (nobody could read it); in a set, the others
    still read it Started until its Started period ends."""
    alone = platform_with("a")
    event_id = started(alone, event_type, "a")
    alone.advance_to(START + DOCUMENTED.impact)
    assert alone.events() == ()
    assert [d.vm.name for d in alone.deletions_after(0)] == ["a"]
    alone.advance_to(START + DOCUMENTED.started_period)  # its removal, due then, is harmless
    assert alone.events() == ()

    in_set = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(5))
    for index in range(2):
        in_set.add_vm(Vm(name=f"s{index}", vm_id=f"id-s{index}", host=f"h{index}",
                         availability_set="as", platform_fault_domain=index))  # fmt: skip
    event_id = started(in_set, event_type, "s0")
    in_set.advance_to(START + DOCUMENTED.impact)
    (view,) = in_set.events()
    assert view.event.event_id == event_id
    assert [e.event_id for e in in_set.document("s1").events] == [event_id]
    in_set.advance_to(START + DOCUMENTED.started_period)
    assert in_set.events() == ()

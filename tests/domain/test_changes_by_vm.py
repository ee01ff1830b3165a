"""Each VM's own count of changes (``Platform.unchanged_since``), in the domain.

The service answers a VM's repeated poll from what its last one met while nothing of that
VM's changed since (docs/architecture.md, "How a request flows"): its VM (gone, added again,
moved, its policy), its pause, its enablement and its document. Another VM's change leaves it,
so a campaign elsewhere in the fleet does not send every VM's poll down the full path; each
change of its own must be counted, or a poll is answered with a stale document (SPEC 2: "the
same incarnation always means the same information"). The property machine
(tests/properties, ``check_changes_counted_by_vm``) holds the rule to every operation; the
tests here name each kind of change once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from forewarn.domain.events import EventSource, EventType
from forewarn.domain.platform import Platform
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.domain.timing import FAST
from forewarn.domain.vms import Vm

START = datetime(2024, 4, 11, 22, 0, 0, tzinfo=UTC)
PLATFORM = EventSource.PLATFORM


def fleet(*, receiving: bool = True) -> Platform:
    """``a`` and ``b``, standalone, each on a host of its own; ``c`` not receiving unless
    ``receiving``."""
    platform = Platform(START, timing=FAST)
    platform.add_vm(Vm(name="a", vm_id="a", address="10.0.0.1", host="h1"))
    platform.add_vm(Vm(name="b", vm_id="b", address="10.0.0.2", host="h2"))
    platform.add_vm(Vm(name="c", vm_id="c", address="10.0.0.3", host="h3"), receiving=receiving)
    return platform


def test_another_vm_s_event_leaves_a_vm_unchanged() -> None:
    platform = fleet()
    since = platform.changes
    event = platform.schedule(EventType.REBOOT, ["a"], source=PLATFORM)
    assert not platform.unchanged_since("a", since), "shown an event"
    assert platform.unchanged_since("b", since), "another VM's event"
    platform.approve("a", [event.event_id])  # starts it: a's pause, a's document
    platform.advance_to(START + timedelta(days=1))  # over and removed
    assert platform.unchanged_since("b", since)
    assert platform.changes > since


def test_an_event_started_and_removed_changes_its_vm() -> None:
    platform = fleet()
    event = platform.schedule(EventType.FREEZE, ["a"], source=PLATFORM)
    scheduled = platform.changes
    platform.approve("a", [event.event_id])
    assert not platform.unchanged_since("a", scheduled), "shown Started"
    started = platform.changes
    platform.advance_to(START + timedelta(days=1))
    assert platform.document("a").events == ()
    assert not platform.unchanged_since("a", started), "no longer shown"


def test_a_pause_changes_a_vm_shown_nothing() -> None:
    """A VM with Scheduled Events off is shown no event, yet an event started on it pauses
    it all the same: only the pause is new to its request."""
    platform = fleet(receiving=False)
    since = platform.changes
    platform.schedule(EventType.REBOOT, ["c"], source=PLATFORM, already_started=True)
    assert platform.document("c").events == ()
    assert platform.pause("c") is not None
    assert not platform.unchanged_since("c", since)
    assert platform.unchanged_since("a", since)


def test_a_second_impact_changes_its_vm() -> None:
    platform = fleet()
    platform.schedule(
        EventType.FREEZE,
        ["a"],
        source=PLATFORM,
        duration_seconds=10,
        already_started=True,
        started_for=timedelta(hours=1),
    )
    platform.advance_to(START + timedelta(minutes=1))
    since = platform.changes
    platform.impact_again("a")
    assert platform.pause("a") is not None
    assert not platform.unchanged_since("a", since)
    assert platform.unchanged_since("b", since)


def test_a_first_request_changes_its_vm_alone() -> None:
    platform = fleet(receiving=False)
    since = platform.changes
    assert platform.touch("c")
    assert not platform.unchanged_since("c", since), "turned on"
    assert platform.unchanged_since("a", since)
    turned_on = platform.changes
    assert not platform.touch("c")
    assert platform.unchanged_since("c", turned_on), "a request like any other"


def test_a_vm_gone_or_added_again_is_changed() -> None:
    platform = fleet()
    since = platform.changes
    vm = platform.vm("a")
    platform.delete_vm("a")
    assert not platform.unchanged_since("a", since)
    assert platform.unchanged_since("b", since)
    platform.add_vm(vm)
    assert not platform.unchanged_since("a", since), "a new VM, under the same name"


def test_a_vm_moved_off_its_host_is_changed() -> None:
    platform = fleet()
    platform.schedule(EventType.REDEPLOY, ["a"], source=PLATFORM, already_started=True)
    since = platform.changes
    platform.advance_to(START + timedelta(minutes=1))  # the impact is over: elsewhere
    assert platform.vm("a").host != "h1"
    assert not platform.unchanged_since("a", since)
    assert platform.unchanged_since("b", since)


def test_a_vm_s_new_policy_changes_it_alone() -> None:
    platform = fleet()
    since = platform.changes
    platform.set_policy("vm", "a", ScheduledEventsPolicy(auto_approve_reboot=True))
    assert not platform.unchanged_since("a", since)
    assert platform.unchanged_since("b", since)


def test_last_requests_taken_change_every_vm() -> None:
    """A platform rebuilt from a journal takes when each VM last asked from the one it
    replaces: whether each is idle may differ, for every VM at once."""
    platform = fleet()
    since = platform.changes
    platform.take_requests({"a": START})
    assert not platform.unchanged_since("b", since)


def test_a_platform_counting_on_from_another_changes_every_vm() -> None:
    """What a reader kept under a replaced platform's count is never taken for its
    replacement's, whose VMs' own counts may be below it."""
    replaced = fleet()
    replaced.schedule(EventType.FREEZE, ["a"], source=PLATFORM)
    kept = replaced.changes
    rebuilt = fleet()
    assert rebuilt.unchanged_since("b", kept)  # by its own count alone
    rebuilt.count_changes_after(kept)
    assert rebuilt.changes > kept
    assert not rebuilt.unchanged_since("b", kept)
    assert rebuilt.unchanged_since("b", rebuilt.changes)

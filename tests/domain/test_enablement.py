"""Enabling and disabling Scheduled Events per VM (SPEC 7).

learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Enabling and disabling
Scheduled Events": "Scheduled Events is enabled for your service the first time you make a request
for events. You should expect a delayed response in your first call of up to two minutes and you'll
start receiving events within 5 minutes. Scheduled Events is disabled for your service if it doesn't
make a request to the endpoint for 24 hours." The delays come from the timing profile: the
documented two minutes, or none in the fast profile (SPEC 7 [ours]).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from forewarn.domain import operations
from forewarn.domain.documents import FIRST_INCARNATION, Document
from forewarn.domain.errors import UnknownVmError
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.impact import Pause
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED, FAST, TimingProfile
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
MIN = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
DAY = timedelta(hours=24)


def make_platform(timing: TimingProfile = DOCUMENTED) -> Platform:
    return Platform(START, timing=timing, new_event_id=EventIdFactory(41))


def add(platform: Platform, name: str, *, receiving: bool = True, **fields: Any) -> None:
    platform.add_vm(Vm(name=name, vm_id=f"id-{name}", **fields), receiving=receiving)


def shown_ids(platform: Platform, name: str) -> list[str]:
    return [e.event_id for e in platform.document(name).events]


def test_documented_delays() -> None:
    """The documented numbers themselves: first call "up to two minutes", disabled after
    "24 hours" without a request."""
    assert (DOCUMENTED.first_call_delay, DOCUMENTED.idle_period) == (2 * MIN, DAY)
    assert FAST.first_call_delay == timedelta(0)


def test_first_request_enables_after_two_minutes_in_the_documented_profile() -> None:
    """ "enabled for your service the first time you make a request for events ... a delayed
    response in your first call of up to two minutes and you'll start receiving events within
    5 minutes"."""
    platform = make_platform()
    add(platform, "as-0", availability_set="as", receiving=False)
    add(platform, "as-1", availability_set="as")
    platform.advance_to(START + MIN)
    assert platform.touch("as-0") is True
    (event,) = operations.restart(platform, "as-1")
    platform.advance_to(START + 3 * MIN - SECOND)
    assert not platform.receiving("as-0")
    assert shown_ids(platform, "as-0") == []
    platform.advance_to(START + 3 * MIN)
    assert platform.receiving("as-0")
    assert shown_ids(platform, "as-0") == [event.event_id]


def test_a_vm_deleted_during_its_first_call_delay_stays_gone() -> None:
    """The two minutes of "a delayed response in your first call" end for nobody once the
    VM is deleted (deletion without terminate notification): the clock moves past them and
    the VM is not brought back to be shown anything."""
    platform = make_platform()
    add(platform, "vm0", receiving=False)
    assert platform.touch("vm0") is True
    platform.advance_to(START + MIN)
    platform.delete_vm("vm0")
    platform.advance_to(START + 3 * MIN)
    assert platform.now == START + 3 * MIN
    assert platform.vms() == ()
    assert not platform.receiving("vm0")
    assert platform.next_deadline() is None


def test_first_request_enables_at_once_in_the_fast_profile() -> None:
    """SPEC 7: "with the delays taken from the timing profile (zero in the fast profile)"."""
    platform = make_platform(FAST)
    add(platform, "as-0", availability_set="as", receiving=False)
    add(platform, "as-1", availability_set="as")
    (event,) = operations.restart(platform, "as-1")
    assert shown_ids(platform, "as-0") == []
    assert platform.touch("as-0") is True
    assert platform.receiving("as-0")
    assert shown_ids(platform, "as-0") == [event.event_id]


def test_only_the_enabling_request_turns_it_on() -> None:
    """The first request enables; the ones after it, while the VM keeps asking, change
    nothing (SPEC 7; they are the only requests worth journaling)."""
    platform = make_platform()
    add(platform, "vm0", receiving=False)
    assert [platform.touch("vm0") for _ in range(3)] == [True, False, False]
    platform.advance_to(START + MIN)
    assert platform.touch("vm0") is False
    platform.advance_to(START + 2 * MIN)
    assert platform.receiving("vm0")
    assert platform.touch("vm0") is False


def test_24_hours_without_a_request_disables() -> None:
    """ "Scheduled Events is disabled for your service if it doesn't make a request to the
    endpoint for 24 hours"; a request within the 24 hours starts them again."""
    platform = make_platform()
    add(platform, "vm0")
    platform.advance_to(START + DAY - SECOND)
    assert platform.receiving("vm0")
    assert platform.touch("vm0") is False
    platform.advance_to(START + 2 * DAY - 2 * SECOND)
    assert platform.receiving("vm0")
    platform.advance_to(START + 2 * DAY - SECOND)
    assert not platform.receiving("vm0")


def test_a_disabled_vm_is_shown_no_new_events() -> None:
    """SPEC 7 [doc]: after 24 h without a request "the VM gets no events"."""
    platform = make_platform()
    add(platform, "as-0", availability_set="as")
    add(platform, "as-1", availability_set="as")
    platform.advance_to(START + DAY - MIN)
    platform.touch("as-1")
    platform.advance_to(START + DAY)
    (event,) = operations.restart(platform, "as-1")
    assert shown_ids(platform, "as-1") == [event.event_id]
    assert platform.document("as-0").events == ()
    assert platform.document("as-0").incarnation == 1


@pytest.mark.parametrize(("b_receiving", "started"), [(True, False), (False, True)])
def test_a_disabled_vm_is_not_waited_for(b_receiving: bool, started: bool) -> None:
    """SPEC 7 [doc]: a disabled VM "gets no events and nobody waits for its approval"; on
    shared hardware the platform otherwise waits "for all other tenants on the same hardware
    to also approve the job" (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events,
    "High level overview")."""
    platform = make_platform()
    add(platform, "a0", host="h1", subscription_id="tenant-a")
    add(platform, "b0", host="h1", subscription_id="tenant-b", receiving=b_receiving)
    events = operations.maintain_host(platform, "h1")
    mine = next(e for e in events if e.impacts("a0"))
    platform.approve("a0", [mine.event_id])
    expected = EventStatus.STARTED if started else EventStatus.SCHEDULED
    assert [platform.event(e.event_id).event.status for e in events] == [expected] * 2


def test_events_created_while_disabled_arrive_once_enabled_again() -> None:
    """ "you'll start receiving events within 5 minutes" of the first request; an event that
    began while the VM was not asking is still shown while it lasts."""
    platform = make_platform()
    add(platform, "as-0", availability_set="as")
    add(platform, "as-1", availability_set="as")
    platform.advance_to(START + DAY - MIN)
    platform.touch("as-1")
    platform.advance_to(START + DAY)
    (event,) = operations.restart(platform, "as-1")
    platform.advance_to(START + DAY + MIN)
    assert platform.touch("as-0") is True
    assert shown_ids(platform, "as-0") == []
    platform.advance_to(START + DAY + 3 * MIN)
    assert shown_ids(platform, "as-0") == [event.event_id]


def test_a_vm_back_from_idle_keeps_what_it_was_shown_and_then_gets_what_it_missed() -> None:
    """A VM's document is the one record of what it is shown: while it is not asking, the
    events it was shown still change in it (one starts), and once it is on again the events
    created meanwhile follow them, in the order they were created, each shown once."""
    platform = make_platform()
    add(platform, "as-0", availability_set="as")
    add(platform, "as-1", availability_set="as")
    first = platform.schedule(
        EventType.REBOOT, ["as-1"], source=EventSource.PLATFORM, notice=2 * DAY
    )
    platform.advance_to(START + DAY - MIN)
    platform.touch("as-1")
    platform.advance_to(START + DAY)
    assert not platform.receiving("as-0")
    second = platform.schedule(EventType.FREEZE, ["as-1"], source=EventSource.PLATFORM)
    third = platform.schedule(EventType.REDEPLOY, ["as-1"], source=EventSource.PLATFORM)
    platform.approve("as-1", [first.event_id])
    assert shown_ids(platform, "as-0") == [first.event_id]
    assert platform.document("as-0").events[0].status is EventStatus.STARTED
    assert platform.touch("as-0") is True
    platform.advance_to(START + DAY + 2 * MIN)
    document = platform.document("as-0")
    assert [e.event_id for e in document.events] == [
        first.event_id,
        second.event_id,
        third.event_id,
    ]
    assert [e.status for e in document.events] == [
        EventStatus.STARTED,
        EventStatus.SCHEDULED,
        EventStatus.SCHEDULED,
    ]


@pytest.mark.parametrize("timing", [DOCUMENTED, FAST], ids=lambda t: t.name)
def test_first_call_after_idle_keeps_live_events_shown(timing: TimingProfile) -> None:
    """SPEC 2 [doc]: "a finished or cancelled event simply disappears from the array" (so a
    disappearance means finished: "event gone -> recover", SPEC 8) and DocumentIncarnation
    "increases whenever this VM's Events array changes" (documents.py: "whenever, and only
    when"). A VM back after 24 h idle must not be told its pending predicted-failure Redeploy
    is over.

    SPEC 2 [seen]: "when Scheduled Events is re-enabled for a VM after 24 h without requests,
    the incarnation starts afresh (ClusterLabs azure-events-az clears its last-seen
    incarnation for exactly this reason)": the events stay, the counter restarts at 1."""
    platform = make_platform(timing)
    add(platform, "vm0", host="h1")
    platform.schedule(
        EventType.REDEPLOY, ["vm0"], source=EventSource.PLATFORM, notice=timedelta(days=7)
    )
    before = platform.document("vm0")
    assert before.incarnation > FIRST_INCARNATION
    platform.advance_to(START + DAY + MIN)
    assert not platform.receiving("vm0")
    assert platform.touch("vm0") is True
    afresh = Document(FIRST_INCARNATION, before.events)
    assert platform.document("vm0") == afresh
    platform.advance_to(START + DAY + MIN + timing.first_call_delay)
    assert platform.document("vm0") == afresh


def test_re_enablement_resets_incarnation_but_a_request_within_the_idle_period_does_not() -> None:
    """SPEC 2 [seen]: the incarnation starts afresh only on re-enablement after 24 h without
    a request (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and
    disabling": "disabled ... after 24 hours without a request"); one second short of it, the count
    goes on."""
    platform = make_platform(FAST)
    add(platform, "vm0", host="h1")
    platform.schedule(
        EventType.REDEPLOY, ["vm0"], source=EventSource.PLATFORM, notice=timedelta(days=7)
    )
    counted = platform.document("vm0")
    assert counted.incarnation > FIRST_INCARNATION
    platform.advance_to(START + DAY - timedelta(seconds=1))
    assert platform.touch("vm0") is False
    assert platform.document("vm0") is counted


def test_the_idle_period_ends_exactly_at_24_hours() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and disabling":
    Scheduled Events is disabled "after 24 hours without a request": at 24 h it is off, a second
    earlier still on."""
    platform = make_platform(FAST)
    add(platform, "vm0", host="h1")
    platform.advance_to(START + DAY - timedelta(seconds=1))
    assert platform.receiving("vm0")
    platform.advance_to(START + DAY)
    assert not platform.receiving("vm0")
    assert platform.touch("vm0") is True  # the request at exactly 24 h turns it on again


def test_after_a_restart_enabled_vms_count_as_having_just_asked() -> None:
    """A restart of the service keeps only the requests that changed state: the VMs that were
    on must not fall idle because the service was away; those never on stay off."""
    platform = make_platform(FAST)
    add(platform, "on", host="h1")
    add(platform, "never", host="h2", receiving=False)
    platform.advance_to(START + DAY - timedelta(seconds=1))
    platform.assume_requests_now()
    platform.advance_to(START + DAY + timedelta(hours=1))
    assert platform.receiving("on")
    assert not platform.receiving("never")


def test_a_request_arriving_counts_unless_the_vm_is_down() -> None:
    """What a VM's request does (``Platform.arrive``, every request's path): it counts as a
    request, turning Scheduled Events on when it is the first (SPEC 7), and while the VM warms
    up after it ("a delayed response in your first call of up to two minutes") its requests
    still count; a VM down in an impact cannot be asking, so what arrives in its name does not
    count, and 24 hours after its last real request it is disabled all the same."""
    platform = make_platform()
    add(platform, "vm0", receiving=False, host="h1")
    first, turned_on = platform.arrive("vm0")
    assert first == Pause(START + 2 * MIN)
    assert first.warming_up
    assert turned_on is True
    platform.advance_to(START + MIN)
    warming_up, turned_on = platform.arrive("vm0")
    assert (warming_up, turned_on) == (first, False), "the same warm-up, counted"
    platform.advance_to(START + 2 * MIN)
    assert platform.arrive("vm0") == (None, False)
    last_request = START + 2 * MIN
    platform.advance_to(last_request + DAY - MIN)
    (event,) = operations.restart(platform, "vm0")
    platform.approve("vm0", [event.event_id])  # the Reboot starts: vm0 is down
    down, turned_on = platform.arrive("vm0")
    assert down is not None
    assert down.event_type is EventType.REBOOT
    assert turned_on is False
    platform.advance_to(last_request + DAY - SECOND)
    assert platform.receiving("vm0")
    platform.advance_to(last_request + DAY)
    assert not platform.receiving("vm0"), "what arrived while down did not count"
    assert platform.arrive("vm0") == (Pause(START + 2 * MIN + DAY + 2 * MIN), True)


def test_only_a_request_for_events_counts() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and Disabling
    Scheduled Events": "enabled for your service the first time you make a request for events" and
    disabled "if it does not make a request for 24 hours": a request for instance metadata
    (``for_events=False``) turns nothing on, waits for no first-call delay and does not keep the VM
    enabled; only a VM that is down makes it wait."""
    platform = make_platform()
    add(platform, "vm0", receiving=False, host="h1")
    assert platform.arrive("vm0", for_events=False) == (None, False)
    assert not platform.receiving("vm0")
    first, turned_on = platform.arrive("vm0")
    assert (first, turned_on) == (Pause(START + 2 * MIN), True)
    assert platform.arrive("vm0", for_events=False) == (None, False), "not the events' wait"
    platform.advance_to(START + 2 * MIN)
    platform.advance_to(START + 2 * MIN + DAY - SECOND)
    assert platform.arrive("vm0", for_events=False) == (None, False)
    platform.advance_to(START + 2 * MIN + DAY)
    assert not platform.receiving("vm0"), "instance metadata kept nothing on"
    platform.arrive("vm0")
    platform.advance_to(platform.now + 2 * MIN)
    (event,) = operations.restart(platform, "vm0")
    platform.approve("vm0", [event.event_id])
    down, turned_on = platform.arrive("vm0", for_events=False)
    assert down is not None
    assert down.event_type is EventType.REBOOT
    assert turned_on is False


def test_a_request_in_an_unknown_vm_s_name_is_refused_by_name() -> None:
    """A VM that does not exist cannot be touched, and the error says which name."""
    with pytest.raises(UnknownVmError, match="'ghost'"):
        make_platform().touch("ghost")


def test_last_requests_taken_from_a_replaced_platform_hold() -> None:
    """A platform rebuilt from a journal takes when each VM last asked from the one it
    replaces (the journal keeps only the requests that changed state): a VM that asked
    there lately is not idle here, one that did not is, and a name gone since is passed
    over (SPEC 7: turned off "if it does not make a request for 24 hours")."""
    platform = make_platform()
    add(platform, "asked")
    add(platform, "idle")
    later = START + DAY + MIN
    platform.advance_to(later)
    platform.take_requests({"asked": later - MIN, "gone": later})
    assert not platform.touch("asked"), "asked a minute ago"
    assert platform.touch("idle"), "idle for a day: turned on again"

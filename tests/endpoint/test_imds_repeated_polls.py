"""A VM's next poll meets whatever changed since its last one.

The service keeps what a VM's request found at the address it arrived at (the VM,
answerable, its document) and answers the next request there from it while
:meth:`~forewarn.domain.platform.Platform.unchanged_since` says nothing of that VM's changed:
most of a fleet's polls meet nothing new. Each test here polls until that is so, makes one
change a poll must meet, and polls again; the property machine (tests/properties,
``check_changes_counted_by_vm``) holds the counts to every change of the domain's own
operations.
"""

from __future__ import annotations

from datetime import timedelta

from forewarn.domain import operations
from forewarn.domain.events import EventType
from forewarn.server.imds import SCHEDULED_EVENTS_PATH, ImdsRequest

from .conftest import CURRENT, Imds

SECOND = timedelta(seconds=1)


def polled_twice(imds: Imds, vm: str) -> bytes:
    """The body of two polls answered alike: the second one met what the first one found."""
    first, second = imds.get(vm), imds.get(vm)
    assert first.status == second.status == 200
    assert second.body == first.body
    return second.body


def test_a_second_impact_holds_the_next_poll(imds: Imds) -> None:
    """docs/faithfulness.md, impact-again: a second, shorter impact of a Started event,
    with no new document: only the pause tells the poll."""
    imds.add_vm("vm", host="h")
    (event,) = operations.live_migrate(imds.platform, "h")
    assert imds.approve("vm", event.event_id).status == 200
    assert event.duration_seconds == 5  # a live migration's advertised freeze
    imds.advance(6 * SECOND)
    before = polled_twice(imds, "vm")
    operations.impact_again(imds.platform, "vm")
    held = imds.get("vm")
    assert (held.status, held.held_until) == (0, imds.service.now() + 2 * SECOND), "half, whole"
    imds.advance(2 * SECOND)
    assert imds.get("vm").body == before, "the same document once the impact is over"


def test_an_approval_s_impact_holds_the_next_poll(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events: a Reboot approved by its
    only party starts at once, and the VM answers nothing while it reboots (held by default)."""
    imds.add_vm("vm")
    event = imds.schedule(EventType.REBOOT, "vm")
    polled_twice(imds, "vm")
    assert imds.approve("vm", event.event_id).status == 200
    assert imds.get("vm").status == 0


def test_a_poll_after_the_idle_period_starts_afresh(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and Disabling":
    disabled after 24 hours without a request, and the next request enables it again, after the
    first call's delay (SPEC 7), with the DocumentIncarnation started afresh (SPEC 2)."""
    imds.add_vm("vm")
    imds.schedule(EventType.FREEZE, "vm", notice=timedelta(days=3))
    assert b'"DocumentIncarnation":2' in polled_twice(imds, "vm")
    imds.schedule(EventType.FREEZE, "vm", notice=timedelta(days=3))
    assert b'"DocumentIncarnation":3' in polled_twice(imds, "vm")
    imds.advance(imds.platform.timing.idle_period + SECOND)
    warming_up = imds.get("vm")
    assert (warming_up.status, warming_up.held_until) == (
        0,
        imds.service.now() + imds.platform.timing.first_call_delay,
    )
    imds.advance(imds.platform.timing.first_call_delay)
    assert b'"DocumentIncarnation":1' in polled_twice(imds, "vm")


def test_a_deleted_vm_s_next_poll_is_not_answered(imds: Imds) -> None:
    """A deleted VM is gone: nothing answers at its address any more (its next poll, made
    while its last answer was kept, is never answered)."""
    imds.add_vm("vm")
    polled_twice(imds, "vm")
    imds.platform.delete_vm("vm")
    gone = imds.get("vm")
    assert (gone.status, gone.unanswered) == (0, True)


def test_another_vm_s_change_leaves_a_poll_repeated(imds: Imds) -> None:
    """What a VM's poll met holds until something of that VM's changes: a campaign
    elsewhere in the fleet leaves every other VM's repeated poll answered as it was, and
    the VM's own event is met at its very next poll."""
    imds.add_vm("a")
    imds.add_vm("b")
    poll = ImdsRequest(
        method="GET",
        path=SCHEDULED_EVENTS_PATH,
        query=f"api-version={CURRENT}",
        headers={"metadata": "true"},
        body=b"",
        local_address=imds.addresses["a"],
        peer_address="127.0.0.1",
    )
    answer = imds.endpoint.respond(poll)
    assert answer.vm is not None
    assert answer.repeats_under is not None
    imds.schedule(EventType.REBOOT, "b")
    again = imds.endpoint.respond_again(poll, answer.response, answer.vm, answer.repeats_under)
    assert again == imds.service.now(), "b's event is none of a's"
    imds.schedule(EventType.REBOOT, "a")
    again = imds.endpoint.respond_again(poll, answer.response, answer.vm, answer.repeats_under)
    assert again is None, "a's own event: answered afresh"
    assert len(imds.document("a")["Events"]) == 1

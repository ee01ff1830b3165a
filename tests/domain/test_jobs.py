"""Jobs: the events of one platform operation start together (SPEC 3-4).

SPEC 3.2 [doc: the scale sets' terminate-notification page]: scale-set Terminate events "for
one scale set with the same NotBefore" are one job, and "all must be approved before any
proceeds"; a deletion at another moment, or of another set, is a job of its own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from forewarn.domain import operations
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.history import Phase
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


def fleet(*sets: str) -> Platform:
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(9))
    for name in sets:
        platform.add_scale_set(ScaleSet(name, terminate_notification=True))
        for index in range(3):
            platform.add_vm(
                Vm(name=f"{name}_{index}", vm_id=f"{name}{index}", vm_scale_set_name=name)
            )
    return platform


def status(platform: Platform, event_id: str) -> EventStatus:
    return platform.event(event_id).event.status


def test_deletions_of_one_set_at_one_moment_are_one_job() -> None:
    platform = fleet("web")
    (first,) = operations.delete_instances(platform, "web", ["0"])
    (second,) = operations.delete_instances(platform, "web", ["1"])
    assert platform.event(first.event_id).job_id == platform.event(second.event_id).job_id
    platform.approve("web_0", [first.event_id])
    assert status(platform, first.event_id) is EventStatus.SCHEDULED  # waits for its partner
    platform.approve("web_1", [second.event_id])
    assert status(platform, first.event_id) is EventStatus.STARTED
    assert status(platform, second.event_id) is EventStatus.STARTED


def test_a_deletion_a_moment_later_is_a_job_of_its_own() -> None:
    platform = fleet("web")
    (first,) = operations.delete_instances(platform, "web", ["0"])
    platform.advance_to(START + timedelta(seconds=1))
    (later,) = operations.delete_instances(platform, "web", ["1"])
    assert platform.event(first.event_id).job_id != platform.event(later.event_id).job_id
    platform.approve("web_0", [first.event_id])
    assert status(platform, first.event_id) is EventStatus.STARTED
    assert status(platform, later.event_id) is EventStatus.SCHEDULED


def test_deletions_in_two_sets_are_two_jobs() -> None:
    platform = fleet("web", "api")
    (web,) = operations.delete_instances(platform, "web", ["0"])
    (api,) = operations.delete_instances(platform, "api", ["0"])
    assert platform.event(web.event_id).job_id != platform.event(api.event_id).job_id
    platform.approve("web_0", [web.event_id])
    assert status(platform, web.event_id) is EventStatus.STARTED
    assert status(platform, api.event_id) is EventStatus.SCHEDULED


def test_a_started_job_is_closed_to_later_deletions() -> None:
    """Once a job has started, a deletion with what would have been its NotBefore cannot join
    it: it would start at once, with no notice at all."""
    platform = fleet("web")
    (first,) = operations.delete_instances(platform, "web", ["0"])
    platform.approve("web_0", [first.event_id])
    (again,) = operations.delete_instances(platform, "web", ["1"])
    assert platform.event(again.event_id).job_id != platform.event(first.event_id).job_id
    assert status(platform, again.event_id) is EventStatus.SCHEDULED


def test_deletion_is_user_initiated_unless_autoscale_scales_in() -> None:
    """The terminate-notification page (SPEC 6): a user's delete is EventSource User; a scale-in by
    autoscale comes from the Platform."""
    platform = fleet("web")
    (user,) = operations.delete_instances(platform, "web", ["0"])
    (scale_in,) = operations.delete_instances(platform, "web", ["1"], autoscale=True)
    assert user.source is EventSource.USER
    assert scale_in.source is EventSource.PLATFORM


def test_jobs_are_numbered_from_one_in_the_order_they_are_made() -> None:
    """The job number the control API and dashboard show beside each event."""
    platform = fleet("web")
    events = [
        *operations.delete_instances(platform, "web", ["0"]),
        *operations.restart(platform, "web_1"),
        *operations.restart(platform, "web_2"),
    ]
    assert [platform.event(e.event_id).job_id for e in events] == [1, 2, 3]


def test_a_cancelled_job_takes_no_later_deletion() -> None:
    """SPEC 3: same-NotBefore Terminate events of a set are one job; once the platform cancels
    every event of a job (SPEC 4, cancellation), a deletion at the same moment starts a new
    one instead of joining what is gone."""
    platform = fleet("web")
    (first,) = operations.delete_instances(platform, "web", ["0"])
    platform.cancel(first.event_id)
    (second,) = operations.delete_instances(platform, "web", ["1"])
    assert platform.event(second.event_id).job_id == 2


def test_an_events_view_names_who_approved_in_order_each_once_as_it_was() -> None:
    """The control plane's view of an event (``approvedBy``, ``approvedByVms``): the tenants
    whose approval the job has, and the VMs that gave it, in order, each once; a view taken
    earlier stays as it was taken."""
    platform = fleet("web")
    (first,) = operations.delete_instances(platform, "web", ["0"])
    operations.delete_instances(platform, "web", ["1"])  # the job's partner, unapproved
    before = platform.event(first.event_id)
    platform.approve("web_1", [first.event_id])
    platform.approve("web_0", [first.event_id])
    platform.approve("web_1", [first.event_id.lower()])  # again, in another case
    view = platform.event(first.event_id)
    assert (view.event.status, view.approvers) == (EventStatus.SCHEDULED, ("web_1", "web_0"))
    assert view.approvals == frozenset({platform.vm("web_0").tenant})
    assert (before.approvers, before.approvals) == ((), frozenset())


def test_a_published_event_is_a_fact_of_its_history_from_its_creation() -> None:
    """learn.microsoft.com, "Scheduled Events in Event Grid": "By default, scheduled events
    aren't delivered to Event Grid"; a VM whose policy publishes them has each event's
    states recorded (Event Grid and Resource Graph read them), Scheduled first, where the
    event is filed; another VM's are not."""
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(9))
    platform.add_vm(Vm(name="db0", vm_id="db0", policy=ScheduledEventsPolicy(publish=True)))
    platform.add_vm(Vm(name="db1", vm_id="db1"))
    published = platform.schedule(EventType.REBOOT, ("db0",), source=EventSource.PLATFORM)
    quiet = platform.schedule(EventType.REBOOT, ("db1",), source=EventSource.PLATFORM)
    change = platform.history.get(published.event_id)
    assert change is not None
    assert (change.phase, change.event) == (Phase.SCHEDULED, published)
    assert change.where.target.endswith("/virtualMachines/db0")
    assert platform.history.get(quiet.event_id) is None


def test_an_event_for_vms_all_down_starts_approved_by_their_tenants() -> None:
    """``allInstancesDown.automaticallyApprove`` (default true): "Specifies if Scheduled
    Events should be auto-approved when all instances are down" (Compute REST reference,
    ``AllInstancesDown``). A VM in the middle of a reboot cannot approve: its next event
    starts at once, with its tenant's approval."""
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(9))
    platform.add_vm(Vm(name="vm", vm_id="vm"))
    platform.schedule(EventType.REBOOT, ("vm",), source=EventSource.PLATFORM, already_started=True)
    later = platform.schedule(EventType.REDEPLOY, ("vm",), source=EventSource.PLATFORM)
    view = platform.event(later.event_id)
    assert view.event.status is EventStatus.STARTED
    assert view.approvals == view.parties == frozenset({platform.vm("vm").tenant})

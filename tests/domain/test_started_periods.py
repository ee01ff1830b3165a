"""How long an event stays Started: per kind in a timing profile, or per event.

The figures are the captured flows of Microsoft's Scheduled Events mock server
(github.com/Azure-Samples/scheduled-events-mock-server, ``main.py``, the ``scenarios``
table: ``StartedDurationInMinutes`` 5 for "Live Migration", 10 for "User Reboot", "Host Agent
Maintenance", "Redeploy" and "User Redeploy"; the "Dev Timing" variants read those minutes as
seconds), and the documentation's typical "EventStatus:"Started" to Completed (event removed
from Events array): 10 minutes" (learn.microsoft.com .../scheduled-events, "High level
overview").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from forewarn.domain import descriptions, operations
from forewarn.domain.errors import InvalidEventError
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.kinds import EventKind, kind_of
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DEV, DOCUMENTED, FAST, PROFILES, TimingProfile
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


def platform_with(timing: TimingProfile, *names: str) -> Platform:
    platform = Platform(START, timing=timing, new_event_id=EventIdFactory(3))
    for name in names:
        platform.add_vm(Vm(name=name, vm_id=f"id-{name}", host=f"host-{name}"))
    return platform


def started_for(platform: Platform, vm: str, **kwargs: Any) -> timedelta:
    """How long ``vm``'s only event stays in its document once Started, second by second."""
    (event,) = platform.document(vm).events
    assert event.status is EventStatus.STARTED
    began = platform.now
    moment = began
    while platform.document(vm).events:
        moment += SECOND
        platform.advance_to(moment)
    return moment - began


# -- kinds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "description", "kind"),
    [
        (EventType.FREEZE, descriptions.LIVE_MIGRATION, EventKind.LIVE_MIGRATION),
        (EventType.FREEZE, descriptions.HOST_MAINTENANCE, EventKind.HOST_UPDATE),
        (EventType.REBOOT, descriptions.HOST_MAINTENANCE, EventKind.HOST_MAINTENANCE),
        (EventType.REBOOT, descriptions.USER_RESTART, EventKind.USER_REBOOT),
        (EventType.REDEPLOY, descriptions.USER_REDEPLOY, EventKind.USER_REDEPLOY),
        (EventType.REDEPLOY, descriptions.VM_FAILURE, EventKind.FAILURE_REDEPLOY),
        (EventType.REBOOT, descriptions.VM_FAILURE, EventKind.FAILURE_REBOOT),
        (EventType.REDEPLOY, descriptions.EMERGENCY_REPAIR, EventKind.PREDICTED_FAILURE),
        (EventType.PREEMPT, "", EventKind.EVICTION),
        (EventType.TERMINATE, "anything", EventKind.DELETION),
        (EventType.FREEZE, "a text of its own", None),
        (EventType.REBOOT, "", None),
    ],
)
def test_an_event_is_of_the_kind_its_type_and_description_name(
    event_type: EventType, description: str, kind: EventKind | None
) -> None:
    """The Description texts are the documented ones
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event properties",
    Description); the mock server's flows pair them with these types."""
    assert kind_of(event_type, description) is kind


# -- the documented profile ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "description", "period"),
    [
        (EventType.FREEZE, descriptions.LIVE_MIGRATION, 5 * MINUTE),  # "Live Migration"
        (EventType.REBOOT, descriptions.USER_RESTART, 10 * MINUTE),  # "User Reboot"
        (EventType.FREEZE, descriptions.HOST_MAINTENANCE, 10 * MINUTE),  # "Host Agent Maint."
        (EventType.REDEPLOY, descriptions.VM_FAILURE, 10 * MINUTE),  # "Redeploy"
        (EventType.REDEPLOY, descriptions.USER_REDEPLOY, 10 * MINUTE),  # "User Redeploy"
        (EventType.REBOOT, "", 10 * MINUTE),  # the documented typical timeline
    ],
)
def test_documented_started_periods_are_the_captured_ones(
    event_type: EventType, description: str, period: timedelta
) -> None:
    assert DOCUMENTED.started_period_for(event_type, description) == period


@pytest.mark.parametrize(
    ("profile", "expected"),
    # dev: the 5 s Freeze, then the 5 s read from 5 minutes (TimingProfile.started_after_impact)
    [(DOCUMENTED, 5 * MINUTE), (DEV, 5 * SECOND + 5 * SECOND)],
)
def test_a_live_migration_is_removed_after_its_kinds_started_period(
    profile: TimingProfile, expected: timedelta
) -> None:
    """ "Live Migration": Started for 5 minutes ("Dev Timing": 5 seconds, counted once the VM
    runs again), then Completed."""
    platform = platform_with(profile, "vm0")
    (event,) = operations.live_migrate(platform, "host-vm0")
    platform.approve("vm0", [event.event_id])
    assert started_for(platform, "vm0") == expected


def test_a_host_update_keeps_the_general_started_period() -> None:
    """ "Host Agent Maintenance": a Freeze too, Started for 10 minutes."""
    platform = platform_with(DOCUMENTED, "vm0")
    (event,) = operations.update_host(platform, "host-vm0")
    platform.approve("vm0", [event.event_id])
    assert started_for(platform, "vm0") == 10 * MINUTE


def test_dev_profile_reads_the_documented_minutes_as_seconds() -> None:
    """The mock server's "Dev Timing" scenarios: "instead of a 15 minute warning period
    before the live migration, the scenario will only give 15 seconds" (its README)."""
    for event_type, notice in DOCUMENTED.minimum_notice.items():
        assert DEV.notice_for(event_type) == notice / 60
    assert DEV.started_period == DOCUMENTED.started_period / 60
    assert dict(DEV.started_periods) == {k: v / 60 for k, v in DOCUMENTED.started_periods.items()}
    assert DEV.first_call_delay == DOCUMENTED.first_call_delay / 60
    assert DEV.predicted_failure_notice == DOCUMENTED.predicted_failure_notice / 60
    assert DEV.impact == DOCUMENTED.impact, "impacts are seconds already"
    # read as seconds, a period no longer than an impact would be spent paused by it
    assert (DEV.started_after_impact, DOCUMENTED.started_after_impact) == (True, False)
    assert PROFILES["dev"] is DEV


def test_the_fast_profile_has_one_started_period() -> None:
    assert not FAST.started_periods
    assert FAST.started_period_for(EventType.FREEZE, descriptions.LIVE_MIGRATION) == 2 * SECOND


@pytest.mark.parametrize(
    ("operation", "expected"),
    [
        # the live migration's Freeze: DurationInSeconds 5, then the 2 s period
        (operations.live_migrate, 5 * SECOND + 2 * SECOND),
        # a host's Reboot: the profile's 1 s impact, then the 2 s period
        (operations.maintain_host, 1 * SECOND + 2 * SECOND),
    ],
)
def test_the_fast_profile_counts_the_started_period_after_the_impact(
    operation: Any, expected: timedelta
) -> None:
    """As the dev profile does (docs/flows.md, "Dev timing"): a period of seconds beside an
    impact of seconds. Counted from Started, the fast profile's 2 s ended with a live
    migration's 5 s Freeze ("The Virtual Machine is scheduled to pause for a few seconds",
    learn.microsoft.com/azure/virtual-machines/scheduled-events-overview, "Scheduled Event
    properties"), so a VM paused by it never read Started, where every captured flow of the
    mock server shows Started."""
    assert FAST.started_after_impact
    platform = platform_with(FAST, "vm0")
    (event,) = operation(platform, "host-vm0")
    platform.approve("vm0", [event.event_id])
    assert started_for(platform, "vm0") == expected


# -- overrides -------------------------------------------------------------------------------


def test_one_kinds_started_period_can_be_overridden() -> None:
    timing = DOCUMENTED.with_overrides(
        {"started_period.user-reboot": 30 * SECOND, "started_period": MINUTE}
    )
    assert timing.started_period_for(EventType.REBOOT, descriptions.USER_RESTART) == 30 * SECOND
    assert timing.started_period_for(EventType.FREEZE, descriptions.LIVE_MIGRATION) == 5 * MINUTE
    assert timing.started_period_for(EventType.FREEZE, descriptions.HOST_MAINTENANCE) == MINUTE
    assert DOCUMENTED.started_period_for(EventType.REBOOT, descriptions.USER_RESTART) == (
        10 * MINUTE
    ), "the profile itself is untouched"


def test_an_unknown_kind_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown event kind in 'started_period\.migration'") as e:
        DOCUMENTED.with_overrides({"started_period.migration": SECOND})
    assert "live-migration" in str(e.value)


# -- per event ------------------------------------------------------------------------------


def test_an_event_made_with_its_own_started_period_keeps_it() -> None:
    platform = platform_with(DOCUMENTED, "vm0")
    platform.schedule(
        EventType.FREEZE,
        ["vm0"],
        source=EventSource.PLATFORM,
        description=descriptions.LIVE_MIGRATION,
        duration_seconds=5,
        already_started=True,
        started_for=timedelta(seconds=42),
    )
    assert started_for(platform, "vm0") == 42 * SECOND


def test_an_events_own_started_period_never_ends_it_before_its_impact() -> None:
    """SPEC 4: "Started --impact, then done--> (removed)"."""
    platform = platform_with(DOCUMENTED, "vm0")
    platform.schedule(
        EventType.FREEZE,
        ["vm0"],
        source=EventSource.PLATFORM,
        duration_seconds=9,
        already_started=True,
        started_for=timedelta(seconds=2),
    )
    assert started_for(platform, "vm0") == 9 * SECOND


def test_a_negative_started_period_is_refused() -> None:
    platform = platform_with(DOCUMENTED, "vm0")
    with pytest.raises(InvalidEventError, match="negative"):
        platform.schedule(EventType.REBOOT, ["vm0"], source=EventSource.USER, started_for=-SECOND)
    assert platform.document("vm0").events == ()

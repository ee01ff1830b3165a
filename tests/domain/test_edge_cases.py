"""The documented edge cases of an event's life, as operations.

learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event properties",
EventStatus: "In rare cases a VM scheduled for EventType:"Reboot" may experience a freeze event
instead of a reboot" and "While the event is still in EventStatus:"Started" state, there may be
another impact of a shorter duration than what was advertised". Handlers must survive both; these
make them happen.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from forewarn.domain import operations
from forewarn.domain.errors import InvalidOperationError, UnknownVmError
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
SECOND = timedelta(seconds=1)


@pytest.fixture
def platform() -> Platform:
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(9))
    for name in ("a", "b"):
        platform.add_vm(Vm(name=name, vm_id=f"id-{name}", host=f"h-{name}"))
    return platform


def at(platform: Platform, seconds: float) -> None:
    platform.advance_to(START + seconds * SECOND)


def test_a_reboot_that_freezes_instead_pauses_for_a_freeze_and_still_says_reboot(
    platform: Platform,
) -> None:
    (event,) = operations.restart(platform, "a")
    operations.freeze_instead(platform, "a")
    platform.approve("a", [event.event_id])
    (shown,) = platform.document("a").events
    assert (shown.event_type, shown.status) == (EventType.REBOOT, EventStatus.STARTED)
    pause = platform.pause("a")
    assert pause is not None
    assert pause.event_type is EventType.FREEZE, "hooks and impact policy see a freeze"
    assert pause.until == START + operations.LIVE_MIGRATION_SECONDS * SECOND
    assert DOCUMENTED.impact > operations.LIVE_MIGRATION_SECONDS * SECOND
    at(platform, operations.LIVE_MIGRATION_SECONDS)
    assert platform.reachable("a"), "back after the freeze, before a reboot would be"
    (shown,) = platform.document("a").events
    assert shown.event_type is EventType.REBOOT


def test_freeze_instead_applies_to_one_reboot_only(platform: Platform) -> None:
    (first,) = operations.restart(platform, "a")
    operations.freeze_instead(platform, "a")
    platform.approve("a", [first.event_id])
    at(platform, 3600)
    (second,) = operations.restart(platform, "a")
    platform.approve("a", [second.event_id])
    pause = platform.pause("a")
    assert pause is not None
    assert (pause.event_type, pause.until) == (EventType.REBOOT, platform.now + DOCUMENTED.impact)


def test_freeze_instead_only_for_the_named_vm(platform: Platform) -> None:
    event = platform.schedule(EventType.REBOOT, ["a", "b"], source=EventSource.PLATFORM)
    operations.freeze_instead(platform, "b")
    platform.approve("a", [event.event_id])
    assert platform.pause("a") is not None
    assert platform.pause("a").event_type is EventType.REBOOT  # type: ignore[union-attr]
    assert platform.pause("b").event_type is EventType.FREEZE  # type: ignore[union-attr]


def test_freeze_instead_needs_a_scheduled_reboot(platform: Platform) -> None:
    with pytest.raises(InvalidOperationError, match=r"^'a' has no Scheduled Reboot"):
        operations.freeze_instead(platform, "a")
    (redeploy,) = operations.redeploy(platform, "a")
    with pytest.raises(InvalidOperationError, match="no Scheduled Reboot"):
        operations.freeze_instead(platform, "a")
    (reboot,) = operations.restart(platform, "b")
    platform.approve("b", [reboot.event_id])
    with pytest.raises(InvalidOperationError, match="no Scheduled Reboot"):
        operations.freeze_instead(platform, "b")
    with pytest.raises(UnknownVmError):
        operations.freeze_instead(platform, "ghost")
    del redeploy


def test_a_second_shorter_impact_while_started(platform: Platform) -> None:
    (event,) = operations.live_migrate(platform, "h-a")
    platform.approve("a", [event.event_id])
    at(platform, 5)
    assert platform.reachable("a")
    before = platform.document("a")
    operations.impact_again(platform, "a")
    assert platform.document("a") == before, "no new event, no new incarnation"
    pause = platform.pause("a")
    assert pause is not None
    assert (pause.until, pause.event_type, pause.event_id) == (
        START + 7 * SECOND,
        EventType.FREEZE,
        event.event_id,
    ), "half the advertised 5 s, whole seconds"
    assert set(platform.impacts()) == {"a"}
    at(platform, 7)  # its end, which no deadline marks: the same reading as the pause's
    assert platform.reachable("a")
    assert platform.pause("a") is None
    assert platform.impacts() == {}
    assert platform.pause("b") is None


def test_impact_again_is_refused_without_a_started_event_or_during_the_impact(
    platform: Platform,
) -> None:
    with pytest.raises(InvalidOperationError, match=r"^'a' has no Started event"):
        operations.impact_again(platform, "a")
    (event,) = operations.restart(platform, "a")
    with pytest.raises(InvalidOperationError, match="no Started event"):
        operations.impact_again(platform, "a")
    platform.approve("a", [event.event_id])
    with pytest.raises(InvalidOperationError, match=r"^'a' is still in its impact$"):
        operations.impact_again(platform, "a")
    at(platform, DOCUMENTED.impact.total_seconds())
    operations.impact_again(platform, "a")
    pause = platform.pause("a")
    assert pause is not None
    assert pause.until == platform.now + 3 * SECOND, "half of the 7 s reboot, whole seconds"
    with pytest.raises(UnknownVmError):
        operations.impact_again(platform, "ghost")


def test_no_second_impact_for_an_event_that_advertises_none(platform: Platform) -> None:
    event = platform.schedule(
        EventType.FREEZE, ["a"], source=EventSource.PLATFORM, duration_seconds=1
    )
    platform.approve("a", [event.event_id])
    at(platform, 1)
    with pytest.raises(InvalidOperationError, match="advertises no impact to fall short of"):
        operations.impact_again(platform, "a")


def test_freeze_instead_waits_for_the_reboot_past_other_events(platform: Platform) -> None:
    """The mark belongs to the Reboot: a live migration that starts first is a live
    migration, and the Reboot still freezes instead."""
    (reboot,) = operations.restart(platform, "a")
    operations.freeze_instead(platform, "a")
    (migration,) = operations.live_migrate(platform, "h-a")
    platform.approve("a", [migration.event_id])
    assert platform.pause("a").until == START + 5 * SECOND  # type: ignore[union-attr]
    at(platform, 60)
    platform.approve("a", [reboot.event_id])
    pause = platform.pause("a")
    assert pause is not None
    assert (pause.event_type, pause.until) == (EventType.FREEZE, START + 65 * SECOND)

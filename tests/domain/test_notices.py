"""Each operation's notice is its own (SPEC 4, "Event Scheduling").

The OS image upgrade gives the set's ``osImageNotification`` notice (the profile's
``os_image_notice``), a predicted hardware failure days ahead, a Terminate the set's
``notBeforeTimeout``; none of them takes the Reboot minimum by accident. The durations are
set apart here so that a notice taken from the wrong rule shows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from forewarn.domain import operations
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
TIMING = DOCUMENTED.with_overrides(
    {
        "os_image_notice": timedelta(minutes=23),
        "predicted_failure_notice": timedelta(days=3),
    }
)


def platform() -> Platform:
    built = Platform(START, timing=TIMING, new_event_id=EventIdFactory(3))
    built.add_scale_set(
        ScaleSet(
            "web",
            terminate_notification=True,
            terminate_timeout=timedelta(minutes=11),
            os_image_notification=True,
        )
    )
    for index in range(2):
        built.add_vm(Vm(name=f"web_{index}", vm_id=f"w{index}", vm_scale_set_name="web"))
    built.add_vm(Vm(name="app", vm_id="app", host="h1"))
    return built


def test_an_os_image_upgrade_gives_its_own_notice() -> None:
    built = platform()
    (event,) = operations.os_image_upgrade(built, "web", ["0"])
    assert event.not_before == START + timedelta(minutes=23)


def test_a_terminate_gives_the_sets_not_before_timeout() -> None:
    built = platform()
    (event,) = operations.delete_instances(built, "web", ["1"])
    assert event.not_before == START + timedelta(minutes=11)


def test_a_predicted_failure_gives_days_of_notice() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events: for a predicted hardware
    failure "Azure tries to give 7 days' advance notice" (here the profile says 3)."""
    built = platform()
    (event,) = operations.predict_failure(built, "h1")
    assert event.not_before == START + timedelta(days=3)

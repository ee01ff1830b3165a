"""Only requests for events turn Scheduled Events on and keep it on (SPEC 7).

learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and Disabling Scheduled
Events": "Scheduled Events is enabled for your service the first time you make a request for events.
You should expect a delayed response in your first call of up to two minutes." and "Scheduled Events
is disabled for your service if it does not make a request for 24 hours." Both are about requests
for events: software reading instance metadata first (a cluster agent, a drainer reading its node
name) is answered at once and turns nothing on, and a VM that only reads instance metadata
is not kept enabled by it.
"""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest

from forewarn.domain.events import EventType

from .conftest import Imds

INSTANCE = "/metadata/instance"
VERSIONS = "/metadata/versions"
OTHER_PATHS = (INSTANCE, VERSIONS)
HOUR = timedelta(hours=1)


def other(imds: Imds, vm: str, path: str) -> int:
    """A request for instance metadata or the versions; its status."""
    query = "api-version=2021-02-01" if path == INSTANCE else ""
    return imds.request("GET", vm, path=path, query=query).status


@pytest.mark.parametrize("path", OTHER_PATHS)
def test_instance_metadata_first_is_answered_at_once_and_turns_nothing_on(
    imds: Imds, path: str
) -> None:
    imds.add_vm("quiet", receiving=False)
    assert other(imds, "quiet", path) == 200
    assert not imds.service.vm_state("quiet").receiving
    imds.advance(imds.platform.timing.first_call_delay * 3)
    assert not imds.service.vm_state("quiet").receiving, "nothing was turned on meanwhile"
    # The first request for events is the one that waits.
    first = imds.get("quiet")
    assert (first.status, first.held_until) == (
        0,
        imds.service.now() + imds.platform.timing.first_call_delay,
    )


def test_the_first_call_is_held_to_be_answered_late_not_dropped(imds: Imds) -> None:
    """The first call: "You should expect a delayed response in your first call". It is held until
    the delay ends, when the transport answers it, never left unanswered as a deleted VM's
    is nor reset, and it carries no bytes of its own meanwhile."""
    imds.add_vm("warming", receiving=False)
    first = imds.get("warming")
    assert (first.status, first.unanswered, first.reset, first.body) == (0, False, False, b"")
    assert first.held_until is not None
    imds.advance(first.held_until - imds.service.now())
    assert imds.get("warming").status == 200


def test_while_the_first_call_waits_instance_metadata_is_answered(imds: Imds) -> None:
    """The delay is the events' first call's: the VM is up, and IMDS answers it."""
    imds.add_vm("warming", receiving=False)
    assert imds.get("warming").held_until is not None
    assert other(imds, "warming", INSTANCE) == 200
    assert imds.get("warming").held_until is not None, "still warming up"


@pytest.mark.parametrize("path", OTHER_PATHS)
def test_polling_only_instance_metadata_does_not_keep_scheduled_events_on(
    imds: Imds, path: str
) -> None:
    imds.add_vm("vm")
    imds.schedule(EventType.FREEZE, "vm", notice=timedelta(days=3))
    assert imds.document("vm")["DocumentIncarnation"] == 2
    for _ in range(24):
        imds.advance(HOUR)
        assert other(imds, "vm", path) == 200
    assert not imds.service.vm_state("vm").receiving, "24 hours without a request for events"
    again = imds.get("vm")
    assert again.status == 0
    assert again.held_until is not None, "the first call again"
    imds.advance(imds.platform.timing.first_call_delay)
    assert imds.document("vm")["DocumentIncarnation"] == 1, "re-enabled: afresh (SPEC 2)"


def test_polling_events_keeps_it_on(imds: Imds) -> None:
    """The counterpart: a request for events within each 24 hours keeps it on."""
    imds.add_vm("vm")
    for _ in range(48):
        imds.advance(HOUR)
        assert imds.get("vm").status == 200
    assert imds.service.vm_state("vm").receiving


def test_a_vm_down_in_an_impact_holds_instance_metadata_too(imds: Imds) -> None:
    """During an impact nothing inside the VM runs: whatever it asks completes afterwards."""
    imds.add_vm("vm")
    event = imds.schedule(EventType.REBOOT, "vm", started=True)
    response = imds.request("GET", "vm", path=INSTANCE, query="api-version=2021-02-01")
    assert response.status == 0
    assert response.held_until is not None
    imds.advance(response.held_until - imds.service.now())
    answered = imds.request("GET", "vm", path=INSTANCE, query="api-version=2021-02-01")
    assert orjson.loads(answered.body)["compute"]["name"] == "vm"
    assert event.event_type is EventType.REBOOT

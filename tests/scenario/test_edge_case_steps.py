"""The documented edge cases as scenario steps and from the pytest plugin, both built from the
operation registry (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event
properties", EventStatus)."""

from __future__ import annotations

from datetime import timedelta

from forewarn.testing import ForewarnPlatform

from .scenario_support import run_text


def test_a_reboot_that_freezes_instead_as_a_scenario_step() -> None:
    """ "In rare cases a VM scheduled for EventType:"Reboot" may experience a freeze event
    instead of a reboot": the VM is back after a 5 s freeze, though the event says Reboot."""
    result = run_text(
        "steps:\n"
        "  - restart: WestNO_0\n"
        "  - freeze-instead: WestNO_0\n"
        "  - approve: {vm: WestNO_0, events: all}\n"
        "  - expect: {vm: WestNO_0, events: [{EventType: Reboot, EventStatus: Started}],"
        " reachable: false}\n"
        "  - advance: 5s\n"
        "  - expect: {vm: WestNO_0, reachable: true}\n",
        profile="documented",
    )
    assert result.failure is None, result.failure


def test_a_second_shorter_impact_as_a_scenario_step() -> None:
    """ "While the event is still in EventStatus:"Started" state, there may be another impact
    of a shorter duration than what was advertised"."""
    result = run_text(
        "steps:\n"
        "  - host: {live-migrate: h1}\n"
        "  - approve: {vm: WestNO_0, events: all}\n"
        "  - advance: 5s\n"
        "  - expect: {vm: WestNO_0, reachable: true, events: [{EventStatus: Started}]}\n"
        "  - impact-again: WestNO_0\n"
        "  - expect: {vm: WestNO_0, reachable: false, events: [{EventStatus: Started}]}\n"
        "  - advance: 2s\n"
        "  - expect: {vm: WestNO_0, reachable: true}\n",
        profile="documented",
    )
    assert result.failure is None, result.failure


def test_the_plugin_has_both_edge_cases() -> None:
    with ForewarnPlatform() as platform:
        (event,) = platform.restart("vm0")
        assert platform.freeze_instead("vm0") == ()
        with platform.client() as client:
            client.approve(event.event_id)
        assert not platform.vm_state("vm0").reachable
        platform.advance(timedelta(seconds=5))
        assert platform.vm_state("vm0").reachable, "a 5 s freeze, not the 7 s reboot"
        assert platform.impact_again("vm0") == ()
        assert not platform.vm_state("vm0").reachable

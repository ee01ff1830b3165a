"""State survives a restart: replaying the journal rebuilds the same platform.

SPEC 2: DocumentIncarnation "never goes backwards, not even across a service restart"
[ours: restart]; issue text: no event or approval is lost and pending NotBefore times hold.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from forewarn.commands import HostOperation, Restart, StartCampaign
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.events import EventStatus
from forewarn.server.runner import ServeSettings
from forewarn.server.state import StateMismatchError, open_service
from forewarn.service import ScheduledEventsService

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def settings(data_dir: Path, **changes: object) -> ServeSettings:
    values: dict[str, object] = {
        "fleet": EXAMPLES / "fleet.yaml",
        "clock": "manual",
        "data_dir": data_dir,
        "seed": 11,
    }
    values.update(changes)
    return ServeSettings(**values)  # type: ignore[arg-type]


def snapshot(service: ScheduledEventsService) -> dict[str, bytes]:
    service.catch_up()
    return {vm.name: service.document_bytes(vm.name, CURRENT_VERSION) for vm in service.vms()}


def test_restart_rebuilds_documents_byte_for_byte(tmp_path: Path) -> None:
    first = open_service(settings(tmp_path))
    first.execute(HostOperation("h1", "live-migrate"))
    first.execute(HostOperation("h1", "update"))
    (reboot,) = first.execute(Restart("WestNO_0"))
    first.approve("WestNO_1", [reboot.event_id])
    first.advance_clock(timedelta(minutes=5))
    before = snapshot(first)
    now_before = first.now()
    assert first.journal is not None
    first.journal.close()

    second = open_service(settings(tmp_path))
    assert second.now() == now_before
    assert snapshot(second) == before
    # the pending Freeze still starts at its NotBefore, 15 minutes after it was scheduled
    second.advance_clock(timedelta(minutes=10) - timedelta(seconds=1))
    assert {e.event.status for e in second.events() if e.event.event_type.value == "Freeze"} == {
        EventStatus.SCHEDULED
    }
    second.advance_clock(timedelta(seconds=1))
    freeze = [e for e in second.events() if e.event.event_type.value == "Freeze"]
    assert freeze[0].event.status is EventStatus.STARTED
    incarnation = second.document("WestNO_0").incarnation
    assert incarnation > int(before["WestNO_0"].split(b",")[0].split(b":")[1])
    assert second.journal is not None
    second.journal.close()


def test_campaign_goes_on_after_restart(tmp_path: Path) -> None:
    first = open_service(settings(tmp_path, profile="fast"))
    first.execute(StartCampaign())
    first.advance_clock(timedelta(seconds=3))
    assert first.campaigns()
    assert first.journal is not None
    first.journal.close()
    second = open_service(settings(tmp_path))  # profile comes from the data directory
    assert second.clock_status().profile == "fast"
    assert second.campaigns()
    second.advance_clock(timedelta(seconds=60))
    assert second.campaigns() == ()
    assert second.events() == ()
    assert second.journal is not None
    second.journal.close()


def test_other_fleet_or_seed_is_refused(tmp_path: Path) -> None:
    first = open_service(settings(tmp_path))
    assert first.journal is not None
    first.journal.close()
    other = tmp_path / "other.yaml"
    other.write_text("vms: [{name: solo}]\n")
    with pytest.raises(StateMismatchError, match="another fleet"):
        open_service(settings(tmp_path, fleet=other))
    with pytest.raises(StateMismatchError, match="seed"):
        open_service(settings(tmp_path, seed=12))


def test_re_enablement_resets_the_incarnation_and_a_restart_replays_it(tmp_path: Path) -> None:
    """SPEC 2 [seen]: a VM re-enabled after 24 h without requests starts its
    DocumentIncarnation afresh (ClusterLabs azure-events-az forgets its last incarnation for
    this); a restart of forewarn itself never makes it go backwards [ours]: the replayed
    journal rebuilds the reset, and the restart is no re-enablement."""
    first = open_service(settings(tmp_path, timing_overrides=(("first_call_delay", timedelta(0)),)))
    first.execute(HostOperation("h1", "predict-failure"))  # a Redeploy days ahead
    first.catch_up()
    counted = first.document("WestNO_0").incarnation
    assert counted > 1
    first.advance_clock(timedelta(hours=25))
    assert first.vm_request("WestNO_0") is None
    assert first.document("WestNO_0").incarnation == 1
    before = snapshot(first)
    assert first.journal is not None
    first.journal.close()

    second = open_service(
        settings(tmp_path, timing_overrides=(("first_call_delay", timedelta(0)),))
    )
    assert snapshot(second) == before
    assert second.vm_request("WestNO_0") is None
    assert snapshot(second) == before


def test_a_repeated_request_that_re_enables_is_journaled(tmp_path: Path) -> None:
    """The same rule as above for a VM whose requests are known by its address (each poll
    after its first only counts as a request, ScheduledEventsService.request_again): the
    poll that re-enables it after 24 h is journaled, so a restart replays the fresh
    DocumentIncarnation rather than going back to the old one."""
    no_delay = (("first_call_delay", timedelta(0)),)
    first = open_service(settings(tmp_path, timing_overrides=no_delay))
    first.execute(HostOperation("h1", "predict-failure"))  # a Redeploy days ahead
    for _ in range(2):  # the second request is known by the address the first arrived at
        arrival = first.request_from("127.0.0.2", "127.0.0.1", CURRENT_VERSION)
        assert arrival is not None
        assert arrival.repeats_under is not None
    counted = first.document("WestNO_0").incarnation
    assert counted > 1
    first.advance_clock(timedelta(hours=25))
    arrival = first.request_from("127.0.0.2", "127.0.0.1", CURRENT_VERSION)
    assert arrival is not None
    assert first.document("WestNO_0").incarnation == 1
    before = snapshot(first)
    assert first.journal is not None
    first.journal.close()

    second = open_service(settings(tmp_path, timing_overrides=no_delay))
    assert snapshot(second) == before
    assert second.journal is not None
    second.journal.close()

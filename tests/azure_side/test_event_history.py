"""Every state a published event reaches is a fact of the platform, replayed alike.

Sources: learn.microsoft.com, "Scheduled Events overview", "Scheduled Events States":
EventStatus ``Completed`` "(Event Grid and ARG only) The event was completed successfully after
the maintenance operations was performed", ``Canceled`` "(Event Grid and ARG only): The
scheduled impact won't proceed"; "an event will never move backwards from started to scheduled
or restart after being marked completed"; "Auto Approve User Initiated Scheduled Events": "only
events with EventStatus:Started and EventStatus:Completed are created". "Scheduled Events in
Event Grid": "By default, scheduled events aren't delivered to Event Grid".
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from azure_support import FLEET, START

from forewarn.commands import CancelEvent, Restart
from forewarn.domain.history import EventChange, EventHistory, Phase
from forewarn.server.runner import ServeSettings
from forewarn.server.state import open_state
from forewarn.testing import ForewarnPlatform


def phases(changes: list[EventChange], event_id: str) -> list[str]:
    return [c.phase.value for c in changes if c.event.event_id == event_id]


def recorded(platform: ForewarnPlatform) -> list[EventChange]:
    changes: list[EventChange] = []
    platform.service.on_published(changes.append)
    return changes


def test_a_restart_is_scheduled_then_started_then_completed() -> None:
    with ForewarnPlatform(fleet=FLEET, start=START, seed=5) as platform:
        changes = recorded(platform)
        (event,) = platform.restart("db0")
        platform.advance(timedelta(minutes=15))
        assert phases(changes, event.event_id) == ["Scheduled", "Started"]
        platform.advance(timedelta(minutes=10))
        assert phases(changes, event.event_id) == ["Scheduled", "Started", "Completed"]
        completed = changes[-1]
        assert completed.at == START + timedelta(minutes=25)
        assert completed.where.target.endswith("/virtualMachines/db0")
        assert [c.sequence for c in changes] == [1, 2, 3]


def test_a_cancel_is_scheduled_then_canceled() -> None:
    with ForewarnPlatform(fleet=FLEET, start=START, seed=5) as platform:
        changes = recorded(platform)
        (event,) = platform.restart("db1")
        platform.cancel(event)
        assert phases(changes, event.event_id) == ["Scheduled", "Canceled"]
        assert changes[-1].event.not_before is not None  # as it was shown, Scheduled


def test_an_auto_approved_reboot_is_started_then_completed_only() -> None:
    with ForewarnPlatform(fleet=FLEET, start=START, seed=5) as platform:
        changes = recorded(platform)
        (event,) = platform.restart("solo")
        platform.advance(timedelta(minutes=10))
        assert phases(changes, event.event_id) == ["Started", "Completed"]


def test_a_vm_that_does_not_publish_makes_no_change() -> None:
    with ForewarnPlatform(fleet=FLEET, start=START, seed=5) as platform:
        changes = recorded(platform)
        platform.restart("quiet")
        platform.advance(timedelta(minutes=30))
        assert changes == []
        assert len(platform.service.published()) == 0


def test_finished_events_kept_are_bounded_oldest_first() -> None:
    with ForewarnPlatform(fleet=FLEET, start=START, seed=5) as platform:
        changes = recorded(platform)
        for vm in ("db0", "web_0", "web_1"):
            platform.restart(vm)
        platform.advance(timedelta(hours=1))
    history = EventHistory(finished_kept=2)
    for change in changes:
        history.record(change.at, change.phase, change.event, change.where)
    kept = list(history.latest())
    assert len(kept) == 2
    assert {c.phase for c in kept} == {Phase.COMPLETED}
    first_finished = next(c for c in changes if c.phase is Phase.COMPLETED)
    assert first_finished.event.event_id not in {c.event.event_id for c in kept}


def test_a_replay_makes_the_same_changes_with_the_same_numbers(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    settings = ServeSettings(fleet=fleet, clock="manual", data_dir=tmp_path / "data", seed=3)
    before: list[EventChange] = []
    first = open_state(settings, before.append).service
    first.execute(Restart("db0"))
    (cancelled,) = first.execute(Restart("web_1"))
    first.execute(CancelEvent(cancelled.event_id))
    first.advance_clock(timedelta(minutes=30))
    assert first.journal is not None
    first.journal.close()
    after: list[EventChange] = []
    second = open_state(settings, after.append).service
    assert after == before
    assert [c.phase.value for c in after] == [
        "Scheduled", "Scheduled", "Canceled", "Started", "Completed",
    ]  # fmt: skip
    assert second.journal is not None
    second.journal.close()


def test_each_event_is_found_by_its_id_at_its_latest_change() -> None:
    """The latest change of each kept event by its EventId: a live event's last state, a
    finished one's end (Completed, "an event will never move backwards"), and nothing for an
    id never published or one forgotten as the oldest finished (FINISHED_KEPT)."""
    with ForewarnPlatform(fleet=FLEET, start=START, seed=5) as platform:
        changes = recorded(platform)
        first, second = platform.restart("db0")[0], platform.restart("web_0")[0]
        platform.advance(timedelta(minutes=15))  # both Started
        live = EventHistory()
        for change in changes:
            live.record(change.at, change.phase, change.event, change.where)
        found = live.get(first.event_id)
        assert found is not None
        assert found == [c for c in changes if c.event.event_id == first.event_id][-1]
        assert found.phase is Phase.STARTED
        platform.advance(timedelta(minutes=10))  # both Completed
    history = EventHistory(finished_kept=1)
    for change in changes:
        history.record(change.at, change.phase, change.event, change.where)
    assert history.get(first.event_id) is None  # the oldest finished, forgotten
    kept = history.get(second.event_id)
    assert kept is not None
    assert kept == [c for c in changes if c.event.event_id == second.event_id][-1]
    assert kept.phase is Phase.COMPLETED
    assert history.get("00000000-0000-0000-0000-000000000000") is None

"""What each trial makes happen on its platform: events, faults, and waits bounded by time
and by the handler's being alive (:class:`~forewarn.verify.stage.Stage`)."""

from __future__ import annotations

from collections.abc import Callable

from forewarn.domain.events import EventSource, EventType
from forewarn.verify.stage import Stage
from forewarn.verify.timing import RunTiming

#: How long (real seconds) a trial waits for the handler to poll again after a fault.
HELD_BUDGET = 20.0
#: Polls answered this long after an impact's end are new ones (seconds).
AFTER_IMPACT = 0.2
#: How long the deleted-VM trial watches a handler whose VM is gone.
DELETED_WINDOW = 8.0
#: How long ``impact-again``'s event stays Started past its two impacts (seconds, at least).
IMPACT_AGAIN_MARGIN = 10.0


def _until_decided(stage: Stage, role: str = "own", extra: float = 1.0) -> None:
    """Until the event is approved, or its NotBefore passed by ``extra`` seconds."""
    not_before = stage.not_before.get(role, stage.now_t())
    stage.wait(
        lambda: stage.approved(role) or stage.now_t() >= not_before + extra,
        not_before - stage.now_t() + extra + 5.0,
    )


def _until_mark(stage: Stage, state: str, count: int = 1, timeout: float = 60.0) -> None:
    stage.wait(lambda: sum(1 for m in stage.marks if m.state == state) >= count, timeout)


def _polls_after_impact(stage: Stage, count: int = 2) -> None:
    """``count`` polls answered after the impact: not the held ones its end released."""
    stage.sleep(AFTER_IMPACT)
    stage.wait_polls(count)


def notice_drive(
    event_type: EventType, source: EventSource, duration: int = -1
) -> Callable[[Stage], None]:
    def drive(stage: Stage) -> None:
        stage.schedule("own", event_type, source=source, duration_seconds=duration)
        _until_decided(stage)

    return drive


def _evict(stage: Stage) -> None:
    """A Spot eviction (Preempt) of the handler's VM, tracked as its own event."""
    (event,) = stage.platform.evict(stage.vm)
    stage.track("own", event)


def _scale_in(stage: Stage) -> None:
    """A scale-in (Terminate) of the handler's VM, instance 0, tracked as its own event."""
    events = stage.platform.delete_instances("web", "0")
    stage.track("own", events[0], "scale-in of instance 0")


def drive_preempt(stage: Stage) -> None:
    _evict(stage)
    _until_decided(stage)


def drive_terminate(stage: Stage) -> None:
    _scale_in(stage)
    _until_decided(stage)


def drive_headers(stage: Stage) -> None:
    stage.wait_polls(3)


def drive_own_vm_only(stage: Stage) -> None:
    stage.schedule("other", EventType.REBOOT, "vm1", source=EventSource.USER)
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage, "other")
    _until_decided(stage, "own")
    stage.wait_polls(2)


def drive_approves_once(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    stage.wait_polls(3)


def fault_drive(
    kind: str, *, event_first: bool = False, **options: object
) -> Callable[[Stage], None]:
    """The fault for ``count`` requests, then the next event caught in time. With
    ``event_first`` the event comes the moment the fault is set, so the answers the fault
    meets carry a changed document: a cut body is then a 200's cut short, which a handler
    polling with If-None-Match cannot dodge as it would a body-less 304."""

    def drive(stage: Stage) -> None:
        fault = stage.fault(kind, **options)
        if event_first:
            stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
        budget = 6 * stage.timing.interval + 10.0 + float(str(options.get("delay", 0)))
        stage.wait(lambda: fault.remaining == 0, budget)
        stage.mark("FaultCleared", "", f"{fault.hits} hit(s)")
        stage.platform.clear_faults()
        stage.wait_polls(1, HELD_BUDGET)
        if not event_first:
            stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
        _until_decided(stage)

    return drive


#: How long (real seconds, at least) ``survives-400`` answers every request 400.
REFUSED_FLOOR = 5.0


def drive_bad_request(stage: Stage) -> None:
    """Every request answered 400 for a while (three of its polls, 5 s at least), then the
    next event, which it must still catch in time."""
    seconds = max(REFUSED_FLOOR, 3 * stage.timing.interval)
    stage.refuse(seconds)
    stage.sleep(seconds)
    stage.mark("RefusingEnded")
    stage.wait_polls(1, HELD_BUDGET)
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)


def drive_held(stage: Stage) -> None:
    fault = stage.fault("timeout", count=1)
    stage.wait(lambda: fault.remaining == 0, 6 * stage.timing.interval + 10.0)
    stage.mark("Held", "", "a request gets no answer, its connection stays open")
    held = stage.now_t()
    stage.wait_polls(1, stage.timing.held)
    stage.platform.clear_faults()
    stage.mark("FaultCleared")
    # A handler still waiting on the held request has failed already: no next event for it
    # to miss (a once-a-minute poller's notice is minutes long).
    if stage.answered_since(held) and stage.alive():
        stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
        _until_decided(stage)


def drive_first_call(stage: Stage) -> None:
    delay = stage.timing.first_call_delay
    stage.mark("FirstCallDelay", "", f"{delay:g} s (documented: up to 120 s)")
    stage.wait_polls(1, delay + 3 * stage.timing.interval + HELD_BUDGET)
    stage.wait_polls(2)


def drive_impact(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + stage.timing.interval + 10.0)
    _polls_after_impact(stage)


def drive_cancelled(stage: Stage) -> None:
    # Host maintenance on a host shared with another tenant: its approval alone does not
    # start the event (SPEC 3.2), so it can still be cancelled after the handler approved.
    for event in stage.platform.maintain_host("shared-host"):
        if any(resource.name == stage.vm for resource in event.resources):
            stage.track("own", event, "host maintenance, shared with another tenant")
    stage.wait(lambda: stage.seen("own"), stage.not_before["own"] - 1.0)
    stage.cancel("own")
    stage.wait(lambda: any(m.state == "Canceled" for m in stage.marks), 5.0)
    stage.wait_polls(3)


def drive_hardware_failure(stage: Stage) -> None:
    for event in stage.platform.fail_host("host-vm0"):
        stage.track("own", event, "hardware failure: Started at once")
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    _polls_after_impact(stage)


def impact_again_timing(timing: RunTiming) -> dict[str, float]:
    """The Started period of ``impact-again``'s platform: long enough that the event is still
    Started when the first impact ends and the trial impacts it again, whatever the run's
    Started period (the documented 10 minutes is shortened to a few seconds elsewhere, which
    can end with the impact) and however late a loaded machine sees the impact's end."""
    return {"started_period": 2 * timing.impact + max(IMPACT_AGAIN_MARGIN, 3 * timing.interval)}


def drive_impact_again(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    stage.platform.impact_again(stage.vm)
    stage.mark("ImpactAgain", stage.events["own"], "a second, shorter impact while Started")
    _until_mark(stage, "ImpactEnd", count=2, timeout=stage.timing.impact + 10.0)
    _polls_after_impact(stage)


def drive_freeze_instead(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.PLATFORM)
    stage.platform.freeze_instead(stage.vm)
    stage.mark("FreezeInstead", stage.events["own"], "the Reboot will freeze the VM instead")
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 15.0)
    _polls_after_impact(stage)


def drive_two_events(stage: Stage) -> None:
    stage.schedule("freeze", EventType.FREEZE, source=EventSource.PLATFORM, duration_seconds=5)
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage, "freeze")
    _until_decided(stage, "own")


def drive_deleted(stage: Stage) -> None:
    """A Spot eviction (Preempt) deletes the VM; then :func:`_after_deletion`."""
    _evict(stage)
    _after_deletion(stage)


def drive_deleted_by_terminate(stage: Stage) -> None:
    """A scale-in (Terminate) deletes the VM; then :func:`_after_deletion`."""
    _scale_in(stage)
    _after_deletion(stage)


def _after_deletion(stage: Stage) -> None:
    """Once the impact has deleted the VM (SPEC 4.3: its address answers nothing), watch the
    handler until it gave up on two unanswered requests, or the window ends."""
    _until_mark(stage, "Deleted", timeout=stage.not_before["own"] + stage.timing.impact + 10.0)
    deleted = stage.now_t()
    # A request in flight at the deletion is given up within the run's patience (``held``,
    # as in held-request), the next is sent within an interval, and that one is given up
    # in turn: two requests sent after the deletion show it, or the window ends (a warn).
    stage.wait(
        lambda: len([t for t in stage.sends() if t >= deleted]) >= 2,
        deleted_window(stage.timing),
    )


def deleted_window(timing: RunTiming) -> float:
    """How long ``deleted-vm`` watches a handler whose VM is gone: time to give up on two
    unanswered requests in turn (the run's patience and an interval each), at least
    :data:`DELETED_WINDOW`. A handler whose timeout is longer than the patience is not
    waited for, as in held-request."""
    return max(DELETED_WINDOW, 2 * (timing.held + timing.interval) + 2.0)


def drive_quiet(stage: Stage) -> None:
    stage.wait_polls(5)


def drive_drained(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    not_before = stage.not_before["own"]
    stage.wait(
        lambda: stage.approved("own") or stage.now_t() >= not_before,
        not_before - stage.now_t() + 5.0,
    )
    stage.check("drained")


def drive_recovered(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    _polls_after_impact(stage)
    end = stage.now_t() + max(10.0, 5 * stage.timing.interval)
    while True:
        result = stage.check("recovered")
        if (result is not None and result[0]) or stage.now_t() >= end:
            return
        stage.sleep(1.0)


__all__ = [
    "AFTER_IMPACT",
    "DELETED_WINDOW",
    "HELD_BUDGET",
    "IMPACT_AGAIN_MARGIN",
    "REFUSED_FLOOR",
    "deleted_window",
    "drive_approves_once",
    "drive_bad_request",
    "drive_cancelled",
    "drive_deleted",
    "drive_deleted_by_terminate",
    "drive_drained",
    "drive_first_call",
    "drive_freeze_instead",
    "drive_hardware_failure",
    "drive_headers",
    "drive_held",
    "drive_impact",
    "drive_impact_again",
    "drive_own_vm_only",
    "drive_preempt",
    "drive_quiet",
    "drive_recovered",
    "drive_terminate",
    "drive_two_events",
    "fault_drive",
    "impact_again_timing",
    "notice_drive",
]

"""Every trial `forewarn verify` runs: what it does, what a pass requires, where it is written.

A trial is a drive (what happens on its platform: events, faults, waits) and a grade (a pure
function of what was observed, :mod:`forewarn.verify.grading`). Sources are Azure's public
pages by address and section, with the rule's section of docs/spec.md (``SPEC N``).

Suites: ``quick`` (the handful that catch most defects, about a minute against a handler
polling once a second), ``full`` (all of them). Good-practice trials grade warn or info,
never fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from forewarn.domain.events import EventSource, EventType
from forewarn.verify.engine import Stage, Trial
from forewarn.verify.grading import (
    Grade,
    Observation,
    answered_polls,
    approval_ids,
    approvals_of,
    first_seen,
    fmt,
    polls,
    posts,
)
from forewarn.verify.model import TrialInfo, Verdict, VerifyError

WINDOWS = "learn.microsoft.com/azure/virtual-machines/windows/scheduled-events"
IMDS = "learn.microsoft.com/azure/virtual-machines/instance-metadata-service"
SPOT = "learn.microsoft.com/azure/virtual-machines/spot-vms"
TERMINATE = (
    "learn.microsoft.com/azure/virtual-machine-scale-sets/"
    "virtual-machine-scale-sets-terminate-notification"
)

#: How long (real seconds) a trial waits for the handler to poll again after a fault.
HELD_BUDGET = 20.0
#: How long the deleted-VM trial watches a handler whose VM is gone.
DELETED_WINDOW = 8.0


def _cite(page: str, section: str, spec: str) -> str:
    return f'{page}, "{section}"; docs/spec.md {spec}'


# -- shared grading ------------------------------------------------------------------------


def _exited(observation: Observation, doing: str) -> Grade | None:
    if observation.exited is None:
        return None
    return Grade(
        Verdict.FAIL,
        f"the handler exited (status {observation.exited}) at {fmt(observation.exited_t)} {doing}",
    )


def _malformed(observation: Observation) -> Grade | None:
    refused = [r for r in posts(observation) if r.status == 400]
    if not refused:
        return None
    body = refused[0].body.decode("utf-8", "replace")[:200]
    return Grade(
        Verdict.FAIL,
        f"an approval was refused with 400 at {fmt(observation.t(refused[0].at))} "
        f"(a malformed body or an event it cannot approve): {body!r}",
    )


def grade_notice(observation: Observation, role: str = "own") -> Grade:
    """Seen before NotBefore; approved, if at all, with a good body and before NotBefore."""
    event_id = observation.events[role]
    not_before = observation.not_before[role]
    seen = first_seen(observation, event_id)
    if seen is None or seen > not_before:
        if (gone := _exited(observation, "before it saw the event")) is not None:
            return gone
        return Grade(
            Verdict.FAIL,
            f"it did not see event {event_id} before its NotBefore ({fmt(not_before)}, "
            f"notice {not_before:.0f} s); first saw it {fmt(seen)}",
        )
    if (bad := _malformed(observation)) is not None:
        return bad
    if (gone := _exited(observation, "after it saw the event")) is not None:
        return gone
    accepted = [r for r in approvals_of(observation, event_id) if r.status == 200]
    said = f"saw it at {fmt(seen)} (NotBefore {fmt(not_before)})"
    if not accepted:
        return Grade(Verdict.PASS, f"{said}; did not approve (allowed: it starts at NotBefore)")
    approved = observation.t(accepted[0].at)
    if approved > not_before + 0.5:
        return Grade(
            Verdict.WARN, f"{said}; approved at {fmt(approved)}, after NotBefore had passed"
        )
    return Grade(Verdict.PASS, f"{said}; approved at {fmt(approved)}")


def grade_survives(observation: Observation, after: str = "ImpactEnd") -> Grade:
    """Alive, and polling again after the mark ``after`` (the last one of that name)."""
    if (gone := _exited(observation, "during the trial")) is not None:
        return gone
    marks = [m.t for m in observation.marks if m.state == after]
    if not marks:
        return Grade(Verdict.FAIL, f"the trial never reached {after}: the handler stalled it")
    since = marks[-1]
    again = answered_polls(observation, after=since)
    if not again:
        return Grade(
            Verdict.FAIL, f"no poll answered after {after} at {fmt(since)}: it stopped polling"
        )
    return Grade(
        Verdict.PASS,
        f"alive after {after} at {fmt(since)}, polling again at {fmt(observation.t(again[0].at))}",
    )


def grade_fault(kind: str) -> Callable[[Observation], Grade]:
    def grade(observation: Observation) -> Grade:
        if (gone := _exited(observation, f"after {kind}")) is not None:
            return gone
        if observation.faults_hit == 0:
            return Grade(Verdict.WARN, f"no request of the handler met {kind}")
        if "own" not in observation.events:
            return Grade(Verdict.FAIL, f"it did not poll again after {kind}")
        caught = grade_notice(observation)
        if caught.verdict is Verdict.FAIL:
            return Grade(Verdict.FAIL, f"after {kind}: {caught.reason}")
        return Grade(
            Verdict.PASS,
            f"{observation.faults_hit} request(s) met {kind}; it caught the next event: "
            f"{caught.reason}",
        )

    return grade


# -- drives --------------------------------------------------------------------------------


def _until_decided(stage: Stage, role: str = "own", extra: float = 1.0) -> None:
    """Until the event is approved, or its NotBefore passed by ``extra`` seconds."""
    not_before = stage.not_before.get(role, stage.now_t())
    stage.wait(
        lambda: stage.approved(role) or stage.now_t() >= not_before + extra,
        not_before - stage.now_t() + extra + 5.0,
    )


def _until_mark(stage: Stage, state: str, count: int = 1, timeout: float = 60.0) -> None:
    stage.wait(lambda: sum(1 for m in stage.marks if m.state == state) >= count, timeout)


def notice_drive(
    event_type: EventType, source: EventSource, duration: int = -1
) -> Callable[[Stage], None]:
    def drive(stage: Stage) -> None:
        stage.schedule("own", event_type, source=source, duration_seconds=duration)
        _until_decided(stage)

    return drive


def drive_preempt(stage: Stage) -> None:
    (event,) = stage.platform.evict(stage.vm)
    stage.track("own", event)
    _until_decided(stage)


def drive_terminate(stage: Stage) -> None:
    events = stage.platform.delete_instances("web", "0")
    stage.track("own", events[0], "scale-in of instance 0")
    _until_decided(stage)


def drive_headers(stage: Stage) -> None:
    stage.wait_polls(3)


def drive_own_vm_only(stage: Stage) -> None:
    stage.schedule("other", EventType.REBOOT, "vm1", source=EventSource.USER)
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage, "other")
    _until_decided(stage, "own")
    stage.wait_polls(2)


def grade_own_vm_only(observation: Observation) -> Grade:
    other = observation.events["other"]
    wrong = [r for r in approvals_of(observation, other) if r.status == 200]
    if wrong:
        return Grade(
            Verdict.FAIL,
            f"it approved event {other}, whose Resources name only vm1, at "
            f"{fmt(observation.t(wrong[0].at))}: it let another VM's reboot go ahead",
        )
    if (bad := _malformed(observation)) is not None:
        return bad
    if (gone := _exited(observation, "while another VM's event was shown")) is not None:
        return gone
    own = grade_notice(observation, "own")
    if own.verdict is not Verdict.PASS:
        return own
    return Grade(Verdict.PASS, f"left vm1's event alone; its own: {own.reason}")


def drive_approves_once(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    stage.wait_polls(3)


def grade_approves_once(observation: Observation) -> Grade:
    event_id = observation.events["own"]
    sent = approvals_of(observation, event_id)
    if not sent:
        return Grade(Verdict.NA, "it never approved (approval is optional)")
    if (bad := _malformed(observation)) is not None:
        return bad
    if len(sent) > 2:
        return Grade(
            Verdict.WARN,
            f"it approved event {event_id} {len(sent)} times (first at "
            f"{fmt(observation.t(sent[0].at))}): it keeps no record of what it approved",
        )
    ids = approval_ids(sent[0])
    return Grade(Verdict.PASS, f"approved once, body naming {', '.join(ids)}")


def fault_drive(kind: str, **options: object) -> Callable[[Stage], None]:
    def drive(stage: Stage) -> None:
        fault = stage.fault(kind, **options)
        budget = 6 * stage.timing.interval + 10.0 + float(str(options.get("delay", 0)))
        stage.wait(lambda: fault.remaining == 0, budget)
        stage.mark("FaultCleared", "", f"{fault.hits} hit(s)")
        stage.platform.clear_faults()
        stage.wait_polls(1, HELD_BUDGET)
        stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
        _until_decided(stage)

    return drive


def drive_held(stage: Stage) -> None:
    fault = stage.fault("timeout", count=1)
    stage.wait(lambda: fault.remaining == 0, 6 * stage.timing.interval + 10.0)
    stage.mark("Held", "", "a request gets no answer, its connection stays open")
    stage.wait_polls(1, stage.timing.held)
    stage.platform.clear_faults()
    stage.mark("FaultCleared")
    if stage.answered_since(0) and stage.alive():
        stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
        _until_decided(stage)


def grade_held(observation: Observation) -> Grade:
    if (gone := _exited(observation, "after a request got no answer")) is not None:
        return gone
    held = observation.mark_t("Held")
    if held is None or observation.faults_hit == 0:
        return Grade(Verdict.WARN, "no request of the handler met the held answer")
    again = answered_polls(observation, after=held)
    if not again or observation.t(again[0].at) > held + observation.patience:
        return Grade(
            Verdict.FAIL,
            f"one request got no answer at {fmt(held)} and it sent nothing answerable for "
            f"{observation.patience:g} s: it sets no timeout (or one longer than that)",
        )
    came = observation.t(again[0].at)
    if "own" in observation.events:
        caught = grade_notice(observation)
        if caught.verdict is Verdict.FAIL:
            return caught
    return Grade(Verdict.PASS, f"gave up on the held request and polled again at {fmt(came)}")


def drive_first_call(stage: Stage) -> None:
    delay = stage.timing.first_call_delay
    stage.mark("FirstCallDelay", "", f"{delay:g} s (documented: up to 120 s)")
    stage.wait_polls(1, delay + 3 * stage.timing.interval + HELD_BUDGET)
    stage.wait_polls(2)


def grade_first_call(observation: Observation) -> Grade:
    if gone := _exited(observation, "during the first-call delay: it gave up for good"):
        return gone
    answered = answered_polls(observation)
    if not answered:
        return Grade(Verdict.FAIL, "none of its requests was answered: it stopped asking")
    first = observation.t(answered[0].at)
    sent = len(polls(observation))
    tries = len([t for t in observation.sends if t < first])
    return Grade(
        Verdict.PASS,
        f"its first poll was answered at {fmt(first)}, once the delay was over ({tries} "
        f"request(s) sent before); it kept going ({sent} poll(s) answered in all)",
    )


def drive_impact(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + stage.timing.interval + 10.0)
    stage.wait_polls(2)


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


def grade_cancelled(observation: Observation) -> Grade:
    if (gone := _exited(observation, "after the event was cancelled")) is not None:
        return gone
    event_id = observation.events["own"]
    cancelled = observation.mark_t("Canceled", event_id)
    if cancelled is None:
        return Grade(Verdict.FAIL, "it did not see the event before NotBefore")
    late = [
        r
        for r in approvals_of(observation, event_id)
        if observation.t(r.at) > cancelled + observation.interval
    ]
    if late:
        return Grade(
            Verdict.WARN,
            f"it approved event {event_id} at {fmt(observation.t(late[0].at))}, after it was "
            f"cancelled at {fmt(cancelled)}",
        )
    return grade_survives(observation, after="Canceled")


def drive_hardware_failure(stage: Stage) -> None:
    for event in stage.platform.fail_host("host-vm0"):
        stage.track("own", event, "hardware failure: Started at once")
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    stage.wait_polls(2)


def drive_impact_again(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    stage.platform.impact_again(stage.vm)
    stage.mark("ImpactAgain", stage.events["own"], "a second, shorter impact while Started")
    _until_mark(stage, "ImpactEnd", count=2, timeout=stage.timing.impact + 10.0)
    stage.wait_polls(2)


def drive_freeze_instead(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.PLATFORM)
    stage.platform.freeze_instead(stage.vm)
    stage.mark("FreezeInstead", stage.events["own"], "the Reboot will freeze the VM instead")
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 15.0)
    stage.wait_polls(2)


def drive_two_events(stage: Stage) -> None:
    stage.schedule("freeze", EventType.FREEZE, source=EventSource.PLATFORM, duration_seconds=5)
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage, "freeze")
    _until_decided(stage, "own")


def grade_two_events(observation: Observation) -> Grade:
    freeze = grade_notice(observation, "freeze")
    reboot = grade_notice(observation, "own")
    for grade in (freeze, reboot):
        if grade.verdict is not Verdict.PASS:
            return grade
    return Grade(Verdict.PASS, f"Freeze: {freeze.reason}; Reboot: {reboot.reason}")


def drive_deleted(stage: Stage) -> None:
    (event,) = stage.platform.evict(stage.vm)
    stage.track("own", event)
    _until_mark(stage, "Deleted", timeout=stage.not_before["own"] + stage.timing.impact + 10.0)
    stage.sleep(max(DELETED_WINDOW, 3 * stage.timing.interval))


def grade_deleted(observation: Observation) -> Grade:
    deleted = observation.mark_t("Deleted")
    if deleted is None:
        if (gone := _exited(observation, "before its VM was deleted")) is not None:
            return gone
        return Grade(Verdict.FAIL, "its VM was never deleted: the trial did not complete")
    if observation.exited is not None:
        return Grade(Verdict.PASS, f"it exited once its VM was gone (at {fmt(deleted)})")
    after = [t for t in observation.sends if t >= deleted]
    if len(after) >= 2:
        return Grade(
            Verdict.PASS,
            f"its requests after the deletion at {fmt(deleted)} got no answer, as on Azure, "
            f"and it gave up on each and tried again ({len(after)} sent)",
        )
    if not after:
        return Grade(
            Verdict.WARN,
            f"it sent nothing after its VM was deleted at {fmt(deleted)}: a request held "
            "since before, with no timeout? (on Azure its process dies with the VM)",
        )
    return Grade(
        Verdict.WARN,
        f"it sent one request after its VM was deleted at {fmt(deleted)} and waited for it "
        "until the trial ended: it waits for ever (on Azure its process dies with the VM)",
    )


def drive_quiet(stage: Stage) -> None:
    stage.wait_polls(5)


def grade_etag(observation: Observation) -> Grade:
    sent = [r for r in polls(observation) if "if-none-match" in r.headers]
    if sent:
        not_modified = sum(1 for r in sent if r.status == 304)
        return Grade(
            Verdict.PASS,
            f"{len(sent)} poll(s) sent If-None-Match ({not_modified} answered 304)",
        )
    return Grade(Verdict.INFO, "it sends no If-None-Match: every poll downloads the whole document")


def grade_reuse(observation: Observation) -> Grade:
    requests = len(observation.sends)
    opened = len(observation.opens)
    if requests and opened < requests:
        return Grade(Verdict.PASS, f"{requests} request(s) on {opened} connection(s)")
    return Grade(Verdict.INFO, f"a new connection for every request ({opened} for {requests})")


def grade_rate(observation: Observation) -> Grade:
    refused = [r for r in observation.requests if r.status == 429]
    times = sorted(observation.t(r.at) for r in observation.requests)
    busiest = max((sum(1 for u in times if t <= u < t + 1.0) for t in times), default=0)
    if refused or busiest > 5:
        return Grade(
            Verdict.WARN,
            f"{busiest} requests in one second ({len(refused)} answered 429): over the "
            "documented 5 a second",
        )
    return Grade(Verdict.PASS, f"at most {busiest} request(s) in any second")


def drive_drained(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    not_before = stage.not_before["own"]
    stage.wait(
        lambda: stage.approved("own") or stage.now_t() >= not_before,
        not_before - stage.now_t() + 5.0,
    )
    stage.check("drained")


def grade_drained(observation: Observation) -> Grade:
    ok, said = observation.checks.get("drained", (False, "the check did not run"))
    approved = approvals_of(observation, observation.events["own"])
    moment = "when it approved" if approved else "at NotBefore"
    if not ok:
        return Grade(Verdict.FAIL, f"not drained {moment}: {said}")
    return Grade(Verdict.PASS, f"drained {moment}: {said}")


def drive_recovered(stage: Stage) -> None:
    stage.schedule("own", EventType.REBOOT, source=EventSource.USER)
    _until_decided(stage)
    _until_mark(stage, "ImpactEnd", timeout=stage.timing.impact + 10.0)
    stage.wait_polls(2)
    end = stage.now_t() + max(10.0, 5 * stage.timing.interval)
    while True:
        result = stage.check("recovered")
        if (result is not None and result[0]) or stage.now_t() >= end:
            return
        stage.sleep(1.0)


def grade_recovered(observation: Observation) -> Grade:
    if (gone := _exited(observation, "after the impact")) is not None:
        return gone
    ok, said = observation.checks.get("recovered", (False, "the check did not run"))
    if not ok:
        return Grade(Verdict.FAIL, f"not recovered after the event: {said}")
    return Grade(Verdict.PASS, f"recovered after the event: {said}")


# -- the catalogue -------------------------------------------------------------------------

QUICK = ("quick", "full")
FULL = ("full",)


def _trial(
    name: str,
    title: str,
    source: str,
    requires: str,
    drive: Callable[[Stage], None],
    grade: Callable[[Observation], Grade],
    suites: tuple[str, ...] = FULL,
    **options: object,
) -> Trial:
    info = TrialInfo(name, title, source, requires, suites)
    return Trial(info, drive, grade, **options)  # type: ignore[arg-type]


def _notice(
    name: str,
    event_type: EventType,
    source: EventSource,
    duration: int,
    suites: tuple[str, ...] = FULL,
) -> Trial:
    return _trial(
        name,
        f"Notices a {event_type.value} ({source.value}, DurationInSeconds {duration}) in time",
        _cite(WINDOWS, "Polling frequency", "SPEC 4.1, SPEC 8"),
        f"a document showing the {event_type.value} read before its NotBefore; an approval, "
        "if any, answered 200 and sent before NotBefore",
        notice_drive(event_type, source, duration),
        grade_notice,
        suites,
    )


def _fault(name: str, kind: str, label: str, suites: tuple[str, ...], **options: object) -> Trial:
    return _trial(
        name,
        f"Keeps working through {label}",
        _cite(IMDS, "Errors and debugging", "SPEC 1.2"),
        f"still running after requests met {label}, and the next event seen before its NotBefore",
        fault_drive(kind, **options),
        grade_fault(label),
        suites,
    )


TRIALS: tuple[Trial, ...] = (
    _trial(
        "headers",
        "Sends Metadata: true and an api-version Azure serves",
        _cite(WINDOWS, "Headers", "SPEC 1.1"),
        "every request answered (no 400): the Metadata: true header and a Scheduled Events "
        "api-version on each",
        drive_headers,
        lambda o: grade_headers(o),
        QUICK,
    ),
    _notice("reboot-notice", EventType.REBOOT, EventSource.USER, -1, QUICK),
    _notice("reboot-platform", EventType.REBOOT, EventSource.PLATFORM, 0),
    _notice("freeze-notice", EventType.FREEZE, EventSource.PLATFORM, 9),
    _notice("redeploy-notice", EventType.REDEPLOY, EventSource.PLATFORM, -1),
    _trial(
        "preempt-notice",
        "Notices a Spot eviction (Preempt, 30 s notice) in time",
        _cite(SPOT, "Eviction policy", "SPEC 4.1"),
        "the Preempt seen before its NotBefore (documented notice: 30 s)",
        drive_preempt,
        grade_notice,
        fleet="spot",
    ),
    _trial(
        "terminate-notice",
        "Notices a scale set's Terminate in time",
        _cite(TERMINATE, "Get Terminate notifications", "SPEC 4.1"),
        "the Terminate seen before its NotBefore (the scale set's notBeforeTimeout)",
        drive_terminate,
        grade_notice,
        fleet="vmss",
    ),
    _trial(
        "own-vm-only",
        "Approves only events naming its own VM",
        _cite(WINDOWS, "Start an event", "SPEC 3.2, SPEC 5, SPEC 8"),
        "no approval of an event whose Resources name only another VM of its availability "
        "set; its own event seen in time; no approval refused with 400",
        drive_own_vm_only,
        grade_own_vm_only,
        QUICK,
        fleet="aset",
    ),
    _trial(
        "approves-once",
        "Does not approve the same event over and over",
        _cite(WINDOWS, "Start an event", "SPEC 3.2"),
        "at most two approvals of one event (warn otherwise; n/a when it never approves)",
        drive_approves_once,
        grade_approves_once,
    ),
    _trial(
        "impact",
        "Lives through the impact and keeps polling",
        _cite(WINDOWS, "Event properties", "SPEC 4.3"),
        "still running after its requests were held while the VM was paused, and a poll "
        "answered after the impact",
        drive_impact,
        lambda o: grade_survives(o),
    ),
    _fault("survives-500", "error", "a 500", QUICK, count=3),
    _fault("survives-410", "gone", "a 410", FULL, count=3),
    _fault("survives-429", "throttle", "a 429", FULL, count=3),
    _fault("survives-truncate", "truncate", "a cut body", QUICK, count=3),
    _fault("survives-reset", "reset", "a connection reset", QUICK, count=3),
    _fault("survives-latency", "latency", "2 s of latency", FULL, count=3, delay=2.0),
    _trial(
        "held-request",
        "Does not hang on a request that gets no answer (has a timeout)",
        _cite(IMDS, "Errors and debugging", "SPEC 4.3"),
        "after one request is held unanswered, a poll answered within 20 s (held), and "
        "the next event seen in time",
        drive_held,
        grade_held,
        QUICK,
    ),
    _trial(
        "first-call-delay",
        "Does not give up for good during the first-call delay",
        _cite(WINDOWS, "Enabling and disabling Scheduled Events", "SPEC 7"),
        "still running through the first call's delay (shortened: see timing) and polling "
        "once it is answered",
        drive_first_call,
        grade_first_call,
        QUICK,
        fleet="fresh",
        first_call_delay=True,
        warm_up=False,
    ),
    _trial(
        "cancelled",
        "Lives through a cancelled event (removed without Started)",
        _cite(WINDOWS, "Event scheduling", "SPEC 4.2"),
        "still running and polling after the event vanished; no approval of it afterwards",
        drive_cancelled,
        grade_cancelled,
        fleet="shared",
    ),
    _trial(
        "hardware-failure",
        "Lives through a hardware failure (Started with no Scheduled)",
        _cite(WINDOWS, "Event scheduling", "SPEC 4.2"),
        "still running after a Reboot that is Started at once, and polling after its impact",
        drive_hardware_failure,
        lambda o: grade_survives(o),
    ),
    _trial(
        "impact-again",
        "Lives through a second impact while Started",
        _cite(WINDOWS, "High level overview", "SPEC 4.1"),
        "still running after a second, shorter impact, and polling after it",
        drive_impact_again,
        lambda o: grade_survives(o),
    ),
    _trial(
        "freeze-instead",
        "Lives through a Freeze instead of the Reboot",
        _cite(WINDOWS, "Event properties", "SPEC 4.1"),
        "still running after its Reboot froze the VM instead, and polling after",
        drive_freeze_instead,
        lambda o: grade_survives(o),
    ),
    _trial(
        "two-events",
        "Handles two events at once",
        _cite(WINDOWS, "High level overview", "SPEC 8"),
        "a Freeze and a Reboot shown together, each seen before its NotBefore",
        drive_two_events,
        grade_two_events,
    ),
    _trial(
        "deleted-vm",
        "After its VM is deleted, its requests are never answered",
        _cite(WINDOWS, "Event properties", "SPEC 4.3"),
        "after the Preempt's impact deletes the VM: it exits or gives up on each unanswered "
        "request (warn when it waits for ever: on Azure its process dies with the VM)",
        drive_deleted,
        grade_deleted,
        fleet="spot",
    ),
    _trial(
        "etag",
        "Good practice: conditional polls with If-None-Match",
        _cite(IMDS, "Frequently asked questions", "SPEC 1.4"),
        "info only: If-None-Match sent with the ETag it was given",
        drive_quiet,
        grade_etag,
    ),
    _trial(
        "connection-reuse",
        "Good practice: reuses its connection",
        _cite(WINDOWS, "Polling frequency", "SPEC 8"),
        "info only: fewer connections than requests",
        drive_quiet,
        grade_reuse,
    ),
    _trial(
        "rate-limit",
        "Good practice: stays under 5 requests a second",
        _cite(IMDS, "Rate limiting", "SPEC 1.3"),
        "warn only: no 429 and never more than 5 requests in a second",
        drive_quiet,
        grade_rate,
    ),
    _trial(
        "drained-before-approval",
        "Drains before it approves (--drained-check)",
        _cite(WINDOWS, "High level overview", "SPEC 8"),
        "--drained-check exits 0 when it approves (or at NotBefore); n/a without it",
        drive_drained,
        grade_drained,
        needs="drained",
    ),
    _trial(
        "recovers-after",
        "Recovers after the event (--recovered-check)",
        _cite(WINDOWS, "High level overview", "SPEC 8"),
        "--recovered-check exits 0 soon after the impact; n/a without it",
        drive_recovered,
        grade_recovered,
        needs="recovered",
    ),
)


def grade_headers(observation: Observation) -> Grade:
    refused = [r for r in observation.requests if r.status == 400]
    if refused:
        first = refused[0]
        said = first.response_body.decode("utf-8", "replace")[:160]
        return Grade(
            Verdict.FAIL,
            f"{len(refused)} request(s) refused with 400, first {first.method} "
            f"{first.path}?{first.query} at {fmt(observation.t(first.at))}: {said}",
        )
    answered = answered_polls(observation)
    if not answered:
        return Grade(Verdict.FAIL, "no poll for events was answered")
    versions = sorted({r.api_version or "" for r in answered})
    return Grade(
        Verdict.PASS,
        f"{len(answered)} poll(s) with Metadata: true, api-version {', '.join(versions)}",
    )


BY_NAME: dict[str, Trial] = {trial.name: trial for trial in TRIALS}
SUITES = ("quick", "full")


def select(suite: str, names: Sequence[str] = ()) -> list[Trial]:
    """The trials of ``suite``, or those named (in the catalogue's order); ``VerifyError``
    for an unknown name or suite."""
    if names:
        unknown = [name for name in names if name not in BY_NAME]
        if unknown:
            raise VerifyError(
                f"unknown trial {', '.join(unknown)}; forewarn verify --list shows them"
            )
        return [trial for trial in TRIALS if trial.name in names]
    if suite not in SUITES:
        raise VerifyError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    return [trial for trial in TRIALS if suite in trial.info.suites]


__all__ = [
    "BY_NAME",
    "HELD_BUDGET",
    "SUITES",
    "TRIALS",
    "grade_deleted",
    "grade_fault",
    "grade_headers",
    "grade_held",
    "grade_notice",
    "grade_own_vm_only",
    "grade_survives",
    "select",
]

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
from forewarn.verify.drives import (
    drive_approves_once,
    drive_bad_request,
    drive_cancelled,
    drive_deleted,
    drive_deleted_by_terminate,
    drive_drained,
    drive_first_call,
    drive_freeze_instead,
    drive_hardware_failure,
    drive_headers,
    drive_held,
    drive_impact,
    drive_impact_again,
    drive_own_vm_only,
    drive_preempt,
    drive_quiet,
    drive_recovered,
    drive_terminate,
    drive_two_events,
    fault_drive,
    impact_again_timing,
    notice_drive,
)
from forewarn.verify.grades import (
    grade_approves_once,
    grade_bad_request,
    grade_cancelled,
    grade_deleted,
    grade_drained,
    grade_etag,
    grade_fault,
    grade_first_call,
    grade_headers,
    grade_held,
    grade_notice,
    grade_own_vm_only,
    grade_rate,
    grade_recovered,
    grade_reuse,
    grade_survives,
    grade_two_events,
)
from forewarn.verify.grading import (
    Grade,
    Observation,
)
from forewarn.verify.model import TrialInfo, VerifyError
from forewarn.verify.stage import Stage, Trial

WINDOWS = "learn.microsoft.com/azure/virtual-machines/windows/scheduled-events"
IMDS = "learn.microsoft.com/azure/virtual-machines/instance-metadata-service"
#: The IMDS family's error codes, where 503 "Internal service unavailable. Retry later" is.
IMDS_CODES = "learn.microsoft.com/azure/load-balancer/troubleshoot-load-balancer-imds"
SPOT = "learn.microsoft.com/azure/virtual-machines/spot-vms"
TERMINATE = (
    "learn.microsoft.com/azure/virtual-machine-scale-sets/"
    "virtual-machine-scale-sets-terminate-notification"
)


def _cite(page: str, section: str, spec: str) -> str:
    return f'{page}, "{section}"; docs/spec.md {spec}'


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


def _fault(
    name: str,
    kind: str,
    label: str,
    suites: tuple[str, ...],
    requires: str = "",
    *,
    event_first: bool = False,
    source: str = _cite(IMDS, "Errors and debugging", "SPEC 1.2"),
    **options: object,
) -> Trial:
    return _trial(
        name,
        f"Keeps working through {label}",
        source,
        requires
        or f"still running after requests met {label}, and the next event seen before its "
        "NotBefore",
        fault_drive(kind, event_first=event_first, **options),
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
    _fault(
        "survives-503",
        "unavailable",
        "a 503",
        FULL,
        source=_cite(IMDS_CODES, "Error codes", "SPEC 1.2"),
        count=3,
    ),
    _trial(
        "survives-400",
        "Keeps working through a 400",
        _cite(IMDS, "Errors and debugging", "SPEC 1.2, SPEC 1.3"),
        "still running after every request was answered 400 for a while (three of its "
        "polls, 5 s at least: Azure's answer to a missing header or a bad api-version), "
        "never more than 5 requests in a second meanwhile, and the next event seen before "
        "its NotBefore",
        drive_bad_request,
        grade_bad_request,
    ),
    _fault("survives-429", "throttle", "a 429", FULL, count=3),
    _fault(
        "survives-truncate",
        "truncate",
        "a cut body",
        QUICK,
        "still running after the answers showing a new event were cut short (200s with a "
        "body, whatever If-None-Match it sent), and that event seen before its NotBefore",
        count=3,
        event_first=True,
    ),
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
        platform_timing=impact_again_timing,
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
        "deleted-by-terminate",
        "After a scale-in deletes its VM, its requests are never answered",
        _cite(TERMINATE, "Get Terminate notifications", "SPEC 4.3"),
        "after the Terminate's impact deletes the VM: it exits or gives up on each unanswered "
        "request (warn when it waits for ever: on Azure its process dies with the VM)",
        drive_deleted_by_terminate,
        grade_deleted,
        fleet="vmss",
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


__all__ = ["BY_NAME", "SUITES", "TRIALS", "select"]

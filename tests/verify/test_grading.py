"""Each trial's grade on request sequences written by hand: no process, no socket.

The sources each grade holds a handler to are quoted per test; the trials' own citations
(``forewarn verify --list``) name the same sections.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from forewarn.testing import RecordedRequest
from forewarn.verify.grades import (
    grade_bad_request,
    grade_deleted,
    grade_fault,
    grade_headers,
    grade_held,
    grade_notice,
    grade_own_vm_only,
    grade_survives,
)
from forewarn.verify.grading import Observation, evidence_of
from forewarn.verify.model import StateChange, Verdict, VerifyError
from forewarn.verify.timing import RunTiming
from forewarn.verify.trials import BY_NAME, TRIALS, select

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PATH = "/metadata/scheduledevents"
QUERY = "api-version=2020-07-01"
OWN = "AAAAAAAA-0000-0000-0000-000000000001"
OTHER = "BBBBBBBB-0000-0000-0000-000000000002"


def _at(t: float) -> datetime:
    return T0 + timedelta(seconds=t)


def get(
    t: float, *shown: str, status: int = 200, headers: dict[str, str] | None = None
) -> RecordedRequest:
    document = {
        "DocumentIncarnation": 1,
        "Events": [{"EventId": event_id, "EventStatus": "Scheduled"} for event_id in shown],
    }
    body = json.dumps(document).encode() if status == 200 else b'{"error":"Bad request"}'
    return RecordedRequest(
        at=_at(t),
        vm="vm0",
        method="GET",
        path=PATH,
        query=QUERY,
        headers=headers if headers is not None else {"metadata": "true"},
        body=b"",
        status=status,
        response_body=body,
    )


def post(t: float, *ids: str, status: int = 200, body: bytes | None = None) -> RecordedRequest:
    sent = (
        body
        if body is not None
        else json.dumps({"StartRequests": [{"EventId": event_id} for event_id in ids]}).encode()
    )
    return RecordedRequest(
        at=_at(t),
        vm="vm0",
        method="POST",
        path=PATH,
        query=QUERY,
        headers={"metadata": "true"},
        body=sent,
        status=status,
        response_body=b"",
    )


def mark(t: float, state: str, event_id: str = "") -> StateChange:
    return StateChange(t, _at(t).isoformat(), state, event_id)


def observe(*requests: RecordedRequest, **fields: object) -> Observation:
    values: dict[str, object] = {
        "t0": T0,
        "requests": requests,
        "events": {"own": OWN},
        "not_before": {"own": 10.0},
    }
    values.update(fields)
    return Observation(**values)  # type: ignore[arg-type]


# -- notice: learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Polling
# frequency" ("we recommend that you poll the service once per second") and "Event
# scheduling" (an event starts at approval or at its NotBefore); SPEC 4.1, SPEC 8.


def test_an_event_seen_and_approved_before_not_before_passes() -> None:
    grade = grade_notice(observe(get(1), get(2, OWN), post(2.1, OWN)))
    assert grade.verdict is Verdict.PASS
    assert "approved at +2.1s" in grade.reason


def test_an_event_seen_but_not_approved_passes_approval_being_optional() -> None:
    grade = grade_notice(observe(get(1), get(2, OWN), get(3, OWN)))
    assert grade.verdict is Verdict.PASS
    assert "did not approve" in grade.reason


def test_an_event_first_seen_after_not_before_fails() -> None:
    grade = grade_notice(observe(get(1), get(11, OWN)))
    assert grade.verdict is Verdict.FAIL
    assert "before its NotBefore (+10.0s" in grade.reason


def test_an_event_never_seen_fails_and_a_handler_that_exited_is_named() -> None:
    assert grade_notice(observe(get(1))).verdict is Verdict.FAIL
    gone = grade_notice(observe(get(1), exited=1, exited_t=1.5))
    assert gone.verdict is Verdict.FAIL
    assert "exited (status 1)" in gone.reason


def test_an_approval_after_not_before_warns() -> None:
    grade = grade_notice(observe(get(2, OWN), post(12, OWN)))
    assert grade.verdict is Verdict.WARN


def test_a_malformed_approval_fails() -> None:
    """SPEC 3.1, 3.2: "A 400 error code indicates that the request header or payload was
    malformed" (Windows page, "Start an event")."""
    grade = grade_notice(observe(get(2, OWN), post(2.5, status=400, body=b'{"EventId": 1}')))
    assert grade.verdict is Verdict.FAIL
    assert "400" in grade.reason


# -- own VM only: SPEC 5 (every VM of an availability set sees the set's events) and SPEC 8
# ("Handlers find their own name in Resources"; Windows page, "Start an event").


def test_approving_another_vms_event_fails() -> None:
    observation = observe(
        get(1, OTHER, OWN),
        post(1.1, OTHER),
        post(1.2, OWN),
        events={"own": OWN, "other": OTHER},
        not_before={"own": 10.0, "other": 10.0},
    )
    grade = grade_own_vm_only(observation)
    assert grade.verdict is Verdict.FAIL
    assert OTHER in grade.reason


def test_approving_only_its_own_passes() -> None:
    observation = observe(
        get(1, OTHER, OWN),
        post(1.2, OWN),
        get(2, OTHER),
        events={"own": OWN, "other": OTHER},
        not_before={"own": 10.0, "other": 10.0},
    )
    assert grade_own_vm_only(observation).verdict is Verdict.PASS


# -- faults: learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and
# debugging" ("500 Service Error | Retry after some time"); SPEC 1.2.


def test_a_handler_that_exits_after_a_fault_fails() -> None:
    grade = grade_fault("a 500")(observe(get(1), faults_hit=1, exited=3, exited_t=1.2))
    assert grade.verdict is Verdict.FAIL
    assert "exited (status 3) at +1.2s after a 500" in grade.reason


def test_a_handler_that_retries_and_catches_the_next_event_passes() -> None:
    grade = grade_fault("a 500")(observe(get(1), get(5, OWN), faults_hit=3))
    assert grade.verdict is Verdict.PASS


def test_a_fault_no_request_met_is_a_warning_not_a_pass() -> None:
    assert grade_fault("a 500")(observe(get(5, OWN))).verdict is Verdict.WARN


# -- a held request: SPEC 4.3 (a paused or deleted VM's request gets its answer late or never)


def test_a_handler_without_a_timeout_fails_the_held_request() -> None:
    observation = observe(get(1), marks=(mark(2, "Held"),), faults_hit=1, events={})
    grade = grade_held(observation)
    assert grade.verdict is Verdict.FAIL
    assert "no timeout" in grade.reason


def test_a_handler_back_within_the_budget_passes_the_held_request() -> None:
    observation = observe(
        get(1), get(6), marks=(mark(2, "Held"),), faults_hit=1, events={}, patience=5.0
    )
    assert grade_held(observation).verdict is Verdict.PASS
    late = observe(get(1), get(8), marks=(mark(2, "Held"),), faults_hit=1, events={}, patience=5.0)
    assert grade_held(late).verdict is Verdict.FAIL


# -- a deleted VM: SPEC 4.3 (its address answers nothing) -----------------------------------


def test_after_deletion_exiting_or_retrying_passes_and_waiting_for_ever_warns() -> None:
    marks = (mark(10, "Deleted"),)
    assert grade_deleted(observe(marks=marks, exited=0, exited_t=11)).verdict is Verdict.PASS
    assert grade_deleted(observe(marks=marks, sends=(11.0, 14.0))).verdict is Verdict.PASS
    waits = grade_deleted(observe(marks=marks, sends=(9.0, 11.0)))
    assert waits.verdict is Verdict.WARN
    assert "no timeout, or one longer than 20 s" in waits.reason


# -- living through: SPEC 4.3 -----------------------------------------------------------------


def test_surviving_needs_a_poll_answered_after_the_impact() -> None:
    marks = (mark(3, "ImpactStart"), mark(6, "ImpactEnd"))
    assert grade_survives(observe(get(1), get(7), marks=marks)).verdict is Verdict.PASS
    assert grade_survives(observe(get(1), marks=marks)).verdict is Verdict.FAIL
    # the request held through the impact and answered at its end is not a new poll
    assert grade_survives(observe(get(1), get(6), marks=marks)).verdict is Verdict.FAIL


# -- headers: Windows page, "Headers" ("required for all scheduled events requests"); SPEC 1.1


def test_a_request_refused_with_400_fails_the_headers_trial() -> None:
    grade = grade_headers(observe(get(1, status=400, headers={})))
    assert grade.verdict is Verdict.FAIL
    assert "400" in grade.reason
    assert grade_headers(observe(get(1), get(2))).verdict is Verdict.PASS


def test_good_practice_trials_never_fail() -> None:
    """Good practice is graded warn or info (the etag, reuse and rate trials)."""
    burst = observe(*(get(1 + i / 10) for i in range(8)), sends=tuple(range(8)), opens=(0.0,))
    for name in ("etag", "connection-reuse", "rate-limit"):
        for observation in (burst, observe(get(1), sends=(1.0,), opens=(1.0,))):
            assert BY_NAME[name].grade(observation).verdict is not Verdict.FAIL
    assert BY_NAME["rate-limit"].grade(burst).verdict is Verdict.WARN


# -- the catalogue and its timing ---------------------------------------------------------------


def test_every_trial_cites_a_source_and_says_what_passing_requires() -> None:
    for trial in TRIALS:
        assert "learn.microsoft.com/" in trial.info.source, trial.name
        assert "docs/spec.md SPEC " in trial.info.source, trial.name
        assert trial.info.requires, trial.name


def test_the_quick_suite_and_unknown_names() -> None:
    assert [t.name for t in select("quick")] == [
        "headers",
        "reboot-notice",
        "own-vm-only",
        "survives-500",
        "survives-truncate",
        "survives-reset",
        "held-request",
        "first-call-delay",
    ]
    assert len(select("full")) == len(TRIALS)
    with pytest.raises(VerifyError, match="unknown trial nope"):
        select("quick", ["headers", "nope"])


def test_notices_shrink_to_what_the_handlers_interval_allows_never_past_documented() -> None:
    """SPEC 4.1: Preempt's documented notice is 30 s, Reboot's 15 min."""
    fast = RunTiming.scaled("documented", 1.0)
    assert fast.notice("Reboot") == 10.0
    assert fast.notice("Preempt") == 10.0
    slow = RunTiming.scaled("documented", 6.0)
    assert slow.notice("Reboot") == 60.0
    assert slow.notice("Preempt") == 30.0  # a handler polling every 6 s gets Azure's 30 s
    given = RunTiming.scaled("documented", 1.0, {"notice.Reboot": 900, "first_call_delay": 120})
    assert given.notice("Reboot") == 900
    assert given.first_call_delay == 120
    with pytest.raises(VerifyError, match="unknown timing"):
        RunTiming.scaled("documented", 1.0, {"notize.Reboot": 1})


# -- a 400: learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and
# debugging" ("400 Bad Request | Missing Metadata: true header or missing parameter ...");
# SPEC 1.2; the rate limit of 5 requests a second, "Rate limiting", SPEC 1.3.


def refused(t: float) -> RecordedRequest:
    return dataclasses.replace(get(t, status=400), fault="bad-request")


def test_a_handler_that_waits_out_the_400s_and_catches_the_event_passes() -> None:
    observation = observe(get(1), get(5), get(6, OWN), faulted=(refused(2), refused(3), refused(4)))
    grade = grade_bad_request(observation)
    assert grade.verdict is Verdict.PASS, grade.reason
    assert "3 request(s) answered 400 (at most 1 in a second)" in grade.reason


def test_retrying_a_400_faster_than_the_rate_limit_fails() -> None:
    burst = tuple(refused(2 + i / 10) for i in range(6))  # six in 0.6 s
    grade = grade_bad_request(observe(get(1), get(5), get(6, OWN), faulted=burst))
    assert grade.verdict is Verdict.FAIL
    assert "6 requests in one second" in grade.reason


def test_exiting_on_a_400_or_missing_the_next_event_fails() -> None:
    gone = observe(get(1), faulted=(refused(2),), exited=1, exited_t=2.1)
    assert grade_bad_request(gone).verdict is Verdict.FAIL
    late = observe(get(1), get(12, OWN), faulted=(refused(2),))
    assert grade_bad_request(late).verdict is Verdict.FAIL
    assert grade_bad_request(observe(get(1), get(6, OWN))).verdict is Verdict.WARN


def test_the_evidence_lists_the_requests_a_fault_answered_with_the_fault() -> None:
    evidence = evidence_of(observe(get(1), get(5), faulted=(refused(2),)), ())
    assert [(r.t, r.status, r.fault) for r in evidence.requests] == [
        (1.0, 200, ""),
        (2.0, 400, "bad-request"),
        (5.0, 200, ""),
    ]

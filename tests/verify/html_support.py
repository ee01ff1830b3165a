"""A small report with every kind of evidence, for the tests of the HTML page."""

from __future__ import annotations

from forewarn.verify.model import (
    Evidence,
    RequestRecord,
    RunReport,
    StateChange,
    TrialResult,
    Verdict,
)

HOSTILE = "<script>alert('x')</script> & \"quoted\""


def _get(t: float, status: int, fault: str = "") -> RequestRecord:
    return RequestRecord(
        t=t,
        at=f"2026-01-01T00:00:{int(t):02d}Z",
        method="GET",
        path="/metadata/scheduledevents",
        query="api-version=2020-07-01",
        headers={"metadata": "true"},
        status=status,
        fault=fault,
    )


def sample_report() -> RunReport:
    """Three trials: a fail with requests and states (one unanswered, one faulted), a pass
    whose reason holds markup, and an n/a with no evidence at all."""
    approve = RequestRecord(
        t=3.0,
        at="2026-01-01T00:00:03Z",
        method="POST",
        path="/metadata/scheduledevents",
        query="api-version=2020-07-01",
        headers={"metadata": "true"},
        status=200,
        sent='{"StartRequests": [{"EventId": "B"}]}',
    )
    failed = TrialResult(
        name="other-vms-events",
        title="Approves only its own VM's events",
        source="learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "
        '"Start an event"',
        requires="No StartRequests for an event whose Resources do not name this VM.",
        verdict=Verdict.FAIL,
        reason="approved event B, which names only vm1",
        evidence=Evidence(
            requests=(_get(1.0, 200), _get(2.0, 500, fault="500"), approve, _get(4.0, 0)),
            states=(
                StateChange(0.0, "2026-01-01T00:00:00Z", "HandlerStarted"),
                StateChange(1.5, "2026-01-01T00:00:01Z", "Scheduled", "B", "Reboot, vm1"),
                StateChange(3.5, "2026-01-01T00:00:03Z", "Started", "B"),
            ),
            notes=("the approval names B",),
        ),
        duration=4.2,
    )
    passed = TrialResult(
        name="metadata-header",
        title="Sends Metadata: true",
        source="SPEC 1",
        requires="Every request carries Metadata: true.",
        verdict=Verdict.PASS,
        reason=HOSTILE,
        evidence=Evidence(requests=(_get(0.5, 200),)),
        duration=1.0,
    )
    not_applicable = TrialResult(
        name="drained-before-approval",
        title="Drains before it approves",
        source="SPEC 3",
        requires="--drained-check exits 0 when the approval arrives.",
        verdict=Verdict.NA,
        reason="no --drained-check given",
    )
    return RunReport(
        handler="python my_handler.py",
        suite="quick",
        profile="dev",
        scaling="notices shortened to 30 s",
        started="2026-01-01T00:00:00Z",
        ended="2026-01-01T00:00:06Z",
        results=(failed, passed, not_applicable),
        timing={"notice.Reboot": 30.0, "first_call_delay": 5.0},
        version="0.0.test",
    )

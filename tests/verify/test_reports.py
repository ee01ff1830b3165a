"""The report as CI and people read it: JUnit XML and the terminal's table."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from forewarn.verify.model import (
    Evidence,
    RequestRecord,
    RunReport,
    StateChange,
    TrialResult,
    Verdict,
)
from forewarn.verify.reports import junit, table


def _result(name: str, verdict: Verdict) -> TrialResult:
    request = RequestRecord(
        t=2.0,
        at="2026-01-01T12:00:02+00:00",
        method="POST",
        path="/metadata/scheduledevents",
        query="api-version=2020-07-01",
        headers={"metadata": "true"},
        status=200,
        sent='{"StartRequests":[{"EventId":"B"}]}',
    )
    state = StateChange(0.0, "2026-01-01T12:00:00+00:00", "Scheduled", "B", "Reboot, User, vm1")
    return TrialResult(
        name=name,
        title=f"{name} title",
        source="docs/spec.md SPEC 3.2",
        requires="no approval of another VM's event",
        verdict=verdict,
        reason=f"{name} reason",
        evidence=Evidence((request,), (state,), ()),
        duration=1.5,
    )


REPORT = RunReport(
    handler="python h.py",
    suite="quick",
    profile="documented",
    scaling="notices shortened",
    started="2026-01-01T12:00:00+00:00",
    ended="2026-01-01T12:01:00+00:00",
    results=(
        _result("own-vm-only", Verdict.FAIL),
        _result("headers", Verdict.PASS),
        _result("drained-before-approval", Verdict.NA),
        _result("rate-limit", Verdict.WARN),
    ),
)


def test_junit_has_one_testcase_per_trial_and_the_evidence_in_a_failure() -> None:
    root = ET.fromstring(junit(REPORT))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "quick"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == ["own-vm-only", "headers", "drained-before-approval", "rate-limit"]
    failure = cases["own-vm-only"].find("failure")
    assert failure is not None
    assert failure.get("message") == "own-vm-only reason"
    assert failure.text is not None
    assert "POST /metadata/scheduledevents?api-version=2020-07-01" in failure.text
    assert "Scheduled B (Reboot, User, vm1)" in failure.text
    assert cases["drained-before-approval"].find("skipped") is not None
    assert cases["headers"].find("failure") is None
    warned = cases["rate-limit"].find("system-out")
    assert warned is not None
    assert (warned.text or "").startswith("WARN")
    assert all(case.get("time") == "1.500" for case in cases.values())


def test_the_table_lists_each_verdict_and_shows_evidence_of_failures_and_warnings() -> None:
    text = table(REPORT)
    lines = text.splitlines()
    assert lines[0].split() == ["TRIAL", "VERDICT", "REASON"]
    assert lines[1].split()[:2] == ["own-vm-only", "FAIL"]
    assert "FAIL own-vm-only: own-vm-only title" in text
    assert "WARN rate-limit: rate-limit title" in text
    assert "PASS headers" not in text  # a pass needs no evidence
    assert "4 trial(s): 1 pass, 1 fail, 1 warn, 1 n/a" in text

"""The verify report's model: its JSON form round-trips and its run-level answers."""

from __future__ import annotations

import json

import pytest

from forewarn.verify.model import (
    Evidence,
    ReportFormatError,
    RequestRecord,
    RunReport,
    StateChange,
    TrialResult,
    Verdict,
    excerpt,
    worst,
)


def _report(*verdicts: Verdict) -> RunReport:
    request = RequestRecord(
        t=1.5,
        at="2022-04-11T22:12:00+00:00",
        method="POST",
        path="/metadata/scheduledevents",
        query="api-version=2020-07-01",
        headers={"metadata": "true"},
        status=200,
        sent='{"StartRequests":[{"EventId":"A"}]}',
        received="",
        fault="",
    )
    state = StateChange(t=0.0, at="2022-04-11T22:11:58+00:00", state="Scheduled", event_id="A")
    results = tuple(
        TrialResult(
            name=f"trial-{index}",
            title="A trial",
            source="docs/spec.md SPEC 1",
            requires="something",
            verdict=verdict,
            reason="because",
            evidence=Evidence((request,), (state,), ("a note",)),
            duration=0.25,
        )
        for index, verdict in enumerate(verdicts)
    )
    return RunReport(
        handler="python h.py",
        suite="quick",
        profile="dev",
        scaling="minutes read as seconds",
        started="2026-01-01T00:00:00+00:00",
        ended="2026-01-01T00:01:00+00:00",
        results=results,
        timing={"notice.Reboot": 60.0},
        version="1.0",
    )


def test_a_report_round_trips_through_json_exactly() -> None:
    report = _report(Verdict.PASS, Verdict.FAIL, Verdict.WARN, Verdict.NA, Verdict.INFO)
    again = RunReport.from_json(report.to_json())
    assert again == report
    assert json.loads(report.to_json())["results"][1]["verdict"] == "fail"


def test_a_run_fails_only_on_a_failed_trial() -> None:
    assert _report(Verdict.PASS, Verdict.WARN, Verdict.NA, Verdict.INFO).exit_code == 0
    failing = _report(Verdict.PASS, Verdict.FAIL)
    assert failing.exit_code == 1
    assert [r.name for r in failing.failed] == ["trial-1"]
    assert failing.counts()[Verdict.FAIL] == 1
    assert failing.verdicts() == {"trial-0": Verdict.PASS, "trial-1": Verdict.FAIL}


def test_the_timeline_merges_states_and_requests_in_time_order() -> None:
    evidence = _report(Verdict.PASS).results[0].evidence
    assert [type(item).__name__ for item in evidence.timeline()] == [
        "StateChange",
        "RequestRecord",
    ]
    assert "POST /metadata/scheduledevents?api-version=2020-07-01" in evidence.describe()


@pytest.mark.parametrize(
    "text", ["[]", "not json", '{"format": 99}', '{"format": 1, "handler": "x"}']
)
def test_a_report_of_another_shape_is_refused_with_a_clear_error(text: str) -> None:
    with pytest.raises(ReportFormatError):
        RunReport.from_json(text)


def test_helpers() -> None:
    assert worst([Verdict.PASS, Verdict.WARN, Verdict.NA]) is Verdict.WARN
    assert worst([]) is Verdict.NA
    assert excerpt(b"x" * 500, limit=10) == "x" * 9 + "…"
    assert Verdict.NA.label == "N/A"

"""``forewarn verify --html``: the page a person reads, rendered from a report alone.

Issue text, "Reports people use": "``--html FILE`` (a page a person reads: each trial's
verdict, the timeline of the handler's requests against the event's states)"; the page is
self-contained (docs/verify.md, "Reports and exit status"). The last test opens it in a real
browser (Debian's chromium driven by Playwright), as the issue's "Done means" asks: "the HTML
page renders in a real browser (a Playwright test looks at it)"; skipped with the reason where
chromium or Playwright is missing, and failed under CI, which installs both
(tests/support/machine_support.py).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from machine_support import require_chromium

from forewarn.verify.html import render_html, source_link
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


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def having(self, tag: str, **wanted: str) -> list[dict[str, str]]:
        found = []
        for name, attrs in self.tags:
            classes = attrs.get("class", "").split()
            if name == tag and all(
                value in classes if key == "class_" else attrs.get(key) == value
                for key, value in wanted.items()
            ):
                found.append(attrs)
        return found


def _parsed(report: RunReport) -> _Elements:
    parser = _Elements()
    parser.feed(render_html(report))
    parser.close()
    return parser


def test_one_summary_row_and_one_section_per_trial_with_its_verdict() -> None:
    report = sample_report()
    page = _parsed(report)
    rows = page.having("tr", class_="verdict-row")
    assert [(r["data-trial"], r["data-verdict"]) for r in rows] == [
        ("other-vms-events", "fail"),
        ("metadata-header", "pass"),
        ("drained-before-approval", "na"),
    ]
    sections = page.having("section", class_="trial")
    assert [(s["id"], s["data-verdict"]) for s in sections] == [
        ("trial-other-vms-events", "fail"),
        ("trial-metadata-header", "pass"),
        ("trial-drained-before-approval", "na"),
    ]
    assert page.having("p", class_="outcome")[0]["data-exit-code"] == "1"
    text = "".join(page.text)
    assert "1 of 3 trials failed: exit status 1." in text
    for result in report.results:
        assert result.requires in text
        assert result.title in text


def test_the_timeline_marks_every_request_and_every_state() -> None:
    report = sample_report()
    page = _parsed(report)
    assert len(page.having("svg", class_="timeline")) == 2  # the n/a trial has no evidence
    failed = report.results[0].evidence
    assert [m["data-status"] for m in page.having("g", class_="request")] == [
        *(str(r.status) for r in failed.requests),
        "200",
    ]
    assert [m["data-state"] for m in page.having("g", class_="state")] == [
        s.state for s in failed.states
    ]
    # The table under the drawing lists them in time order; unfolded for the failed trial.
    assert len(page.having("tr", class_="request-entry")) == len(failed.requests) + 1
    assert len(page.having("tr", class_="state-entry")) == len(failed.states)
    assert [d for d in page.having("details") if "open" in d] == [{"open": ""}]
    assert "No request and no state change was recorded." in "".join(page.text)


def test_a_public_source_is_a_link_and_spec_stays_text() -> None:
    assert source_link("SPEC 3") == "SPEC 3"
    linked = source_link(
        'learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Start an event"'
    )
    assert linked.startswith(
        '<a href="https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events">'
    )
    assert linked.endswith(', "Start an event"')
    page = _parsed(sample_report())
    hrefs = [a["href"] for a in page.having("a")]
    assert "https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events" in hrefs


def test_values_are_escaped_and_nothing_is_fetched() -> None:
    html = render_html(sample_report())
    assert HOSTILE not in html
    assert "&lt;script&gt;alert('x')&lt;/script&gt; &amp;" in html
    page = _parsed(sample_report())
    assert not page.having("script")
    assert not page.having("link")
    assert not page.having("img")
    assert "url(" not in html
    outside = [a["href"] for a in page.having("a") if not a["href"].startswith("#")]
    assert outside == ["https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events"]


def test_a_saved_json_report_renders_the_same_page() -> None:
    report = sample_report()
    assert render_html(RunReport.from_json(report.to_json())) == render_html(report)


@pytest.mark.e2e
def test_the_page_in_a_browser_shows_verdicts_and_timelines(tmp_path: Path) -> None:
    chromium = require_chromium()
    from playwright import sync_api

    report = sample_report()
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(report), encoding="utf-8")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            fetched: list[str] = []
            page.on("request", lambda request: fetched.append(request.url))
            page.goto(page_file.as_uri())
            assert fetched == [page_file.as_uri()]  # self-contained: nothing else is loaded

            rows = page.locator("table.verdicts tr.verdict-row")
            assert rows.count() == len(report.results)
            for index, result in enumerate(report.results):
                row = rows.nth(index)
                assert row.get_attribute("data-verdict") == result.verdict.value
                assert row.locator(".badge").inner_text() == result.verdict.label
                assert row.is_visible()
            # The reason holding markup is shown as text, not run.
            assert rows.nth(1).locator("td").nth(3).inner_text() == HOSTILE

            failed = page.locator("section#trial-other-vms-events")
            assert failed.locator("dd.requires").inner_text() == report.results[0].requires
            timeline = failed.locator("svg.timeline")
            assert timeline.is_visible()
            box = timeline.bounding_box()
            assert box is not None
            assert box["width"] > 600
            assert box["height"] > 60
            evidence = report.results[0].evidence
            assert timeline.locator("g.request circle").count() == len(evidence.requests)
            assert timeline.locator("g.state").count() == len(evidence.states)
            # The failed trial's entries are unfolded; the passed one's are not.
            assert failed.locator("table.timeline-entries").is_visible()
            passed = page.locator("section#trial-metadata-header")
            assert not passed.locator("table.timeline-entries").is_visible()

            # The summary row links to its section.
            rows.nth(0).locator("a").click()
            assert page.url.endswith("#trial-other-vms-events")
            assert page.locator("p.outcome").inner_text() == (
                "1 of 3 trials failed: exit status 1."
            )
        finally:
            browser.close()

"""The ``--html`` page in a real browser (Debian's chromium driven by Playwright): opened from
the file as a person would, it shows one verdict row per trial, a section per trial with its
reason and what a pass requires, and each timeline drawn with its request and state marks.

Issue text, "Done means": "the HTML page renders in a real browser (a Playwright test looks at
it)". Skipped with the reason where chromium or Playwright is missing, and failed under CI,
which installs both (tests/e2e/machine_support.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_support import require_chromium

from forewarn.verify.html import render_html

from .html_support import HOSTILE, sample_report

pytestmark = pytest.mark.e2e


def test_the_page_shows_verdicts_and_timelines(tmp_path: Path) -> None:
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

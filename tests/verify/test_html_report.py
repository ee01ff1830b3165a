"""``forewarn verify --html``: the page a person reads, rendered from a report alone.

Issue text, "Reports people use": "``--html FILE`` (a page a person reads: each trial's
verdict, the timeline of the handler's requests against the event's states)"; the page is
self-contained (docs/verify.md, "Reports"). The browser's view of it is in
test_html_report_browser.py.
"""

from __future__ import annotations

from html.parser import HTMLParser

from forewarn.verify.html import render_html, source_link
from forewarn.verify.model import RunReport

from .html_support import HOSTILE, sample_report


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

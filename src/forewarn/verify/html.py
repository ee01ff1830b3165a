"""A `forewarn verify` report as one self-contained HTML page (``--html FILE``).

The page is for a person deciding whether a handler is right: a summary (what was graded, on
which timing, how many trials got each verdict), one row per trial, then per trial its verdict,
the reason, what a pass requires, where the rule is written, and a **timeline**: the handler's
requests as marks against the event's states (Scheduled, NotBefore, Started, the impact, a
fault...) on the trial's own time axis, drawn in inline SVG and listed in a table below it.

Rendered from a :class:`~forewarn.verify.model.RunReport` alone (so a saved ``--json`` report
renders the same page), with the standard library only: no script, no external stylesheet,
font or image; every value from the report is escaped. Stable hooks for tests and for anyone
styling or scraping the page: ``tr.verdict-row[data-trial][data-verdict]`` in the summary,
``section.trial#trial-NAME[data-verdict]`` per trial, ``svg.timeline`` with
``g.request[data-status]`` and ``g.state[data-state]`` marks, ``table.timeline-entries``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

from forewarn.verify.model import (
    Evidence,
    RequestRecord,
    RunReport,
    StateChange,
    TrialResult,
    Verdict,
)

#: Verdicts in the order the summary counts them.
_ORDER = (Verdict.FAIL, Verdict.WARN, Verdict.PASS, Verdict.INFO, Verdict.NA)

#: Width and geometry of a timeline drawing, in SVG user units (it scales to the page).
_WIDTH = 960
_LEFT = 70
_RIGHT = 20
_STATE_TOP = 18
_ROWS = {"GET": 70, "POST": 100}
_OTHER_ROW = 130
_HEIGHT = 160
#: A request's mark by its answer (no answer: a hollow black ring).
_STATUS_COLORS = {
    "2xx": "#2e7d32",
    "3xx": "#6b6b6b",
    "4xx": "#b26a00",
    "5xx": "#c62828",
    "none": "#000000",
}

_STYLE = """
:root { color-scheme: light; --fail: #c62828; --warn: #b26a00; --pass: #2e7d32;
  --info: #1565c0; --na: #6b6b6b; --line: #d0d0d0; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1100px;
  padding: 0 1rem; color: #1b1b1b; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .4rem; }
code, .mono { font-family: ui-monospace, monospace; font-size: .9em; }
td.mono, table.verdicts code { white-space: nowrap; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
dl.run { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.run dt { font-weight: 600; }
dl.run dd { margin: 0; }
.badge { display: inline-block; min-width: 3.2rem; text-align: center; border-radius: 3px;
  padding: 0 .4rem; color: #fff; font-weight: 600; font-size: .85em; }
.badge.fail { background: var(--fail); } .badge.warn { background: var(--warn); }
.badge.pass { background: var(--pass); } .badge.info { background: var(--info); }
.badge.na { background: var(--na); }
.outcome { font-size: 1.1rem; font-weight: 600; }
section.trial { border-top: 2px solid var(--line); margin-top: 1.5rem; }
section.trial h2 { display: flex; gap: .6rem; align-items: baseline; }
section.trial dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
section.trial dt { font-weight: 600; }
section.trial dd { margin: 0; }
svg.timeline { width: 100%; height: auto; background: #fafafa; border: 1px solid var(--line); }
svg.timeline text { font: 11px system-ui, sans-serif; fill: #333; }
table.timeline-entries td { font-family: ui-monospace, monospace; font-size: .85em; }
tr.state-entry td { background: #f3f3f8; }
.notes li { font-size: .95em; }
"""


def _dot(color: str, fill: str) -> str:
    return (
        '<svg width="10" height="10" viewBox="0 0 10 10" aria-hidden="true">'
        f'<circle cx="5" cy="5" r="4" fill="{fill}" stroke="{color}" stroke-width="1.5"/></svg>'
    )


#: What the marks of a timeline mean, shown once under the summary.
_LEGEND = (
    "Timelines: each dot is a request of the handler, on the row of its method, at the "
    "moment it was sent; "
    + ", ".join(
        f"{_dot(_STATUS_COLORS[kind], 'none' if kind == 'none' else _STATUS_COLORS[kind])} {text}"
        for kind, text in (
            ("2xx", "answered 2xx"),
            ("3xx", "304"),
            ("4xx", "4xx"),
            ("5xx", "5xx"),
            ("none", "no answer"),
        )
    )
    + "; dashed lines are the event's states and the engine's marks (t: seconds of platform "
    "time since the trial began)."
)


def render_html(report: RunReport) -> str:
    """The whole page for ``report``, as a string (UTF-8 when written)."""
    verdict = "no trial failed" if report.passed else f"{len(report.failed)} trial(s) failed"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>forewarn verify: {_text(report.handler)} ({verdict})</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        _summary(report),
        _verdict_table(report.results),
        *(_trial_section(result) for result in report.results),
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


# -- the summary ---------------------------------------------------------------------------


def _summary(report: RunReport) -> str:
    counts = report.counts()
    tally = " ".join(
        f'<span class="count" data-verdict="{v.value}">{_badge(v)} {counts[v]}</span>'
        for v in _ORDER
    )
    outcome = (
        "No trial failed: exit status 0."
        if report.passed
        else f"{len(report.failed)} of {len(report.results)} trials failed: exit status 1."
    )
    timing = ", ".join(f"{name} {_seconds(value)}" for name, value in sorted(report.timing.items()))
    rows = [
        ("Handler", f"<code>{_text(report.handler)}</code>"),
        ("Suite", _text(report.suite)),
        ("Timing profile", _text(report.profile)),
        ("Scaling", _text(report.scaling) or "none: the documented timings"),
        ("Timings used", _text(timing) or "-"),
        ("Started", _text(report.started)),
        ("Ended", _text(report.ended)),
        ("forewarn", _text(report.version) or "-"),
    ]
    listed = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows)
    return (
        '<header id="summary">'
        "<h1>forewarn verify</h1>"
        f'<p class="outcome" data-exit-code="{report.exit_code}">{outcome}</p>'
        f'<p class="tally">{tally}</p>'
        f'<dl class="run">{listed}</dl>'
        f'<p class="legend">{_LEGEND}</p>'
        "</header>"
    )


def _verdict_table(results: Iterable[TrialResult]) -> str:
    rows = []
    for result in results:
        rows.append(
            f'<tr class="verdict-row" data-trial="{_attr(result.name)}" '
            f'data-verdict="{result.verdict.value}">'
            f"<td>{_badge(result.verdict)}</td>"
            f'<td><a href="#{_anchor(result.name)}"><code>{_text(result.name)}</code></a></td>'
            f"<td>{_text(result.title)}</td>"
            f"<td>{_text(result.reason)}</td>"
            f'<td class="mono">{_seconds(result.duration)}</td>'
            "</tr>"
        )
    return (
        '<table class="verdicts">'
        "<thead><tr><th>Verdict</th><th>Trial</th><th>What it checks</th><th>Why</th>"
        "<th>Took</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody>"
        "</table>"
    )


# -- one trial -----------------------------------------------------------------------------


def _trial_section(result: TrialResult) -> str:
    evidence = result.evidence
    notes = "".join(f"<li>{_text(note)}</li>" for note in evidence.notes)
    return (
        f'<section class="trial" id="{_anchor(result.name)}" '
        f'data-trial="{_attr(result.name)}" data-verdict="{result.verdict.value}">'
        f"<h2>{_badge(result.verdict)} <code>{_text(result.name)}</code> "
        f"{_text(result.title)}</h2>"
        "<dl>"
        f'<dt>Verdict</dt><dd class="reason">{_text(result.reason)}</dd>'
        f'<dt>A pass requires</dt><dd class="requires">{_text(result.requires)}</dd>'
        f'<dt>Source</dt><dd class="source">{source_link(result.source)}</dd>'
        f"<dt>Took</dt><dd>{_seconds(result.duration)}</dd>"
        "</dl>"
        f"{_timeline_svg(evidence)}"
        f"{_timeline_table(evidence, open_=result.failed)}"
        + (f'<ul class="notes">{notes}</ul>' if notes else "")
        + "</section>"
    )


_URL = re.compile(r"(?:https?://)?((?:learn|docs)\.microsoft\.com/[^\s,;\"'<>()]+)")


def source_link(source: str) -> str:
    """The source as HTML: a public documentation address becomes a link (``https://`` added
    where the citation leaves it out), the rest (the section, ``SPEC N``) stays text."""
    match = _URL.search(source)
    if match is None:
        return _text(source)
    address = "https://" + match.group(1).rstrip(".")
    before, after = source[: match.start()], source[match.end() :]
    link = f'<a href="{_attr(address)}">{_text(match.group(0))}</a>'
    return f"{_text(before)}{link}{_text(after)}"


def _timeline_svg(evidence: Evidence) -> str:
    """Requests (one row per method) against the states, on the trial's time axis."""
    if not evidence.requests and not evidence.states:
        return '<p class="timeline-empty">No request and no state change was recorded.</p>'
    times = [item.t for item in evidence.timeline()]
    start, end = min(0.0, *times), max(times)
    span = end - start or 1.0

    def x(t: float) -> float:
        return round(_LEFT + (t - start) / span * (_WIDTH - _LEFT - _RIGHT), 1)

    marks: list[str] = []
    for label, row in (*_ROWS.items(), ("other", _OTHER_ROW)):
        marks.append(
            f'<line x1="{_LEFT}" y1="{row}" x2="{_WIDTH - _RIGHT}" y2="{row}" stroke="#e4e4e4"/>'
            f'<text x="8" y="{row + 4}">{label}</text>'
        )
    for index, state in enumerate(evidence.states):
        marks.append(_state_mark(state, x(state.t), index))
    for request in evidence.requests:
        row = _ROWS.get(request.method.upper(), _OTHER_ROW)
        marks.append(_request_mark(request, x(request.t), row))
    axis = (
        f'<text x="{_LEFT}" y="{_HEIGHT - 6}">t=+{start:.1f}s</text>'
        f'<text x="{_WIDTH - _RIGHT}" y="{_HEIGHT - 6}" text-anchor="end">t=+{end:.1f}s</text>'
    )
    return (
        f'<svg class="timeline" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        "aria-label=\"the handler's requests against the event's states\" "
        'xmlns="http://www.w3.org/2000/svg">'
        f"{''.join(marks)}{axis}</svg>"
    )


def _state_mark(state: StateChange, at: float, index: int) -> str:
    label_y = _STATE_TOP + (index % 3) * 12
    return (
        f'<g class="state" data-state="{_attr(state.state)}" data-t="{state.t}">'
        f"<title>{_text(state.describe())}</title>"
        f'<line x1="{at}" y1="{label_y + 3}" x2="{at}" y2="{_OTHER_ROW + 10}" '
        'stroke="#7a5cc4" stroke-dasharray="3 2"/>'
        f'<text x="{at + 2}" y="{label_y}">{_text(state.state)}</text>'
        "</g>"
    )


def _request_mark(request: RequestRecord, at: float, row: int) -> str:
    color = _status_color(request.status)
    fill = "none" if request.status == 0 else color
    return (
        f'<g class="request" data-status="{request.status}" data-t="{request.t}" '
        f'data-method="{_attr(request.method)}">'
        f"<title>{_text(request.describe())}</title>"
        f'<circle cx="{at}" cy="{row}" r="4" fill="{fill}" stroke="{color}" stroke-width="1.5"/>'
        "</g>"
    )


def _status_color(status: int) -> str:
    if status == 0:
        return _STATUS_COLORS["none"]
    return _STATUS_COLORS[f"{min(max(status // 100, 2), 5)}xx"]


def _timeline_table(evidence: Evidence, *, open_: bool) -> str:
    """Every entry of the timeline as a row; shown unfolded for a failed trial."""
    rows = []
    for item in evidence.timeline():
        if isinstance(item, StateChange):
            what = f"{item.state} {item.event_id}".strip()
            rows.append(
                f'<tr class="state-entry"><td>+{item.t:.1f}s</td><td>state</td>'
                f"<td>{_text(what)}</td><td>{_text(item.detail)}</td></tr>"
            )
        else:
            answer = str(item.status) if item.status else "no answer"
            fault = f" [{item.fault}]" if item.fault else ""
            sent = f" {item.sent}" if item.sent else ""
            rows.append(
                f'<tr class="request-entry" data-status="{item.status}"><td>+{item.t:.1f}s</td>'
                f"<td>{_text(item.method)}</td><td>{_text(item.target + sent)}</td>"
                f"<td>{_text(answer + fault)}</td></tr>"
            )
    if not rows:
        return ""
    return (
        f"<details{' open' if open_ else ''}><summary>Timeline entries</summary>"
        '<table class="timeline-entries"><thead><tr><th>t</th><th>what</th><th></th>'
        f"<th>answer / detail</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "</details>"
    )


# -- small pieces --------------------------------------------------------------------------


def _badge(verdict: Verdict) -> str:
    return f'<span class="badge {verdict.value}">{verdict.label}</span>'


def _anchor(name: str) -> str:
    return "trial-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


def _seconds(value: float) -> str:
    return f"{value:.1f} s"


def _text(value: str) -> str:
    return escape(value, quote=False)


def _attr(value: str) -> str:
    return escape(value, quote=True)


__all__ = ["render_html", "source_link"]

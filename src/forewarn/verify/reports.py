"""A :class:`~forewarn.verify.model.RunReport` as people and CI read it: the terminal's
table, and JUnit XML (one testcase per trial, the evidence in a failure's message, so any
CI's test view shows why). The HTML page renders from the same report."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from forewarn.verify.model import RunReport, TrialInfo, TrialResult, Verdict


def table(report: RunReport, *, evidence: bool = True) -> str:
    """The verdicts as a table, the failures' and warnings' evidence under it, then the sum."""
    width = max([len(r.name) for r in report.results] + [5])
    lines = [f"{'TRIAL':<{width}}  VERDICT  REASON"]
    for result in report.results:
        lines.append(f"{result.name:<{width}}  {result.verdict.label:<7}  {result.reason}")
    if evidence:
        for result in report.results:
            if result.verdict in (Verdict.FAIL, Verdict.WARN):
                lines += ["", f"{result.verdict.label} {result.name}: {result.title}"]
                lines.append(f"  requires: {result.requires}")
                lines.append(f"  source:   {result.source}")
                lines += ["  " + line for line in result.evidence.describe(20).splitlines()]
    counts = report.counts()
    summary = ", ".join(f"{n} {v.label.lower()}" for v, n in counts.items() if n)
    lines += ["", f"{len(report.results)} trial(s): {summary or 'none'}"]
    lines.append(f"timing: {report.scaling}")
    return "\n".join(lines)


def listing(trials: list[TrialInfo]) -> str:
    """``--list``: each trial, its suites, what a pass requires and its source."""
    lines = []
    for info in trials:
        lines.append(f"{info.name}  [{', '.join(info.suites)}]  {info.title}")
        lines.append(f"    requires: {info.requires}")
        lines.append(f"    source:   {info.source}")
    return "\n".join(lines)


def _testcase(suite: ET.Element, result: TrialResult) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"forewarn.verify.{suite.get('name')}",
        name=result.name,
        time=f"{result.duration:.3f}",
    )
    detail = (
        f"{result.reason}\nrequires: {result.requires}\nsource: {result.source}\n\n"
        + result.evidence.describe()
    )
    if result.verdict is Verdict.FAIL:
        failure = ET.SubElement(case, "failure", message=result.reason, type="fail")
        failure.text = detail
    elif result.verdict is Verdict.NA:
        ET.SubElement(case, "skipped", message=result.reason)
    else:
        out = ET.SubElement(case, "system-out")
        out.text = f"{result.verdict.label}: {detail}"


def junit(report: RunReport) -> bytes:
    """JUnit XML: one ``testsuite`` named for the suite, one ``testcase`` per trial; a fail
    is a ``failure`` carrying the evidence, n/a is ``skipped``, warn and info pass with
    their verdict in ``system-out``."""
    counts = report.counts()
    suites = ET.Element("testsuites", name="forewarn verify")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=report.suite,
        tests=str(len(report.results)),
        failures=str(counts[Verdict.FAIL]),
        errors="0",
        skipped=str(counts[Verdict.NA]),
        time=f"{sum(r.duration for r in report.results):.3f}",
        timestamp=report.started,
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("handler", report.handler),
        ("profile", report.profile),
        ("scaling", report.scaling),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    for result in report.results:
        _testcase(suite, result)
    ET.indent(suites)
    return bytes(ET.tostring(suites, encoding="utf-8", xml_declaration=True))


def write_junit(report: RunReport, path: Path) -> None:
    path.write_bytes(junit(report))


__all__ = ["junit", "listing", "table", "write_junit"]

"""What a `forewarn verify` run found: verdicts, evidence and the report, as plain data.

This module is the contract between the engine that runs trials and everything that shows
their outcome (the terminal table, ``--json``, ``--junit``, ``--html``, the pytest plugin): a
renderer needs a :class:`RunReport` and nothing else. It is pure (standard library only, no
I/O, no clock), so a report read back from JSON renders exactly as the run that made it.

The shape::

    RunReport                      one run: the handler, the suite, the timing, the results
    ├── handler, suite, profile    what was graded and how (``scaling``: notices shrunk, and why)
    ├── timing                     every duration the run used, in seconds, by name
    ├── started, ended             wall-clock times (UTC) of the run
    └── results: TrialResult...    one per trial, in the order run
        ├── name, title            ``reboot-notice``, "Notices a Reboot in time"
        ├── source                 where the rule is written (a public URL and section, or SPEC N)
        ├── requires               what a pass requires, in one sentence
        ├── verdict, reason        pass / fail / warn / na / info, and why in one line
        ├── duration               seconds of real time the trial took
        └── evidence: Evidence
            ├── requests: RequestRecord...   the handler's requests around the decision
            ├── states: StateChange...       the event's states on the same timeline
            └── notes                        anything else the grade rests on

Times on the evidence timeline are ``t``: seconds since the trial began, in the *platform's*
time (the clock the engine drives), so the handler's requests and the event's states line up
on one axis; ``at`` is the same moment as the platform's ISO 8601 timestamp.

``RunReport.to_json()`` / ``RunReport.from_json(text)`` round-trip exactly; the JSON carries
``"format": 1`` and only strings, numbers, booleans, lists and objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from forewarn.errors import ForewarnError

#: The version of the JSON form. A reader refuses any other.
FORMAT = 1

#: The longest excerpt of a body kept in the evidence, in characters.
EXCERPT_LIMIT = 400


class Verdict(StrEnum):
    """A trial's grade.

    ``FAIL`` is what Azure would make go wrong; ``WARN`` is a risk or a practice short of what
    the documentation recommends (never a failure of the run); ``INFO`` an observation of good
    practice; ``NA`` a trial that does not apply to this handler (it never approves, say).
    """

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    NA = "na"
    INFO = "info"

    @property
    def label(self) -> str:
        """The short upper-case word a table or page shows."""
        return {"na": "N/A"}.get(self.value, self.value.upper())


class VerifyError(ForewarnError):
    """A run that could not happen (unknown trial, handler not found or gone at once, an
    address taken): the CLI prints it as one line and exits 2."""


class ReportFormatError(ForewarnError):
    """A JSON report this version cannot read (another format, a missing field)."""


def excerpt(body: bytes | str, limit: int = EXCERPT_LIMIT) -> str:
    """A body as text short enough for a report: decoded leniently, cut with an ellipsis."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request the handler sent, and what it was answered.

    ``status`` 0 means no answer (a paused or deleted VM, a reset, a held request the handler
    gave up on); ``fault`` names the injected fault it met, if any (``"500"``, ``"reset"``...).
    ``headers`` keeps the request headers a trial grades (lower-cased names).
    """

    t: float
    at: str
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    status: int
    sent: str = ""
    received: str = ""
    fault: str = ""

    @property
    def target(self) -> str:
        """Path and query as the request line carried them."""
        return f"{self.path}?{self.query}" if self.query else self.path

    def describe(self) -> str:
        """One line: ``t=+12.0s GET /metadata/scheduledevents?... -> 200``."""
        answer = str(self.status) if self.status else "no answer"
        fault = f" [{self.fault}]" if self.fault else ""
        sent = f" body={self.sent!r}" if self.sent else ""
        return f"t=+{self.t:.1f}s {self.method} {self.target}{sent} -> {answer}{fault}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "at": self.at,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": dict(self.headers),
            "status": self.status,
            "sent": self.sent,
            "received": self.received,
            "fault": self.fault,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestRecord:
        return cls(
            t=float(data["t"]),
            at=str(data["at"]),
            method=str(data["method"]),
            path=str(data["path"]),
            query=str(data["query"]),
            headers={str(k): str(v) for k, v in dict(data["headers"]).items()},
            status=int(data["status"]),
            sent=str(data.get("sent", "")),
            received=str(data.get("received", "")),
            fault=str(data.get("fault", "")),
        )


@dataclass(frozen=True, slots=True)
class StateChange:
    """A moment of the event's life (or the VM's) on the trial's timeline.

    ``state`` is an event state (``Scheduled``, ``Started``, ``Completed``, ``Canceled``) or
    one of the engine's marks (``NotBefore``, ``ImpactStart``, ``ImpactEnd``, ``Deleted``,
    ``Fault``, ``FaultCleared``, ``HandlerStarted``, ``HandlerExited``); ``event_id`` is empty
    for a mark about the VM; ``detail`` says more in a few words (``Reboot, User, notice 60s``).
    """

    t: float
    at: str
    state: str
    event_id: str = ""
    detail: str = ""

    def describe(self) -> str:
        what = f"{self.state} {self.event_id}".strip()
        return f"t=+{self.t:.1f}s {what}" + (f" ({self.detail})" if self.detail else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "at": self.at,
            "state": self.state,
            "event_id": self.event_id,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateChange:
        return cls(
            t=float(data["t"]),
            at=str(data["at"]),
            state=str(data["state"]),
            event_id=str(data.get("event_id", "")),
            detail=str(data.get("detail", "")),
        )


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a verdict rests on: requests and states on one timeline, and notes."""

    requests: tuple[RequestRecord, ...] = ()
    states: tuple[StateChange, ...] = ()
    notes: tuple[str, ...] = ()

    def timeline(self) -> list[RequestRecord | StateChange]:
        """Requests and states merged in time order (a state first at a tie)."""
        merged: list[RequestRecord | StateChange] = [*self.states, *self.requests]
        return sorted(merged, key=lambda item: (item.t, isinstance(item, RequestRecord)))

    def describe(self, limit: int = 40) -> str:
        """The timeline as lines of text (the last ``limit`` entries), then the notes."""
        lines = [item.describe() for item in self.timeline()]
        if len(lines) > limit:
            lines = [f"... {len(lines) - limit} earlier entries", *lines[-limit:]]
        return "\n".join([*lines, *(f"note: {note}" for note in self.notes)])

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": [r.to_dict() for r in self.requests],
            "states": [s.to_dict() for s in self.states],
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        return cls(
            requests=tuple(RequestRecord.from_dict(r) for r in data.get("requests", [])),
            states=tuple(StateChange.from_dict(s) for s in data.get("states", [])),
            notes=tuple(str(n) for n in data.get("notes", [])),
        )


@dataclass(frozen=True, slots=True)
class TrialInfo:
    """A trial as ``--list`` shows it: its name, what it checks, its source, its suites."""

    name: str
    title: str
    source: str
    requires: str
    suites: tuple[str, ...] = ("full",)


@dataclass(frozen=True, slots=True)
class TrialResult:
    """One trial's outcome. ``duration`` is the real time it took, in seconds."""

    name: str
    title: str
    source: str
    requires: str
    verdict: Verdict
    reason: str
    evidence: Evidence = field(default_factory=Evidence)
    duration: float = 0.0

    @property
    def failed(self) -> bool:
        return self.verdict is Verdict.FAIL

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "source": self.source,
            "requires": self.requires,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "evidence": self.evidence.to_dict(),
            "duration": self.duration,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialResult:
        return cls(
            name=str(data["name"]),
            title=str(data["title"]),
            source=str(data["source"]),
            requires=str(data["requires"]),
            verdict=Verdict(data["verdict"]),
            reason=str(data["reason"]),
            evidence=Evidence.from_dict(data.get("evidence", {})),
            duration=float(data.get("duration", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class RunReport:
    """A whole run. ``started``/``ended`` are ISO 8601 UTC wall-clock times.

    ``profile`` is the timing profile the notices come from (``documented``, ``dev``...),
    ``timing`` every duration actually used (seconds, by the profile's names such as
    ``notice.Reboot`` or ``first_call_delay``), and ``scaling`` says in words how those differ
    from Azure's documented ones and why (a handler's timers allow shorter notices).
    """

    handler: str
    suite: str
    profile: str
    scaling: str
    started: str
    ended: str
    results: tuple[TrialResult, ...] = ()
    timing: Mapping[str, float] = field(default_factory=dict)
    version: str = ""

    @property
    def failed(self) -> tuple[TrialResult, ...]:
        return tuple(r for r in self.results if r.verdict is Verdict.FAIL)

    @property
    def passed(self) -> bool:
        """No trial failed (warnings and n/a do not fail a run)."""
        return not self.failed

    @property
    def exit_code(self) -> int:
        """0 when no trial failed, else 1 (exit 2, a run that could not happen, has no report)."""
        return 0 if self.passed else 1

    def counts(self) -> dict[Verdict, int]:
        """How many trials got each verdict, every verdict present (0 when none)."""
        found = dict.fromkeys(Verdict, 0)
        for result in self.results:
            found[result.verdict] += 1
        return found

    def result(self, name: str) -> TrialResult:
        """The result of the trial ``name`` (``KeyError`` when it was not run)."""
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def verdicts(self) -> dict[str, Verdict]:
        """Each trial's verdict by name, the shape a test of a handler compares against."""
        return {result.name: result.verdict for result in self.results}

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": self.version,
            "handler": self.handler,
            "suite": self.suite,
            "profile": self.profile,
            "scaling": self.scaling,
            "timing": dict(self.timing),
            "started": self.started,
            "ended": self.ended,
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunReport:
        if data.get("format") != FORMAT:
            raise ReportFormatError(f"not a forewarn verify report of format {FORMAT}")
        try:
            return cls(
                handler=str(data["handler"]),
                suite=str(data["suite"]),
                profile=str(data["profile"]),
                scaling=str(data["scaling"]),
                started=str(data["started"]),
                ended=str(data["ended"]),
                results=tuple(TrialResult.from_dict(r) for r in data["results"]),
                timing={str(k): float(v) for k, v in dict(data.get("timing", {})).items()},
                version=str(data.get("version", "")),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ReportFormatError(f"a verify report missing or mistyping {error}") from error

    @classmethod
    def from_json(cls, text: str | bytes) -> RunReport:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ReportFormatError(f"not JSON: {error}") from error
        if not isinstance(data, dict):
            raise ReportFormatError("a verify report is a JSON object")
        return cls.from_dict(data)


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most serious of several verdicts (fail > warn > pass > info > na); NA for none."""
    order = [Verdict.NA, Verdict.INFO, Verdict.PASS, Verdict.WARN, Verdict.FAIL]
    return max(verdicts, key=order.index, default=Verdict.NA)


__all__ = [
    "EXCERPT_LIMIT",
    "FORMAT",
    "Evidence",
    "ReportFormatError",
    "RequestRecord",
    "RunReport",
    "StateChange",
    "TrialInfo",
    "TrialResult",
    "Verdict",
    "VerifyError",
    "excerpt",
    "worst",
]

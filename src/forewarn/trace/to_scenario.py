"""``forewarn scenario from-trace``: a scenario that makes forewarn show the recorded VM the
documents of a trace, with the same events, notices and gaps.

Each recorded change becomes what makes it on forewarn's platform, at the recorded moment:
an event first shown Scheduled is an ``event`` step with its type, source, Description,
DurationInSeconds and the notice that gives the recorded NotBefore; one first shown Started
is made Started; a start before NotBefore is an approval as the VM (the trace's own, when it
recorded one); a Scheduled event gone is a cancellation; a Started event gone sets how long it
stays Started (``startedFor``). Each document is then an ``expect`` of every field but the
EventId (the platform makes its own), at the moment it was recorded; the clock is set to the
trace's first moment and moved exactly between them, so NotBefore texts match to the second.

Some traces say what forewarn's platform cannot do, and the conversion stops there, naming
the line: an event first seen closer to its NotBefore than the profile's minimum notice with
no room to have made it earlier, one still Scheduled after its NotBefore (forewarn starts an
event at its NotBefore), one changed in place, events in another order than forewarn shows
them, a Started event over sooner than its impact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime as parse_http_date
from typing import Any

import yaml

from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.events import Event, EventStatus
from forewarn.domain.timing import PROFILES, TimingProfile
from forewarn.scenario.durations import format_duration
from forewarn.trace.events import recorded_events
from forewarn.trace.format import Approval, DocumentRecord, Trace, TraceError, format_time

#: Where the VMs of the fleet written beside a scenario answer.
FLEET_ADDRESSES = "127.0.70."


@dataclass
class _Made:
    """An event as forewarn will make it: when, with what notice, and when it ends."""

    event: Event
    line: int
    created: datetime
    notice: timedelta | None
    started: datetime | None = None
    approved: datetime | None = None
    approved_by_trace: bool = False
    cancelled: datetime | None = None
    removed: datetime | None = None
    #: The lines of the documents its start and its end come before.
    start_line: int = 0
    end_line: int | None = None


@dataclass
class _Plan:
    """Steps at instants, in the order of the trace's lines: what a document shows happens
    (order 0) before the document is expected (order 1), and after the one above it, even
    within one second of the Date header."""

    steps: list[tuple[datetime, int, int, int, dict[str, Any]]] = field(default_factory=list)

    def add(self, at: datetime, line: int, order: int, step: dict[str, Any]) -> None:
        self.steps.append((at, line, order, len(self.steps), step))


@dataclass(frozen=True)
class Conversion:
    """The scenario's YAML, and the fleet it needs (the recorded VM, and every other VM the
    events name, in one availability set so the recorded VM sees what they see)."""

    scenario: str
    fleet: str
    vm: str


def _fail(trace: Trace, line: int, message: str) -> TraceError:
    return TraceError(f"{trace.source}:{line}: cannot be expressed on forewarn: {message}")


def _match(event: Event, fields: Mapping[str, Any]) -> dict[str, Any]:
    """What selects ``event`` in the VM's document (it has no EventId of the trace's)."""
    keys = ("EventType", "Resources", "Description", "EventSource", "NotBefore")
    return {key: fields[key] for key in keys if key in fields}


def convert(
    trace: Trace,
    *,
    vm: str | None = None,
    profile: str = "documented",
    fleet_path: str | None = None,
) -> Conversion:
    """The scenario reproducing ``trace``; TraceError naming the line it cannot express."""
    timing = PROFILES[profile]
    name = vm or trace.vm_name
    if name is None:
        raise TraceError(
            f"{trace.source}:1: the start line's compute metadata names no VM; give --vm NAME"
        )
    documents = trace.documents
    if not documents:
        raise TraceError(f"{trace.source}: holds no document to reproduce")
    times = _platform_times(trace)
    made = _plan_events(trace, documents, timing, times)
    shown = [recorded_events(d, trace.source) for d in documents]
    incarnations = _incarnations(documents, made, times)
    plan = _Plan()
    for entry in made.values():
        _event_steps(plan, name, entry)
    version = trace.start.api_version
    for document in documents:
        expectation: dict[str, Any] = {"vm": name}
        if version != CURRENT_VERSION.name:
            expectation["apiVersion"] = version
        if incarnations:
            expectation["incarnation"] = document.incarnation
        expectation["events"] = [
            {k: v for k, v in raw.items() if k != "EventId"} for raw in document.events
        ]
        title = f"line {document.line}: DocumentIncarnation {document.incarnation}"
        plan.add(times[document.line], document.line, 1, {"title": title, "expect": expectation})
    steps = _timed(plan)
    vms = _vms(name, shown)
    header = {
        "name": f"from trace {trace.source}",
        "description": (
            f"The {len(documents)} documents {name} was shown from {format_time(documents[0].at)}"
            f" to {format_time(documents[-1].at)} ({trace.source}), remade on forewarn's "
            "platform; EventIds are forewarn's own."
        ),
    }
    if fleet_path is not None:
        header["fleet"] = fleet_path
    header["profile"] = profile
    start = steps[0]["set-clock"]
    comment = (
        f"# made by: forewarn scenario from-trace {trace.source}\n"
        f"# run on: forewarn serve --fleet {fleet_path or 'FLEET'} --clock manual "
        f"--profile {profile} --start {start}\n"
        f"#   then: forewarn scenario run THIS-FILE\n"
    )
    first = times[documents[0].line]
    latest = max(entry.created for entry in made.values()) if made else first
    idle = timing.idle_period
    if latest - first >= idle:
        comment += (
            f"# forewarn turns a VM's Scheduled Events off after {format_duration(idle)}"
            " without a request,\n# and a scenario's checks are none: keep a poller on {name} (the"
            " application under test,\n# or forewarn record), or serve with --timing "
            f"idle_period={format_duration(latest - first + idle)}.\n"
        )
    if not incarnations:
        comment += (
            "# DocumentIncarnation is not checked: the trace's moves otherwise than forewarn's,\n"
            "# which moves by one for each event shown, started or removed.\n"
        )
    scenario = comment + yaml.safe_dump({**header, "steps": steps}, sort_keys=False, width=100)
    return Conversion(scenario, _fleet(trace, name, vms), name)


def _platform_times(trace: Trace) -> dict[int, datetime]:
    """Each document's and approval's time on the platform's clock, by line: the ``Date`` it
    was answered with (the clock NotBefore is read on; a second's resolution), else the
    recording machine's time (on Azure the two agree; on a manual clock only Date does)."""
    times: dict[int, datetime] = {}
    for record in trace.records:
        if isinstance(record, DocumentRecord):
            date = record.header("Date")
        elif isinstance(record, Approval):
            date = record.date
        else:
            continue
        try:
            moment = record.at if date is None else parse_http_date(date)
        except (TypeError, ValueError):
            moment = None
        if moment is None or moment.tzinfo is None:
            raise TraceError(f"{trace.source}:{record.line}: Date {date!r} is not an HTTP date")
        times[record.line] = moment.astimezone(UTC)
    return times


def _plan_events(
    trace: Trace,
    documents: Sequence[DocumentRecord],
    timing: TimingProfile,
    times: Mapping[int, datetime],
) -> dict[str, _Made]:
    """Every recorded event, with when forewarn makes, starts and ends it."""
    made: dict[str, _Made] = {}
    approvals = {
        event_id: (a.line, times[a.line]) for a in trace.approvals for event_id in a.event_ids
    }
    previous: _Seen | None = None
    previous_ids: list[str] = []
    for document in documents:
        seen = _Seen(document.line, times[document.line])
        events = recorded_events(document, trace.source)
        ids = [event.event_id.upper() for event in events]
        for event_id in previous_ids:
            if event_id not in ids:
                _ended(trace, made[event_id], seen, timing)
        for event in events:
            event_id = event.event_id.upper()
            entry = made.get(event_id)
            if entry is None:
                made[event_id] = _created(trace, event, seen, previous, timing)
                continue
            if _fixed(entry.event) != _fixed(event):
                raise _fail(trace, document.line, f"event {event_id} changed in place")
            if entry.event.status is EventStatus.STARTED and event.status is EventStatus.SCHEDULED:
                raise _fail(trace, document.line, f"event {event_id} went back to Scheduled")
            if entry.started is None and event.status is EventStatus.STARTED:
                _start(trace, entry, seen, previous, approvals.get(event_id))
        live = [i for i in made if made[i].removed is None and made[i].cancelled is None]
        if [i for i in live if i in ids] != ids or len(live) != len(ids):
            raise _fail(
                trace,
                document.line,
                "its events are in another order than forewarn shows them (oldest first)",
            )
        previous, previous_ids = seen, ids
    return made


def _fixed(event: Event) -> tuple[object, ...]:
    """What never changes while an event lives."""
    return (
        event.event_type,
        event.resource_type,
        event.resources,
        event.description,
        event.source,
        event.duration_seconds,
    )


@dataclass(frozen=True)
class _Seen:
    """A document: its line, and its time on the platform's clock."""

    line: int
    at: datetime


def _created(
    trace: Trace,
    event: Event,
    document: _Seen,
    previous: _Seen | None,
    timing: TimingProfile,
) -> _Made:
    line = document.line
    if event.status is EventStatus.STARTED:
        return _Made(event, line, document.at, None, started=document.at)
    assert event.not_before is not None
    minimum = timing.notice_for(event.event_type)
    created = min(document.at, event.not_before - minimum)
    if previous is not None and created < previous.at:
        raise _fail(
            trace,
            line,
            f"{event.event_type.value} {event.event_id} is first shown "
            f"{format_duration(event.not_before - document.at)} before its NotBefore, less than "
            f"the {timing.name!r} profile's minimum notice of {format_duration(minimum)}, and "
            f"line {previous.line} shows it was not there {format_duration(minimum)} before",
        )
    return _Made(event, line, created, event.not_before - created)


def _start(
    trace: Trace,
    entry: _Made,
    document: _Seen,
    previous: _Seen | None,
    approval: tuple[int, datetime] | None,
) -> None:
    not_before = entry.event.not_before
    assert not_before is not None  # a Scheduled event has one
    assert previous is not None  # it was shown Scheduled before
    entry.start_line = document.line
    if document.at >= not_before:
        if previous.at >= not_before:
            raise _fail(
                trace,
                previous.line,
                f"event {entry.event.event_id} is still Scheduled at or after its NotBefore; "
                "forewarn starts an event at its NotBefore",
            )
        entry.started = not_before
        return
    if approval is not None and previous.line < approval[0] < document.line:
        entry.approved, entry.approved_by_trace = approval[1], True
    else:
        entry.approved = document.at  # approved by another VM, tenant or the API
    entry.started = entry.approved


def _ended(trace: Trace, entry: _Made, document: _Seen, timing: TimingProfile) -> None:
    event = entry.event
    entry.end_line = document.line
    if entry.started is None:
        assert event.not_before is not None
        if document.at >= event.not_before:
            raise _fail(
                trace,
                document.line,
                f"event {event.event_id} is gone, after its NotBefore, without having been "
                "shown Started",
            )
        entry.cancelled = document.at
        return
    lasted = document.at - entry.started
    impact = timing.impact_for(event.event_type, event.duration_seconds)
    if lasted < impact:
        raise _fail(
            trace,
            document.line,
            f"event {event.event_id} was Started for {format_duration(lasted)}, less than its "
            f"impact of {format_duration(impact)}",
        )
    entry.removed = document.at


def _incarnations(
    documents: Sequence[DocumentRecord],
    made: Mapping[str, _Made],
    times: Mapping[int, datetime],
) -> bool:
    """Whether forewarn's DocumentIncarnation follows the trace's: one a document change
    per event shown, started or removed, from 1."""
    changes: list[int] = []  # the line of the document each change comes before
    for entry in made.values():
        changes.append(entry.line)
        if entry.notice is not None and entry.started is not None:
            changes.append(entry.start_line)
        if entry.end_line is not None:
            changes.append(entry.end_line)
    expected = [1 + sum(line <= document.line for line in changes) for document in documents]
    return expected == [document.incarnation for document in documents]


def _event_steps(plan: _Plan, vm: str, entry: _Made) -> None:
    event = entry.event
    fields: dict[str, Any] = {
        "type": event.event_type.value,
        "resources": [r.name for r in event.resources],
        "source": event.source.value,
        "description": event.description,
        "durationInSeconds": event.duration_seconds,
    }
    if entry.notice is None:
        fields["started"] = True
    else:
        fields["notice"] = format_duration(entry.notice)
    if entry.removed is not None and entry.started is not None:
        fields["startedFor"] = format_duration(entry.removed - entry.started)
    title = f"line {entry.line}: {event.source.value} {event.event_type.value}"
    plan.add(entry.created, entry.line, 0, {"title": title, "event": fields})
    scheduled = {
        "EventStatus": "Scheduled",
        "EventType": event.event_type.value,
        "Resources": [r.name for r in event.resources],
        "Description": event.description,
        "EventSource": event.source.value,
    }
    if entry.approved is not None:
        who = "as the trace did" if entry.approved_by_trace else "(by another VM, or the API)"
        plan.add(
            entry.approved,
            entry.start_line,
            0,
            {"title": f"approved {who}", "approve": {"vm": vm, "events": [scheduled]}},
        )
    if entry.cancelled is not None:
        plan.add(
            entry.cancelled,
            entry.end_line or entry.line,
            0,
            {"title": "the platform cancels it", "cancel": {"vm": vm, "events": [scheduled]}},
        )


def _timed(plan: _Plan) -> list[dict[str, Any]]:
    """The plan's steps in time order, with the clock set first and moved between."""
    ordered = sorted(plan.steps, key=lambda item: item[:4])
    start = ordered[0][0]
    steps: list[dict[str, Any]] = [{"set-clock": start.isoformat()}]
    now = start
    for at, _, _, _, step in ordered:
        if at > now:
            steps.append({"advance": format_duration(at - now)})
            now = at
        steps.append(step)
    return steps


def _vms(name: str, shown: Sequence[tuple[Event, ...]]) -> list[str]:
    """The recorded VM first, then every other VM the events name, in order of appearance."""
    names = [name]
    for events in shown:
        for event in events:
            names += [r.name for r in event.resources if r.name not in names]
    return names


def _fleet(trace: Trace, vm: str, vms: Sequence[str]) -> str:
    compute = trace.start.compute or {}
    recorded: dict[str, Any] = {"name": vm}
    for key, field_name in (("location", "location"), ("vmSize", "size")):
        value = compute.get(key)
        if isinstance(value, str) and value:
            recorded[field_name] = value
    entries = [recorded, *({"name": other} for other in vms[1:])]
    document: dict[str, Any] = {}
    if len(entries) > 1:
        document["availabilitySets"] = [{"name": "recorded", "faultDomains": 1}]
        for index, entry in enumerate(entries, 1):
            entry["address"] = f"{FLEET_ADDRESSES}{index}"
            entry["availabilitySet"] = "recorded"
            entry["host"] = "recorded-host"
    document["vms"] = entries
    return (
        f"# the VMs of {trace.source} (forewarn scenario from-trace): the recorded one, and\n"
        "# those its events name, sharing its availability set\n"
        + yaml.safe_dump(document, sort_keys=False, width=100)
    )


__all__ = ["FLEET_ADDRESSES", "Conversion", "convert"]

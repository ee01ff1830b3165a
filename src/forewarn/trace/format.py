"""The trace file: what one VM was shown, change by change, as JSON Lines (version 1).

``forewarn record`` writes it inside a VM (on Azure, or one of forewarn's), ``forewarn
replay`` serves it back and ``forewarn scenario from-trace`` turns it into a scenario. One
JSON object per line, UTF-8, each naming its ``kind``; times are the recording machine's
wall clock, ISO 8601 in UTC, never going backwards. docs/record-replay.md describes every
field; in short::

    {"forewarnTrace": 1, "kind": "start", "at": ..., "endpoint": ..., "apiVersion": ...,
     "recorder": "forewarn 0.1.0", "approveAfter": null, "maxBytes": ..., "compute": {...}}
    {"kind": "document", "at": ..., "status": 200, "headers": {...}, "body": "{...}"}
    {"kind": "approval", "at": ..., "eventIds": [...], "status": 200, "date": "..."}
    {"kind": "error", "at": ..., "error": "..."}
    {"kind": "resume", "at": ..., "approveAfter": null}
    {"kind": "stop", "at": ..., "reason": "..."}

The first line is the ``start``, with the VM's compute metadata read once; a ``document``
line is written each time the document's bytes change (its body exactly as received; the
headers that are the document's own, not the per-request ones); a ``resume`` line marks a
recorder restarted on the same file, a ``stop`` line why it ended. A trace is untrusted
input: lines and files are bounded, and every mistake is one :class:`TraceError` naming the
file and the line. Standard library only: a VM's recorder loads nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forewarn.errors import ForewarnError
from forewarn.nesting import load_json

#: The version this module writes and reads; a trace of another says so on its first line.
TRACE_VERSION = 1
#: The longest line read: far beyond any document (IMDS caps bodies well below), so a file
#: that is not a trace is refused on its first long line rather than read whole.
MAX_LINE_BYTES = 1024 * 1024
#: The largest trace read at all.
MAX_TRACE_BYTES = 512 * 1024 * 1024
#: The response headers a document line keeps: the document's own. ``x-ms-request-id`` and
#: ``Content-Length`` are per response (and made again on replay); ``Date`` is kept to tell
#: the platform's clock from the recording machine's, though replay writes its own.
KEPT_HEADERS = ("Content-Type", "ETag", "Server", "Date")
KINDS = ("start", "document", "approval", "error", "resume", "stop")


class TraceError(ForewarnError):
    """A trace that cannot be used; the message names the file and the line."""


def format_time(moment: datetime) -> str:
    """``2022-04-11T22:26:58.123Z``: UTC to the millisecond."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{moment.microsecond // 1000:03d}Z"
    )


@dataclass(frozen=True)
class Record:
    """One line: its number (from 1, as people count), kind and time."""

    line: int
    kind: str
    at: datetime


@dataclass(frozen=True)
class Start(Record):
    endpoint: str
    api_version: str
    recorder: str
    approve_after: float | None
    max_bytes: int | None
    compute: Mapping[str, Any] | None


@dataclass(frozen=True)
class DocumentRecord(Record):
    """A document as received: its status (200), kept headers and body, exactly."""

    status: int
    headers: Mapping[str, str]
    body: str
    #: The parsed body: DocumentIncarnation and the events, as JSON values.
    incarnation: int = field(compare=False)
    events: tuple[Mapping[str, Any], ...] = field(compare=False)

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lowered), None)


@dataclass(frozen=True)
class Approval(Record):
    """An approval the recorder made: the EventIds, the answer's status and ``Date``."""

    event_ids: tuple[str, ...]
    status: int | None
    date: str | None = None


@dataclass(frozen=True)
class Note(Record):
    """An ``error`` or ``stop`` line; ``text`` is its error or reason."""

    text: str


@dataclass(frozen=True)
class Resume(Record):
    """The recorder started again on the same trace, with its ``--approve-after``."""

    approve_after: float | None


@dataclass(frozen=True)
class Trace:
    source: str
    start: Start
    records: tuple[Record, ...]

    @property
    def documents(self) -> tuple[DocumentRecord, ...]:
        return tuple(r for r in self.records if isinstance(r, DocumentRecord))

    @property
    def approvals(self) -> tuple[Approval, ...]:
        return tuple(r for r in self.records if isinstance(r, Approval))

    @property
    def vm_name(self) -> str | None:
        """The recorded VM's name, from its compute metadata."""
        name = (self.start.compute or {}).get("name")
        return name if isinstance(name, str) and name else None

    def document_at(self, moment: datetime) -> DocumentRecord | None:
        """The document the VM was last shown at ``moment`` (None before the first)."""
        shown = None
        for document in self.documents:
            if document.at > moment:
                break
            shown = document
        return shown


# -- writing ------------------------------------------------------------------------------------


def encode(record: Mapping[str, Any]) -> bytes:
    """One line of a trace, compact, ending in a newline."""
    return (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def start_line(
    at: datetime,
    *,
    endpoint: str,
    api_version: str,
    recorder: str,
    approve_after: float | None,
    max_bytes: int | None,
    compute: Mapping[str, Any] | None,
) -> bytes:
    return encode(
        {
            "forewarnTrace": TRACE_VERSION,
            "kind": "start",
            "at": format_time(at),
            "endpoint": endpoint,
            "apiVersion": api_version,
            "recorder": recorder,
            "approveAfter": approve_after,
            "maxBytes": max_bytes,
            "compute": compute,
        }
    )


def document_line(at: datetime, status: int, headers: Mapping[str, str], body: str) -> bytes:
    return encode(
        {
            "kind": "document",
            "at": format_time(at),
            "status": status,
            "headers": dict(headers),
            "body": body,
        }
    )


def approval_line(
    at: datetime, event_ids: tuple[str, ...], status: int | None, date: str | None = None
) -> bytes:
    return encode(
        {
            "kind": "approval",
            "at": format_time(at),
            "eventIds": list(event_ids),
            "status": status,
            "date": date,
        }
    )


def note_line(kind: str, at: datetime, text: str) -> bytes:
    """An ``error`` (``text`` the error) or ``stop`` (``text`` the reason) line."""
    key = "error" if kind == "error" else "reason"
    return encode({"kind": kind, "at": format_time(at), key: text})


def resume_line(at: datetime, approve_after: float | None) -> bytes:
    """A recorder restarted on the trace, approving as ``approve_after`` says from now on."""
    return encode({"kind": "resume", "at": format_time(at), "approveAfter": approve_after})


# -- reading ------------------------------------------------------------------------------------


class _Line:
    """One parsed line and where it is, for messages that name it."""

    def __init__(self, where: str, number: int, value: Mapping[str, Any]) -> None:
        self.where = where
        self.number = number
        self.value = value

    def fail(self, message: str) -> TraceError:
        return TraceError(f"{self.where}:{self.number}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
        if key not in self.value:
            if optional:
                return None
            raise self.fail(f"a {self.value.get('kind')} line needs {key!r}")
        value = self.value[key]
        if value is None and optional:
            return None
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _tuple(kind)):
            raise self.fail(f"{key!r} has the wrong type ({type(value).__name__})")
        return value

    def time(self) -> datetime:
        text = self.get("at", str)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise self.fail(f"'at' is not an ISO 8601 time: {text[:40]!r}") from None
        if moment.tzinfo is None:
            raise self.fail("'at' has no time zone")
        return moment.astimezone(UTC)


_MAX_HEADERS = 16


def _printable(text: str) -> bool:
    """One header line's worth: a replay writes these back (no CR/LF smuggled in)."""
    return len(text) <= 1024 and all(" " <= c <= "~" for c in text)


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _lines(data: bytes, where: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            raise TraceError(f"{where}:{number}: longer than {MAX_LINE_BYTES} bytes")
        try:
            value = load_json(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise TraceError(f"{where}:{number}: not UTF-8 text") from None
        except ValueError as exc:
            raise TraceError(f"{where}:{number}: not a JSON object: {exc}") from None
        if not isinstance(value, dict):
            raise TraceError(f"{where}:{number}: not a JSON object")
        yield number, value


def _start(line: _Line) -> Start:
    version = line.value.get("forewarnTrace")
    if version != TRACE_VERSION or line.value.get("kind") != "start":
        if isinstance(version, int) and not isinstance(version, bool):
            raise line.fail(
                f"a version {version} trace; this forewarn reads version {TRACE_VERSION}"
            )
        raise line.fail('not a forewarn trace: its first line has no "forewarnTrace": 1')
    approve_after = line.get("approveAfter", (int, float), optional=True)
    max_bytes = line.get("maxBytes", int, optional=True)
    compute = line.get("compute", dict, optional=True)
    return Start(
        line.number,
        "start",
        line.time(),
        line.get("endpoint", str),
        line.get("apiVersion", str),
        line.get("recorder", str),
        None if approve_after is None else float(approve_after),
        max_bytes,
        compute,
    )


def _document(line: _Line, at: datetime) -> DocumentRecord:
    status = line.get("status", int)
    if status != 200:
        raise line.fail(f"a document line holds a 200 answer, not {status}")
    headers = line.get("headers", dict)
    if len(headers) > _MAX_HEADERS or not all(
        isinstance(k, str) and isinstance(v, str) and _printable(k) and _printable(v)
        for k, v in headers.items()
    ):
        raise line.fail("'headers' maps names to one line of printable text each")
    body = line.get("body", str)
    try:
        parsed = load_json(body)
    except ValueError as exc:
        raise line.fail(f"the body is not a JSON document ({exc})") from None
    incarnation = parsed.get("DocumentIncarnation") if isinstance(parsed, dict) else None
    events = parsed.get("Events") if isinstance(parsed, dict) else None
    if not isinstance(incarnation, int) or isinstance(incarnation, bool):
        raise line.fail("the body has no integer DocumentIncarnation")
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise line.fail("the body's Events is not a list of events")
    return DocumentRecord(
        line.number, "document", at, status, headers, body, incarnation, tuple(events)
    )


def _record(line: _Line) -> Record:
    kind = line.get("kind", str)
    at = line.time()
    if kind == "document":
        return _document(line, at)
    if kind == "approval":
        ids = line.get("eventIds", list)
        if not all(isinstance(event_id, str) for event_id in ids):
            raise line.fail("'eventIds' is a list of EventIds")
        status = line.get("status", int, optional=True)
        date = line.get("date", str, optional=True)
        if date is not None and not _printable(date):
            raise line.fail("'date' is one line of printable text")
        return Approval(line.number, kind, at, tuple(ids), status, date)
    if kind == "error":
        return Note(line.number, kind, at, line.get("error", str))
    if kind == "stop":
        return Note(line.number, kind, at, line.get("reason", str))
    if kind == "resume":
        after = line.get("approveAfter", (int, float), optional=True)
        return Resume(line.number, kind, at, None if after is None else float(after))
    if kind == "start":
        raise line.fail("a second start line (a trace starts once; a restart is a resume)")
    raise line.fail(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")


def parse_trace(data: bytes, where: str = "<trace>") -> Trace:
    """The trace ``data`` holds; TraceError naming the line of its first mistake."""
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"{where}: larger than {MAX_TRACE_BYTES} bytes")
    lines = _lines(data, where)
    first = next(lines, None)
    if first is None:
        raise TraceError(f"{where}: empty, not a forewarn trace")
    start = _start(_Line(where, *first))
    records: list[Record] = []
    last = start.at
    for number, value in lines:
        record = _record(_Line(where, number, value))
        if record.at < last:
            raise TraceError(f"{where}:{number}: its time goes back before the line above's")
        last = record.at
        records.append(record)
    return Trace(where, start, tuple(records))


def load_trace(path: Path) -> Trace:
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise TraceError(f"{path}: larger than {MAX_TRACE_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read: {exc.strerror}") from None
    return parse_trace(data, str(path))


__all__ = [
    "KEPT_HEADERS",
    "KINDS",
    "MAX_LINE_BYTES",
    "MAX_TRACE_BYTES",
    "TRACE_VERSION",
    "Approval",
    "DocumentRecord",
    "Note",
    "Record",
    "Resume",
    "Start",
    "Trace",
    "TraceError",
    "approval_line",
    "document_line",
    "encode",
    "format_time",
    "load_trace",
    "note_line",
    "parse_trace",
    "resume_line",
    "start_line",
]

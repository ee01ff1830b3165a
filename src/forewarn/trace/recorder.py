"""``forewarn record``: inside a VM, write down every document the VM is shown.

It polls the Scheduled Events endpoint about once a second, as the documentation asks of
clients ("we recommend that you poll the service once per second",
learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency"),
sending the last ``ETag`` back as ``If-None-Match`` so an unchanged document costs a 304, and
appends one line to the trace (:mod:`forewarn.trace.format`) for each change of the
document's bytes. What a VM must live with is kept to: never more than 5 requests a second
(the IMDS rate limit), the first call's "delayed response ... of up to two minutes" waited
for, no approval unless asked (``approve_after``), and a trace bounded by size that ends with
a line saying so. Restarted on the same file, it checks what is there, drops a line a crash
left half-written, and appends after a ``resume`` line.

The endpoint is untrusted too: an answer is read as it arrives and cut off at
:data:`MAX_BODY_BYTES` (the longest line a trace holds) or when it is not whole within its
call's timeout, and a body nested past the JSON bound (:mod:`forewarn.nesting`) is refused
like any body that is no document: each is an ``error`` line saying so, and polling goes
on. Ctrl-C (or SIGTERM, which the command turns into the same) ends the recording at once,
mid-answer included, with a ``stop`` line.

httpx and the standard library only: this runs on the VM, where nothing of the server is
installed to be loaded (tests/cli/test_light_imports.py).
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from forewarn import __version__
from forewarn.client import (
    DEFAULT_API_VERSION,
    DEFAULT_INSTANCE_API_VERSION,
    FIRST_CALL_TIMEOUT,
    IMDS_ADDRESS,
)
from forewarn.errors import ForewarnError
from forewarn.nesting import load_json
from forewarn.trace.format import (
    KEPT_HEADERS,
    MAX_LINE_BYTES,
    DocumentRecord,
    Note,
    TraceError,
    approval_line,
    document_line,
    note_line,
    parse_trace,
    resume_line,
    start_line,
)

SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
COMPUTE_PATH = "/metadata/instance/compute"
#: The IMDS rate limit: "a limit of 5 requests per second" per VM (instance-metadata-service,
#: "Rate limiting"); approvals count too.
MAX_REQUESTS_PER_SECOND = 5
#: Seconds kept between the first and the sixth request beyond the limit's one.
RATE_MARGIN = 0.05
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Room kept at the end of a bounded trace for the line saying it stopped.
STOP_RESERVE = 256
#: The read timeout of every call after the first.
CALL_TIMEOUT = 30.0
#: The most of an answer read: a body longer than a trace's line could never be written
#: down, so the read stops there (a real document is a few KiB).
MAX_BODY_BYTES = MAX_LINE_BYTES
#: What a document line is checked as: a trace's second line, after :func:`_probe`.
_ANSWER = "<answer>"


class RecordError(TraceError):
    """The trace cannot be written to: unreadable, not a trace, or already full."""


@dataclass(frozen=True)
class RecordSettings:
    out: Path
    endpoint: str = f"http://{IMDS_ADDRESS}"
    interval: float = 1.0
    approve_after: float | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    api_version: str = DEFAULT_API_VERSION
    first_call_timeout: float = FIRST_CALL_TIMEOUT

    def __post_init__(self) -> None:
        if self.interval < 1 / MAX_REQUESTS_PER_SECOND:
            raise ValueError(
                f"polling more than {MAX_REQUESTS_PER_SECOND} times a second is over the "
                "IMDS rate limit"
            )
        if self.max_bytes < 4 * STOP_RESERVE:
            raise ValueError(f"a trace needs room for more than {4 * STOP_RESERVE} bytes")
        if self.approve_after is not None and self.approve_after < 0:
            raise ValueError("--approve-after is a number of seconds, 0 or more")


@dataclass
class Progress:
    """What the progress line says."""

    polls: int = 0
    changes: int = 0
    incarnation: int | None = None
    size: int = 0
    errors: int = 0
    shown: str = ""
    seen: int = 0

    def line(self, settings: RecordSettings) -> str:
        incarnation = "-" if self.incarnation is None else str(self.incarnation)
        return (
            f"{self.polls} polls, {self.changes} changes, DocumentIncarnation {incarnation}, "
            f"{self.seen} event(s) seen, now: {self.shown or 'none'}; "
            f"{self.errors} error(s); {self.size} of {settings.max_bytes} bytes"
        )


class _TraceFullError(ForewarnError):
    """The trace reached its size limit: ``reason`` is on the stop line written."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _CutOffError(ForewarnError):
    """An answer not read whole: larger than :data:`MAX_BODY_BYTES`, or too slow."""


@dataclass(frozen=True)
class _Answer:
    """An answer read whole, within the bounds."""

    status: int
    headers: httpx.Headers
    body: bytes


class Recorder:
    """Records one VM's documents into ``settings.out`` until stopped.

    ``http`` reaches the endpoint (a transport of its own in tests); ``wall`` is the
    recording machine's clock written on each line; ``sleep`` and ``monotonic`` pace the
    polls; ``progress`` is told the progress line after each poll; ``stop`` ends the
    recording at the next poll.
    """

    def __init__(
        self,
        settings: RecordSettings,
        *,
        http: httpx.Client | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        progress: Callable[[str], None] = lambda line: None,
        stop: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.http = http or httpx.Client(trust_env=False, follow_redirects=False)
        self._wall = wall
        self._monotonic = monotonic
        self._progress = progress
        self.stop = stop or threading.Event()
        self._interrupted = False
        self.state = Progress()
        self._sent: collections.deque[float] = collections.deque()
        self._last_at: datetime | None = None
        self._etag: str | None = None
        self._body: str | None = None
        #: The events of the document last shown (``_body``'s).
        self._events: tuple[Mapping[str, Any], ...] = ()
        self._error: str | None = None
        self._first_call = True
        #: EventId -> when it was first seen Scheduled (monotonic), for --approve-after.
        self._scheduled_since: dict[str, float] = {}
        self._approved: set[str] = set()
        self._seen: set[str] = set()
        self._file: BinaryIO | None = None

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> str:
        """Record until stopped; the reason, as the stop line says it. Ctrl-C stops it
        wherever it is, the first call included (before the first line, nothing is
        written)."""
        reason = "interrupted"
        try:
            self._open()
            while not self.stop.is_set():
                began = self._monotonic()
                self._poll()
                self._approve_due()
                self._progress(self.state.line(self.settings))
                self.stop.wait(max(0.0, self.settings.interval - (self._monotonic() - began)))
            reason = "interrupted" if self._interrupted else "stopped"
        except _TraceFullError as stopped:
            reason = stopped.reason
        except KeyboardInterrupt:
            reason = "interrupted"
        finally:
            if self._file is not None:
                self._close(reason)
        return reason

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM: end the recording as interrupted at its next turn at the latest.
        The signal's handler calls this before it raises ``KeyboardInterrupt``, which a
        library may swallow (one raised in a finalizer the collector runs is only printed):
        the recording ends then all the same, instead of polling on."""
        self._interrupted = True
        self.stop.set()

    def _close(self, reason: str) -> None:
        assert self._file is not None
        if not reason.startswith("size limit"):  # that one is written already
            self._write(note_line("stop", self._now(), reason), reserve=False)
        self._file.close()

    # -- the file ----------------------------------------------------------------------------

    def _open(self) -> None:
        path = self.settings.out
        existing = path.read_bytes() if path.exists() else b""
        if existing.strip():
            self._resume(path, existing)
        else:
            line = start_line(
                self._now(),
                endpoint=self.settings.endpoint,
                api_version=self.settings.api_version,
                recorder=f"forewarn {__version__}",
                approve_after=self.settings.approve_after,
                max_bytes=self.settings.max_bytes,
                compute=self._compute(),
            )
            if len(line) + 2 * STOP_RESERVE > self.settings.max_bytes:
                raise RecordError(
                    f"{path}: {self.settings.max_bytes} bytes cannot hold even the first line "
                    f"({len(line)} bytes, with the VM's compute metadata)"
                )
            self._file = path.open("wb")
            self._write(line)

    def _resume(self, path: Path, existing: bytes) -> None:
        """Check the trace already there and go on after it, from its last document."""
        end = existing.rfind(b"\n") + 1
        if end < len(existing):  # a line a crash left half-written
            self._progress(f"dropped an incomplete last line ({len(existing) - end} bytes)")
            existing = existing[:end]
        trace = parse_trace(existing, str(path))
        last = trace.records[-1] if trace.records else None
        if isinstance(last, Note) and last.kind == "stop" and last.text.startswith("size limit"):
            raise RecordError(f"{path}: already at its size limit ({last.text}); start a new trace")
        with path.open("r+b") as handle:
            handle.truncate(len(existing))
        self._file = path.open("ab")
        self.state.size = len(existing)
        self._last_at = (last or trace.start).at
        documents = trace.documents
        if documents:
            self._take(documents[-1])
            self.state.changes = len(documents)
        for document in documents:
            self._seen.update(str(e.get("EventId")) for e in document.events)
        self.state.seen = len(self._seen)
        self._approved = {event_id for a in trace.approvals for event_id in a.event_ids}
        self._write(resume_line(self._now(), self.settings.approve_after))

    def _take(self, document: DocumentRecord) -> None:
        self._body = document.body
        self._events = document.events
        self._etag = document.header("ETag")
        self.state.incarnation = document.incarnation
        self.state.shown = _shown(document.events)

    def _write(self, line: bytes, *, reserve: bool = True) -> None:
        assert self._file is not None
        room = self.settings.max_bytes - (STOP_RESERVE if reserve else 0)
        if self.state.size + len(line) > room:
            reason = f"size limit of {self.settings.max_bytes} bytes reached"
            self._write(note_line("stop", self._now(), reason), reserve=False)
            raise _TraceFullError(reason)
        self._file.write(line)
        self._file.flush()
        os.fsync(self._file.fileno())  # a change is rare, and must survive a crash
        self.state.size += len(line)

    def _now(self) -> datetime:
        """The wall time, never before the last line's (a clock stepped back by NTP)."""
        now = self._wall().astimezone(UTC)
        if self._last_at is not None and now < self._last_at:
            now = self._last_at
        self._last_at = now
        return now

    # -- requests ----------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, timeout: float, **kwargs: Any) -> _Answer:
        """One request within the rate limit: never a sixth inside one second (and a margin,
        as the endpoint counts arrivals, which the network may bunch up). Its answer is read
        as it comes, and :class:`_CutOffError` when it is larger than :data:`MAX_BODY_BYTES`
        or not whole within ``timeout`` seconds: a hostile endpoint's endless body costs a
        megabyte, not the machine's memory."""
        sent = self._sent
        while len(sent) >= MAX_REQUESTS_PER_SECOND:
            wait = sent[0] + 1.0 + RATE_MARGIN - self._monotonic()
            if wait <= 0:
                sent.popleft()
            else:
                self.stop.wait(wait)
        sent.append(self._monotonic())
        deadline = self._monotonic() + timeout
        headers = {"Metadata": "true", **kwargs.pop("headers", {})}
        with self.http.stream(
            method,
            self.settings.endpoint + path,
            headers=headers,
            timeout=httpx.Timeout(CALL_TIMEOUT, read=timeout),
            **kwargs,
        ) as response:
            status = response.status_code
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise _CutOffError(
                    f"{status} declaring a body of {int(declared)} bytes, over the "
                    f"{MAX_BODY_BYTES} a trace line holds: not read"
                )
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise _CutOffError(
                        f"{status} with a body over {MAX_BODY_BYTES} bytes, the most a "
                        "trace line holds: cut off there"
                    )
                if self._monotonic() > deadline:
                    raise _CutOffError(
                        f"{status} with a body not whole within {timeout:g} s: cut off there"
                    )
        return _Answer(status, response.headers, bytes(body))

    def _compute(self) -> dict[str, Any] | None:
        """The VM's compute metadata, once; None when the endpoint has none to give."""
        try:
            answer = self._request(
                "GET",
                COMPUTE_PATH,
                params={"api-version": DEFAULT_INSTANCE_API_VERSION, "format": "json"},
                timeout=CALL_TIMEOUT,
            )
            value = load_json(answer.body) if answer.status == 200 else None
        except (httpx.HTTPError, _CutOffError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def _poll(self) -> None:
        headers = {} if self._etag is None else {"If-None-Match": self._etag}
        timeout = self.settings.first_call_timeout if self._first_call else CALL_TIMEOUT
        self.state.polls += 1
        try:
            answer = self._request(
                "GET",
                SCHEDULED_EVENTS_PATH,
                params={"api-version": self.settings.api_version},
                headers=headers,
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            return
        except _CutOffError as exc:
            self._first_call = False
            self._failed(str(exc))
            return
        self._first_call = False
        if answer.status == 304:
            self._error = None
            return
        if answer.status != 200:
            self._failed(f"{answer.status}: {answer.body[:200].decode('utf-8', 'replace')}")
            return
        try:
            body = answer.body.decode("utf-8")
        except UnicodeDecodeError:
            self._failed("200 with a body that is not UTF-8")
            return
        if body == self._body:
            self._error = None
            return  # an endpoint without ETags answers the same document again
        kept = {name: answer.headers[name] for name in KEPT_HEADERS if name in answer.headers}
        line = document_line(self._now(), 200, kept, body)
        try:
            document = parse_trace(_probe() + line, _ANSWER).documents[0]
        except TraceError as exc:
            reason = str(exc).removeprefix(f"{_ANSWER}:2: ")
            self._failed(f"200 with a body that is not a document: {reason}")
            return
        self._error = None
        self._write(line)
        self._take(document)
        self.state.changes += 1
        self._seen.update(str(event.get("EventId")) for event in document.events)
        self.state.seen = len(self._seen)
        now = self._monotonic()
        for event in document.events:
            event_id = str(event.get("EventId"))
            if event.get("EventStatus") == "Scheduled":
                self._scheduled_since.setdefault(event_id, now)

    def _failed(self, error: str) -> None:
        """A poll that got no document: one line each time the error changes."""
        self.state.errors += 1
        if error != self._error:
            self._error = error
            self._write(note_line("error", self._now(), error))

    def _approve_due(self) -> None:
        after = self.settings.approve_after
        if after is None or self._body is None:
            return
        now = self._monotonic()
        due = tuple(
            str(event.get("EventId"))
            for event in self._events
            if event.get("EventStatus") == "Scheduled"
            and str(event.get("EventId")) not in self._approved
            and now - self._scheduled_since.get(str(event.get("EventId")), now) >= after
        )
        if not due:
            return
        body = json.dumps({"StartRequests": [{"EventId": event_id} for event_id in due]})
        try:
            answer = self._request(
                "POST",
                SCHEDULED_EVENTS_PATH,
                params={"api-version": self.settings.api_version},
                content=body.encode(),
                timeout=CALL_TIMEOUT,
            )
            status: int | None = answer.status
            date = answer.headers.get("Date")
        except (httpx.HTTPError, _CutOffError):
            status, date = None, None
        self._approved.update(due)
        self._write(approval_line(self._now(), due, status, date))


def _probe() -> bytes:
    """A start line to parse one document line after, checking it as a trace reader will."""
    return start_line(
        datetime(1970, 1, 1, tzinfo=UTC),
        endpoint="",
        api_version="",
        recorder="",
        approve_after=None,
        max_bytes=None,
        compute=None,
    )


def _shown(events: tuple[Any, ...]) -> str:
    return ", ".join(f"{e.get('EventType')} {e.get('EventStatus')}" for e in events)


__all__ = [
    "COMPUTE_PATH",
    "DEFAULT_MAX_BYTES",
    "MAX_BODY_BYTES",
    "MAX_REQUESTS_PER_SECOND",
    "STOP_RESERVE",
    "Progress",
    "RecordError",
    "RecordSettings",
    "Recorder",
]

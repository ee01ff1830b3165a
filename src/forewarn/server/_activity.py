"""What each VM did and was shown, for the dashboard's per-VM timeline.

A bounded record per VM: its last requests (method, path, status, the incarnation it was
answered with) and each new document it was shown. A request repeated with the same answer
(a poller's every second) is one entry with a count and the time of the last, so a quiet
VM's timeline reaches back further, and recording a poll costs a counter's increment. Kept in
memory only: it is for watching a handler at work, not state; a restart starts it empty.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from forewarn.domain.vms import Vm
from forewarn.server._serve_logging import log
from forewarn.server.imds import (
    SCHEDULED_EVENTS_PATH,
    ImdsEndpoint,
    ImdsRequest,
    ImdsResponse,
)
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StoreUnavailableError

__all__ = ["Activity", "ActivityEndpoint", "Entry"]

REQUESTS = logging.getLogger("forewarn.requests")

#: Entries kept per VM: each a run of the same request answered the same way, or a document.
KEPT = 100


@dataclass(slots=True)
class Entry:
    at: datetime
    kind: str  # "request" or "document"
    method: str = ""
    path: str = ""
    status: int = 0
    incarnation: int | None = None
    events: tuple[tuple[str, str, str], ...] = ()  # (EventId, EventType, EventStatus)
    #: A request entry: how many times in a row it was made and answered the same way, and
    #: when last (``at`` is the first).
    count: int = 1
    until: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "until": (self.until or self.at).isoformat(),
            "count": self.count,
            "kind": self.kind,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "incarnation": self.incarnation,
            "events": [
                {"EventId": event_id, "EventType": kind, "EventStatus": status}
                for event_id, kind, status in self.events
            ],
        }


class _VmRecord:
    """One VM's entries, oldest first, its latest request run and what it has been shown.

    One object per VM, where separate tables keyed by VM name and a deque sized for all
    :data:`KEPT` entries cost a large fleet a kilobyte per VM before it polled twice.
    """

    __slots__ = ("entries", "requests", "run", "run_method", "run_path", "run_response", "shown")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.requests = 0
        self.shown: int | None = None
        # The latest request entry, with the request and answer that made it.
        self.run: Entry | None = None
        self.run_method = ""
        self.run_path = ""
        self.run_response: ImdsResponse | None = None

    def add(self, entry: Entry) -> None:
        if len(self.entries) >= KEPT:
            del self.entries[0]
        self.entries.append(entry)


class Activity:
    """Per-VM entries, newest last, and how many requests each VM made."""

    def __init__(self) -> None:
        self._vms: dict[str, _VmRecord] = {}

    def record(self, vm: str, request: ImdsRequest, response: ImdsResponse, at: datetime) -> None:
        """``vm``'s request and its answer, given at platform time ``at``."""
        record = self._vms.get(vm)
        if record is None:
            record = self._vms[vm] = _VmRecord()
        # The endpoint answers an unchanged document with the same response object; a run's
        # response is None until its first entry is made.
        elif (
            record.run_response is response
            and record.run_method == request.method
            and record.run_path == request.path
        ):
            run = record.run
            assert run is not None  # made with its response
            run.count += 1
            run.until = at
            record.requests += 1
            return
        incarnation = None
        if response.etag is not None:
            incarnation = int(response.etag.strip(b'"'))
        entry = Entry(at, "request", request.method, request.path, response.status, incarnation)
        record.add(entry)
        record.run, record.run_method, record.run_path = entry, request.method, request.path
        record.run_response = response
        record.requests += 1
        if (
            response.status == 200
            and request.path == SCHEDULED_EVENTS_PATH
            and incarnation is not None
            and record.shown != incarnation
        ):
            record.shown = incarnation
            document = orjson.loads(response.body)
            events = tuple(
                (e.get("EventId", ""), e.get("EventType", ""), e.get("EventStatus", ""))
                for e in document.get("Events", [])
            )
            record.add(Entry(at, "document", incarnation=incarnation, events=events))

    def of(self, vm: str) -> list[Entry]:
        record = self._vms.get(vm)
        return [] if record is None else list(record.entries)

    def requests(self, vm: str) -> int:
        """How many requests ``vm`` made (that were answered) since the server started."""
        record = self._vms.get(vm)
        return 0 if record is None else record.requests


class ActivityEndpoint(ImdsEndpoint):
    """The endpoint, recording each answered request of a known VM in an :class:`Activity`."""

    def __init__(self, service: ScheduledEventsService, activity: Activity, **options: Any) -> None:
        super().__init__(service, **options)
        self.activity = activity
        # Bound once: every answered request of the fleet is recorded.
        self._record = activity.record

    def answered(
        self, request: ImdsRequest, response: ImdsResponse, vm: Vm | None, at: datetime
    ) -> None:
        if response.status:  # held, dropped or reset requests are recorded when answered
            if vm is None:  # refused before the VM was looked up (a 404, a 405, a 503)
                vm = self._caller(request)
            if vm is not None:
                self._record(vm.name, request, response, at)
            if REQUESTS.isEnabledFor(logging.DEBUG):
                log(
                    REQUESTS,
                    logging.DEBUG,
                    f"{request.method} {request.path}",
                    vm=vm.name if vm is not None else "-",
                    status=response.status,
                    peer=request.peer_address,
                )

    def _caller(self, request: ImdsRequest) -> Vm | None:
        """The VM a request refused before it was found came from, when the platform can
        be read (not while it is being rebuilt from its journal)."""
        try:
            return self.service.resolve_vm(request.local_address, request.peer_address)
        except StoreUnavailableError:
            return None

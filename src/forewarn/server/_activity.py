"""What each VM did and was shown, for the dashboard's per-VM timeline.

A bounded record per VM: its last requests (method, path, status, the incarnation it was
answered with) and each new document it was shown. A request repeated with the same answer
(a poller's every second) is one entry with a count and the time of the last, so a quiet
VM's timeline reaches back further, and recording a poll costs a counter's increment. Kept in
memory only: it is for watching a handler at work, not state; a restart starts it empty.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from forewarn.server._serve_logging import log
from forewarn.server.imds import (
    SCHEDULED_EVENTS_PATH,
    Answer,
    ImdsEndpoint,
    ImdsRequest,
    ImdsResponse,
)
from forewarn.service import ScheduledEventsService

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


class Activity:
    """Per-VM entries, newest last, and how many requests each VM made."""

    def __init__(self) -> None:
        self._entries: dict[str, deque[Entry]] = {}
        self._shown: dict[str, int] = {}
        # Each VM's latest request entry, with the request and answer that made it.
        self._runs: dict[str, tuple[Entry, str, str, ImdsResponse]] = {}
        self.requests: dict[str, int] = {}

    def record(self, vm: str, request: ImdsRequest, response: ImdsResponse, at: datetime) -> None:
        """``vm``'s request and its answer, given at platform time ``at``."""
        run = self._runs.get(vm)
        if run is not None:
            entry, method, path, answered = run
            # The endpoint answers an unchanged document with the same response object.
            if answered is response and method == request.method and path == request.path:
                entry.count += 1
                entry.until = at
                self.requests[vm] += 1
                return
        incarnation = None
        if response.etag is not None:
            incarnation = int(response.etag.strip(b'"'))
        entries = self._entries.get(vm)
        if entries is None:
            entries = self._entries[vm] = deque(maxlen=KEPT)
        entry = Entry(at, "request", request.method, request.path, response.status, incarnation)
        entries.append(entry)
        self._runs[vm] = (entry, request.method, request.path, response)
        self.requests[vm] = self.requests.get(vm, 0) + 1
        if (
            response.status == 200
            and request.path == SCHEDULED_EVENTS_PATH
            and incarnation is not None
            and self._shown.get(vm) != incarnation
        ):
            self._shown[vm] = incarnation
            document = orjson.loads(response.body)
            events = tuple(
                (e.get("EventId", ""), e.get("EventType", ""), e.get("EventStatus", ""))
                for e in document.get("Events", [])
            )
            entries.append(Entry(at, "document", incarnation=incarnation, events=events))

    def of(self, vm: str) -> list[Entry]:
        return list(self._entries.get(vm, ()))


class ActivityEndpoint(ImdsEndpoint):
    """The endpoint, recording each answered request of a known VM in an :class:`Activity`."""

    def __init__(self, service: ScheduledEventsService, activity: Activity, **options: Any) -> None:
        super().__init__(service, **options)
        self.activity = activity

    def respond(self, request: ImdsRequest) -> Answer:
        answer = self.answer(request)
        response, vm, at = answer
        if response.status:  # held, dropped or reset requests are recorded when answered
            if vm is None:  # refused before the VM was looked up (a 404, a 405)
                vm = self.service.resolve_vm(request.local_address, request.peer_address)
            if vm is not None:
                self.activity.record(vm.name, request, response, at)
            if REQUESTS.isEnabledFor(logging.DEBUG):
                log(
                    REQUESTS,
                    logging.DEBUG,
                    f"{request.method} {request.path}",
                    vm=vm.name if vm is not None else "-",
                    status=response.status,
                    peer=request.peer_address,
                )
        return answer

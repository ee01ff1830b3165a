"""What the application under test did: every request it sent, and the approvals among them.

The recording sits between the transports and :class:`~forewarn.server.imds.ImdsEndpoint`, so
it sees exactly what the endpoint saw (header names lower-cased, the raw query, the body as
sent) and what it answered, stamped with the platform's manual clock rather than the wall
clock: a test asks "approved within 30 s of the event appearing" in the platform's time,
which is the only time that moves in such a test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import parse_qsl

import orjson

from forewarn.domain.impact import ImpactPolicies
from forewarn.domain.vms import Vm
from forewarn.faults import STATUS as FAULT_STATUS
from forewarn.faults import FaultKind
from forewarn.server.imds import SCHEDULED_EVENTS_PATH, ImdsEndpoint, ImdsRequest, ImdsResponse
from forewarn.service import ScheduledEventsService
from forewarn.wire.approvals import MalformedApprovalError, parse_start_requests


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the endpoint saw it and answered it.

    ``vm`` is the VM the request was attributed to (by the address it arrived at), None when
    no VM answers there; ``status`` 0 means no answer at all, as for a VM that is down.
    """

    at: datetime
    vm: str | None
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    status: int
    response_body: bytes
    #: The injected fault the request met (``"error"``, ``"truncate"``...), "" for none; only
    #: :meth:`ForewarnPlatform.faulted_requests` holds such requests.
    fault: str = ""

    @property
    def params(self) -> dict[str, str]:
        return dict(parse_qsl(self.query, keep_blank_values=True))

    @property
    def api_version(self) -> str | None:
        return self.params.get("api-version")

    @property
    def is_approval(self) -> bool:
        """A successful ``POST`` of StartRequests."""
        return self.method == "POST" and self.path == SCHEDULED_EVENTS_PATH and self.status == 200


@dataclass(frozen=True, slots=True)
class Approval:
    """One accepted ``POST``: which EventIds, by which VM, when (platform time), how."""

    event_ids: tuple[str, ...]
    vm: str | None
    at: datetime
    headers: dict[str, str]
    request: RecordedRequest = field(repr=False)

    @property
    def api_version(self) -> str | None:
        return self.request.api_version


def _shown_event_ids(body: bytes) -> tuple[str, ...]:
    try:
        document = orjson.loads(body)
        return tuple(str(event["EventId"]).upper() for event in document["Events"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return ()


class Recorder:
    """The requests so far, safe to read from the test's thread while the server appends.

    ``first_shown`` remembers when each EventId first appeared in a document the application
    read: the moment it could have started to react.
    """

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._faulted: list[RecordedRequest] = []
        self._first_shown: dict[str, datetime] = {}

    def add(self, request: RecordedRequest) -> None:
        shown: tuple[str, ...] = ()
        if (
            request.method == "GET"
            and request.path == SCHEDULED_EVENTS_PATH
            and request.status == 200
        ):
            shown = _shown_event_ids(request.response_body)
        with self.changed:
            self._requests.append(request)
            for event_id in shown:
                self._first_shown.setdefault(event_id, request.at)
            self.changed.notify_all()

    def requests(self) -> list[RecordedRequest]:
        with self.changed:
            return list(self._requests)

    def add_faulted(self, request: RecordedRequest) -> None:
        with self.changed:
            self._faulted.append(request)
            self.changed.notify_all()

    def faulted(self) -> list[RecordedRequest]:
        with self.changed:
            return list(self._faulted)

    def first_shown(self, event_id: str) -> datetime | None:
        with self.changed:
            return self._first_shown.get(event_id.upper())

    def approvals(self) -> list[Approval]:
        return [approval for r in self.requests() if (approval := approval_of(r)) is not None]

    def wait(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Block until ``ready()`` holds after some request, for at most ``timeout`` seconds."""
        with self.changed:
            return self.changed.wait_for(ready, timeout)

    def clear(self) -> None:
        with self.changed:
            self._requests.clear()
            self._faulted.clear()


def approval_of(request: RecordedRequest) -> Approval | None:
    if not request.is_approval:
        return None
    try:
        event_ids = parse_start_requests(request.body)
    except MalformedApprovalError:  # pragma: no cover - the endpoint answered 400 then
        return None
    upper = tuple(event_id.upper() for event_id in event_ids)  # as documents show them
    return Approval(upper, request.vm, request.at, request.headers, request)


class RecordingEndpoint(ImdsEndpoint):
    """The real endpoint, keeping every request and answer in a :class:`Recorder`."""

    def __init__(
        self,
        service: ScheduledEventsService,
        recorder: Recorder,
        *,
        rate_limit: float,
        impact: ImpactPolicies | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(service, rate_limit=rate_limit, impact=impact, monotonic=monotonic)
        self.recorder = recorder
        #: Requests a truncate fault met, answered (and cut) next: by identity.
        self._cutting: set[int] = set()

    def faulted(self, request: ImdsRequest, kind: str) -> None:
        """Record a request a fault answers apart from the others (the application never
        read an answer from the endpoint): an error fault's status, 0 for no answer. A
        truncated answer is recorded when the endpoint has made it, with its status; a
        latency fault's request is answered, and recorded, as any other."""
        if kind == "latency":
            return
        if kind == "truncate":
            self._cutting.add(id(request))
            return
        status = FAULT_STATUS.get(FaultKind(kind), 0)
        vm = self.service.resolve_vm(request.local_address, request.peer_address)
        self.recorder.add_faulted(_record(request, vm, self.service.now(), status, b"", kind))

    def answered(
        self, request: ImdsRequest, response: ImdsResponse, vm: Vm | None, at: datetime
    ) -> None:
        if vm is None:  # refused before the VM was looked up (a 404, a 405)
            vm = self.service.resolve_vm(request.local_address, request.peer_address)
        if id(request) in self._cutting:
            self._cutting.discard(id(request))
            self.recorder.add_faulted(
                _record(request, vm, at, response.status, response.body, "truncate")
            )
            return
        self.recorder.add(_record(request, vm, at, response.status, response.body))


def _record(
    request: ImdsRequest, vm: Vm | None, at: datetime, status: int, body: bytes, fault: str = ""
) -> RecordedRequest:
    return RecordedRequest(
        at=at,
        vm=None if vm is None else vm.name,
        method=request.method,
        path=request.path,
        query=request.query,
        headers=dict(request.headers),
        body=request.body,
        status=status,
        response_body=body,
        fault=fault,
    )

"""What a trial saw, and the pure questions its grade asks of it.

A trial's drive (:mod:`forewarn.verify.trials`) makes things happen on a platform and
collects an :class:`Observation`: the handler's recorded requests, the marks of the event's
life, the roles of the events it made, what the relay saw and whether the handler exited.
Grading is then a function of that value alone, so each grade is tested on request sequences
written by hand (tests/verify/test_grading.py) without a process or a socket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import orjson

from forewarn.testing import RecordedRequest
from forewarn.verify.model import (
    Evidence,
    RequestRecord,
    StateChange,
    Verdict,
    excerpt,
)

SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
#: The request headers the evidence keeps.
HEADERS_OF_INTEREST = ("metadata", "if-none-match", "connection", "content-type", "user-agent")


@dataclass(frozen=True, slots=True)
class Grade:
    """A verdict with its one-line reason, and notes for the evidence."""

    verdict: Verdict
    reason: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observation:
    """Everything a trial's grade may look at.

    ``t0`` is the platform time the trial began; ``events`` names the events the trial made by
    role (``"own"``, ``"other"``...), ``not_before`` gives each role's NotBefore as seconds
    since ``t0``. ``exited``/``exited_t``: the handler's exit status and when (None while it
    ran). ``sends``/``opens``: when the relay saw request bytes / new connections (seconds
    since ``t0``). ``checks``: the ``--drained-check``/``--recovered-check`` outcomes.
    ``patience``: how long a handler has to give up on a request that gets no answer.
    """

    t0: datetime
    requests: tuple[RecordedRequest, ...] = ()
    marks: tuple[StateChange, ...] = ()
    events: Mapping[str, str] = field(default_factory=dict)
    not_before: Mapping[str, float] = field(default_factory=dict)
    vm: str = "vm0"
    interval: float = 1.0
    exited: int | None = None
    exited_t: float | None = None
    sends: tuple[float, ...] = ()
    opens: tuple[float, ...] = ()
    checks: Mapping[str, tuple[bool, str]] = field(default_factory=dict)
    faults_hit: int = 0
    output: str = ""
    end_t: float = 0.0
    patience: float = 20.0
    #: The requests an injected fault answered (each with its ``fault``); ``requests`` has
    #: only those the endpoint answered.
    faulted: tuple[RecordedRequest, ...] = ()

    def t(self, at: datetime) -> float:
        return (at - self.t0).total_seconds()

    def mark_t(self, state: str, event_id: str = "") -> float | None:
        """When the first mark ``state`` (of ``event_id`` when given) came, or None."""
        for mark in self.marks:
            if mark.state == state and (not event_id or mark.event_id == event_id):
                return mark.t
        return None


# -- questions about requests --------------------------------------------------------------


def is_events_request(request: RecordedRequest) -> bool:
    return request.path == SCHEDULED_EVENTS_PATH


def polls(observation: Observation) -> list[RecordedRequest]:
    """The handler's GETs of the events document (any answer)."""
    return [r for r in observation.requests if r.method == "GET" and is_events_request(r)]


def answered_polls(observation: Observation, after: float = float("-inf")) -> list[RecordedRequest]:
    """GETs of the document answered 200 or 304, at or after ``after`` (trial seconds)."""
    return [
        r for r in polls(observation) if r.status in (200, 304) and observation.t(r.at) >= after
    ]


def shown_ids(request: RecordedRequest) -> tuple[str, ...]:
    """The EventIds a 200 document showed."""
    if request.status != 200:
        return ()
    try:
        document = orjson.loads(request.response_body)
        return tuple(str(event["EventId"]).upper() for event in document["Events"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return ()


def first_seen(observation: Observation, event_id: str) -> float | None:
    """When the handler first read a document showing ``event_id`` (trial seconds)."""
    for request in polls(observation):
        if event_id.upper() in shown_ids(request):
            return observation.t(request.at)
    return None


def approval_ids(request: RecordedRequest) -> tuple[str, ...]:
    """The EventIds a POST's body names (whatever its answer); () when it names none."""
    try:
        body = orjson.loads(request.body)
        return tuple(str(item["EventId"]).upper() for item in body["StartRequests"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return ()


def posts(observation: Observation) -> list[RecordedRequest]:
    return [r for r in observation.requests if r.method == "POST" and is_events_request(r)]


def approvals_of(observation: Observation, event_id: str) -> list[RecordedRequest]:
    """Every POST naming ``event_id``, answered or not."""
    wanted = event_id.upper()
    return [r for r in posts(observation) if wanted in approval_ids(r)]


def fmt(seconds: float | None) -> str:
    return "never" if seconds is None else f"+{seconds:.1f}s"


# -- evidence ------------------------------------------------------------------------------


def record_of(observation: Observation, request: RecordedRequest) -> RequestRecord:
    return RequestRecord(
        t=round(observation.t(request.at), 3),
        at=request.at.isoformat(),
        method=request.method,
        path=request.path,
        query=request.query,
        headers={k: v for k, v in request.headers.items() if k in HEADERS_OF_INTEREST},
        status=request.status,
        sent=excerpt(request.body),
        received=excerpt(request.response_body),
        fault=request.fault,
    )


def evidence_of(observation: Observation, notes: Sequence[str] = (), limit: int = 60) -> Evidence:
    """The handler's requests (the last ``limit``: those around the decision), those an
    injected fault answered among them (each with its fault), and the marks on one timeline,
    with the notes and the end of the handler's output when it exited."""
    every = sorted((*observation.requests, *observation.faulted), key=lambda r: r.at)
    requests = [record_of(observation, r) for r in every][-limit:]
    extra = list(notes)
    if observation.faults_hit:
        extra.append(
            f"injected faults answered {observation.faults_hit} request(s) (listed, with "
            "the fault each met)"
        )
    if observation.exited is not None:
        extra.append(f"the handler exited with status {observation.exited}")
        if observation.output:
            extra.append("its last output: " + observation.output[-600:])
    return Evidence(tuple(requests), observation.marks, tuple(extra))


__all__ = [
    "HEADERS_OF_INTEREST",
    "SCHEDULED_EVENTS_PATH",
    "Grade",
    "Observation",
    "answered_polls",
    "approval_ids",
    "approvals_of",
    "evidence_of",
    "first_seen",
    "fmt",
    "is_events_request",
    "polls",
    "posts",
    "record_of",
    "shown_ids",
]

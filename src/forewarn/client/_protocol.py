"""What a request looks like and what an answer means, shared by both clients and free of I/O.

:class:`Client` and :class:`AsyncClient` differ only in how they wait; every rule lives here
once: the paths and query parameters, the ``Metadata: true`` header on every request, the
approval body, the mapping from statuses to the error tree, the move from a lease address to
169.254.169.254 when the former is not the Metadata Service, and the longer timeout of the
first call (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Enabling and
disabling Scheduled Events": "You should expect a delayed response in your first call of up to two
minutes").
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from forewarn.client._discovery import DEFAULT_LEASE_PATHS, Endpoint, endpoint_candidates
from forewarn.client._errors import (
    BadRequestError,
    GoneError,
    ImdsConnectionError,
    ImdsError,
    ImdsHttpError,
    ImdsTimeoutError,
    ImdsTransportError,
    InvalidApiVersionError,
    MalformedResponseError,
    MethodNotAllowedError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from forewarn.client._models import (
    ComputeMetadata,
    ScheduledEvent,
    ScheduledEventsDocument,
    parse_compute,
    parse_document,
)
from forewarn.client._retry import RetryPolicy
from forewarn.errors import reason
from forewarn.nesting import load_json

#: The current Scheduled Events version
#: (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
#: Availability": "the current version is 2020-07-01").
DEFAULT_API_VERSION = "2020-07-01"
#: A general IMDS version for ``/metadata/instance``, which has its own version list.
DEFAULT_INSTANCE_API_VERSION = "2021-02-01"
#: Short enough to notice a dead endpoint within a poll or two of the once-a-second rhythm.
DEFAULT_TIMEOUT = httpx.Timeout(5.0, connect=2.0)
#: The documented first-call delay of up to two minutes, plus a margin.
FIRST_CALL_TIMEOUT = 130.0
DEFAULT_RETRY = RetryPolicy()

SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
COMPUTE_PATH = "/metadata/instance/compute"
#: Sent on every request, GET and POST
#: (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Headers": "The
#: Metadata:true header is required for all scheduled events requests").
METADATA_HEADERS: Mapping[str, str] = {"Metadata": "true"}
_JSON_HEADERS: Mapping[str, str] = {**METADATA_HEADERS, "Content-Type": "application/json"}

_ERRORS_BY_STATUS: dict[int, type[ImdsHttpError]] = {
    400: BadRequestError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    410: GoneError,
    429: TooManyRequestsError,
}


@dataclass(frozen=True, slots=True)
class Call:
    """One request, before it is sent to whichever endpoint is current."""

    method: str
    path: str
    params: Mapping[str, str]
    headers: Mapping[str, str]
    timeout: httpx.Timeout
    content: bytes | None = None
    scheduled_events: bool = False


def event_ids_of(events: Iterable[str | ScheduledEvent]) -> tuple[str, ...]:
    """EventIds from ids or events, in order, without repeats."""
    ids = [e.event_id if isinstance(e, ScheduledEvent) else e for e in events]
    for event_id in ids:
        if not isinstance(event_id, str) or not event_id:
            raise ValueError(f"not an EventId: {event_id!r}")
    return tuple(dict.fromkeys(ids))


def approval_body(event_ids: Sequence[str]) -> bytes:
    """``{"StartRequests":[{"EventId":...}]}``
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event"); several
    ids in one request are allowed ("You can confirm multiple events in a single request if needed",
    its Python sample)."""
    requests = [{"EventId": event_id} for event_id in event_ids]
    return json.dumps({"StartRequests": requests}, separators=(",", ":")).encode()


#: The most of an answer the client reads. A real document is a few KiB (at most 100
#: StartRequests' worth of events); a 40 MB one took a reader to 378 MB, so anything larger
#: is refused before it is buffered.
MAX_BODY_BYTES = 1024 * 1024


def read_bounded(headers: Mapping[str, str], chunks: Iterable[bytes]) -> bytes:
    """The body from ``chunks``, refused as malformed past :data:`MAX_BODY_BYTES`."""
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise MalformedResponseError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise MalformedResponseError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    return bytes(body)


def decode_json(body: bytes) -> Any:
    try:
        return load_json(body)  # nesting bounded: a hostile body is no RecursionError
    except ValueError:
        raise MalformedResponseError("the body is not JSON", body=body) from None


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date; the backoff applies instead
    return seconds if seconds >= 0 else None


def error_for_answer(status: int, body: bytes, headers: Mapping[str, str]) -> ImdsHttpError:
    """The error an answer with ``status`` other than 200 stands for."""
    message = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
    newest: tuple[str, ...] | None = None
    try:
        payload = load_json(body) if body else None
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        if isinstance(payload.get("error"), str):
            message = payload["error"]
        versions = payload.get("newest-versions")
        if isinstance(versions, list):
            newest = tuple(str(v) for v in versions)
    retry_after = _retry_after(headers)
    if status == 400 and newest is not None:
        return InvalidApiVersionError(
            status, message, newest_versions=newest, body=body, retry_after=retry_after
        )
    kind = _ERRORS_BY_STATUS.get(status)
    if kind is None:
        kind = ServerError if 500 <= status <= 599 else ImdsHttpError
    return kind(status, message, body=body, retry_after=retry_after)


def transport_error(exc: httpx.TransportError, url: str) -> ImdsTransportError:
    if isinstance(exc, httpx.TimeoutException):
        return ImdsTimeoutError(f"no answer from {url} in time ({type(exc).__name__})")
    return ImdsConnectionError(f"no answer from {url}: {reason(exc)}")


def _looks_like_imds(status: int, body: bytes) -> bool:
    """Whether an answer came from a Metadata Service: anything but a 404 or a non-JSON body
    (every IMDS answer, errors included, is JSON; an approval's 200 may be empty)."""
    if status == 404:
        return False
    if not body:
        return status == 200
    try:
        return isinstance(load_json(body), dict)
    except ValueError:
        return False


class ClientCore:
    """The state both clients share: the endpoint in use, versions, timeouts, retries."""

    def __init__(
        self,
        endpoint: str | None,
        *,
        api_version: str,
        instance_api_version: str,
        timeout: float | httpx.Timeout | None,
        first_call_timeout: float | None,
        retry: RetryPolicy,
        rng: random.Random | None,
        environ: Mapping[str, str] | None,
        lease_paths: Sequence[str] | None,
    ) -> None:
        self.candidates = endpoint_candidates(
            endpoint,
            environ=environ,
            lease_paths=DEFAULT_LEASE_PATHS if lease_paths is None else lease_paths,
        )
        self._index = 0
        self._settled = len(self.candidates) == 1
        self.api_version = api_version
        self.instance_api_version = instance_api_version
        self.timeout = httpx.Timeout(timeout)
        self.first_call_timeout = first_call_timeout
        self.first_call_pending = first_call_timeout is not None
        self.retry = retry
        self.rng = rng or random.Random()

    @property
    def endpoint(self) -> Endpoint:
        return self.candidates[self._index]

    def url(self, call: Call) -> str:
        return self.endpoint.base_url + call.path

    # -- requests --------------------------------------------------------------------------

    def _scheduled_events_timeout(self) -> httpx.Timeout:
        first = self.first_call_timeout
        timeout = self.timeout
        if not self.first_call_pending or first is None or timeout.read is None:
            return timeout
        return httpx.Timeout(
            connect=timeout.connect,
            read=max(timeout.read, first),
            write=timeout.write,
            pool=timeout.pool,
        )

    def document_call(self) -> Call:
        return Call(
            "GET",
            SCHEDULED_EVENTS_PATH,
            {"api-version": self.api_version},
            METADATA_HEADERS,
            self._scheduled_events_timeout(),
            scheduled_events=True,
        )

    def approval_call(self, events: Iterable[str | ScheduledEvent]) -> Call | None:
        """The POST approving ``events``; None for no events, as an empty StartRequests
        array is refused by the service (SPEC 3) and approves nothing anyway."""
        event_ids = event_ids_of(events)
        if not event_ids:
            return None
        return Call(
            "POST",
            SCHEDULED_EVENTS_PATH,
            {"api-version": self.api_version},
            _JSON_HEADERS,
            self._scheduled_events_timeout(),
            content=approval_body(event_ids),
            scheduled_events=True,
        )

    def compute_call(self) -> Call:
        return Call(
            "GET",
            COMPUTE_PATH,
            {"api-version": self.instance_api_version, "format": "json"},
            METADATA_HEADERS,
            self.timeout,
        )

    # -- answers ---------------------------------------------------------------------------

    def _next_endpoint(self) -> bool:
        """Give up the current candidate for the next one; False when none is left."""
        if self._settled or self._index + 1 >= len(self.candidates):
            return False
        self._index += 1
        self._settled = self._index + 1 >= len(self.candidates)
        return True

    def on_transport_error(
        self, call: Call, exc: httpx.TransportError
    ) -> ImdsTransportError | None:
        """The error to raise; None when the next endpoint is to be tried at once."""
        error = transport_error(exc, self.url(call))
        return None if self._next_endpoint() else error

    def on_answer(
        self, call: Call, status: int, body: bytes, headers: Mapping[str, str]
    ) -> bytes | None:
        """The body of a 200; None to try the next endpoint; raises for any other status."""
        if not self._settled:
            if not _looks_like_imds(status, body) and self._next_endpoint():
                return None
            self._settled = True
        if status != 200:
            raise error_for_answer(status, body, headers)
        if call.scheduled_events:
            self.first_call_pending = False
        return body

    def document(self, body: bytes) -> ScheduledEventsDocument:
        return parse_document(decode_json(body), self.api_version)

    def compute(self, body: bytes) -> ComputeMetadata:
        return parse_compute(decode_json(body))

    def retry_delay(self, error: ImdsError, *, attempt: int, elapsed: float) -> float | None:
        error.attempts = attempt
        return self.retry.delay_after(error, attempt=attempt, elapsed=elapsed, rng=self.rng)

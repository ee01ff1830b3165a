"""The VM-facing endpoint as a plain function from request to response.

Transport-free on purpose: the socket server (:mod:`forewarn.server.http`), the ASGI adapter
used for in-process tests and the benchmarks all call :meth:`ImdsEndpoint.handle`, so every one
of them answers byte for byte the same. Checks run in a fixed order (SPEC 1): route, method,
caller, rate limit, X-Forwarded-For, query, Metadata header, api-version.
"""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple
from urllib.parse import parse_qsl, unquote

from forewarn.domain._frozen import frozen_slot_setters
from forewarn.domain.api_versions import ApiVersion, find_version
from forewarn.domain.errors import UnknownEventError
from forewarn.domain.impact import ImpactPolicies, ImpactPolicy, Pause
from forewarn.domain.ratelimit import RateLimiter
from forewarn.domain.vms import Vm
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StorageError, StoreUnavailableError, UnstorableValueError
from forewarn.vm_requests import AnswerLaterError, Ready
from forewarn.wire import errors as messages
from forewarn.wire import instance as instance_wire
from forewarn.wire.approvals import MalformedApprovalError, parse_start_requests

JSON = b"application/json; charset=utf-8"
TEXT = b"text/plain; charset=utf-8"

SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
INSTANCE_PATH = "/metadata/instance"
VERSIONS_PATH = "/metadata/versions"

#: The Server header of real responses, which some SDKs check names IMDS (SPEC 1: "Server:
#: IMDS/150.870.65.1854", the build number varies).
SERVER = b"IMDS/150.870.65.1854"


class RequestIds:
    """``x-ms-request-id`` values: a GUID per response, as the real service sends (SPEC 1).

    A random prefix per process and a counter: unique without the cost of a uuid4 per poll.
    :attr:`next` is made of C iterators, so taking a value costs no Python call.
    """

    __slots__ = ("next",)

    def __init__(self) -> None:
        prefix = str(uuid.uuid4())[:24].encode()
        # 1 .. 2**48 - 1 (twelve hex digits), then again: the GUID's shape holds for ever.
        counter = itertools.chain.from_iterable(itertools.repeat(range(1, 1 << 48)))
        values = map(b"%s%012x".__mod__, zip(itertools.repeat(prefix), counter))
        self.next: Callable[[], bytes] = functools.partial(next, values)


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on untrusted input; anything longer is refused with 400 (SPEC 1)."""

    max_body: int = 16 * 1024
    max_parameter_key: int = 64
    max_parameter_value: int = 256
    max_header_value: int = 4096
    max_headers: int = 64
    max_url: int = 2048


@dataclass(slots=True)
class ImdsRequest:
    """What the transport saw: header names lower-cased, values as sent.

    Its fields are never changed, so what the endpoint decides from them alone is kept in
    ``checked``; a transport that sees the same bytes again (the socket server, for a poll
    repeated on a connection or by the same VM on a new one) may hand that over with the next
    request of those bytes.
    """

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    local_address: str
    peer_address: str
    checked: ImdsResponse | Checked | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True, init=False)
class ImdsResponse:
    """What to answer. Status 0 is no answer now: the connection is closed, or reset when
    ``reset``, or, when ``held_until`` is set, the request waits until that platform time and
    is then handled again (:mod:`forewarn.domain.impact`); when ``unanswered``, it is never
    answered, the connection kept open until the client gives up (a VM that is gone); with
    ``later``, the answer waits for a write committed with others (group commit), or for
    the store to confirm what the platform may show: ``later(reply)`` has ``reply`` called
    with it, with the error no status answers, or with :data:`AFRESH`."""

    status: int
    body: bytes = b""
    content_type: bytes | None = JSON
    etag: bytes | None = None
    held_until: datetime | None = None
    reset: bool = False
    unanswered: bool = False
    later: Callable[[Reply], None] | None = None

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        content_type: bytes | None = JSON,
        etag: bytes | None = None,
        held_until: datetime | None = None,
        reset: bool = False,
        unanswered: bool = False,
        later: Callable[[Reply], None] | None = None,
    ) -> None:
        # Through the slots' own setters (forewarn.domain._frozen): a campaign builds one
        # for every document it changes and every request a paused VM makes.
        _set_status(self, status)
        _set_body(self, body)
        _set_content_type(self, content_type)
        _set_etag(self, etag)
        _set_held_until(self, held_until)
        _set_reset(self, reset)
        _set_unanswered(self, unanswered)
        _set_later(self, later)


(
    _set_status,
    _set_body,
    _set_content_type,
    _set_etag,
    _set_held_until,
    _set_reset,
    _set_unanswered,
    _set_later,
) = frozen_slot_setters(ImdsResponse)


#: What a request answered later (:attr:`ImdsResponse.later`) is answered when it is to be
#: handled afresh, as if it arrived now: what it waited for is done.
AFRESH = ImdsResponse(0)

#: Told the answer of a request answered later (:attr:`ImdsResponse.later`).
Reply = Callable[["ImdsResponse | Exception"], None]


class Checked(NamedTuple):
    """What a request's own fields decide, for a caller known and within its rate: in SPEC
    1's order nothing after the rate limit depends on anything else, so the same request
    bytes are checked once."""

    query: dict[str, str]
    #: Scheduled Events only: the api-version asked for, and the If-None-Match sent.
    version: ApiVersion | None
    tags: str | None


class Answer(NamedTuple):
    """A response with what transports and recorders need beside it."""

    response: ImdsResponse
    #: The calling VM, when the request got as far as finding it.
    vm: Vm | None
    #: The platform time the request was answered at: the Date header's.
    at: datetime
    #: The platform's count of changes when it was answered: until something of the VM's
    #: changes after it (other VMs' changes aside), the same request from the same address
    #: is answered the same (:meth:`ImdsEndpoint.respond_again`); None when a repeat must be
    #: answered afresh.
    repeats_under: int | None = None


def _error(status: int, message: str) -> ImdsResponse:
    return ImdsResponse(status, messages.error_body(message))


def _approval_refused(error: Exception) -> ImdsResponse:
    """The answer to an approval refused with ``error``; raised again when no status says
    it (a fault of forewarn's, answered 500)."""
    if isinstance(error, UnknownEventError | UnstorableValueError):
        return _error(400, f"Bad request. {error}")
    if isinstance(error, StorageError):  # not recorded (a full disk, a store that is down)
        return _UNAVAILABLE
    raise error


_INVALID_API_VERSION = ImdsResponse(400, messages.invalid_api_version_body())
_MISSING_API_VERSION = ImdsResponse(400, messages.invalid_api_version_body(given=False))
_MISSING_HEADER = _error(400, messages.MISSING_METADATA_HEADER)
_FORWARDED = _error(400, messages.FORWARDED_REQUEST)
_TOO_MANY = _error(429, messages.TOO_MANY_REQUESTS)
_UNAVAILABLE = _error(503, messages.SERVICE_UNAVAILABLE)
_APPROVED = ImdsResponse(200, b"", None)

#: Status 0: close the connection without a response, as a VM that is rebooting, frozen or
#: deleted cannot be talking to its endpoint at all.
NO_ANSWER = ImdsResponse(0, b"", None)
#: Status 0 with a reset: the connection is reset at once, as for a VM that is off.
RESET = ImdsResponse(0, b"", None, reset=True)
#: Status 0, never answered: a deleted VM's request waits until its client gives up, as
#: nothing answers at the address of a VM that no longer exists.
UNANSWERED = ImdsResponse(0, b"", None, unanswered=True)

_ALLOWED_METHODS = {
    SCHEDULED_EVENTS_PATH: ("GET", "POST"),
    VERSIONS_PATH: ("GET",),
}
_QUERY_CACHE_SIZE = 512
_OK_CACHE_SIZE = 1024
#: Distinct (If-None-Match, tag) pairs remembered: a few per document generation.
_MATCH_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=_OK_CACHE_SIZE)
def _ok(body: bytes, etag: bytes) -> ImdsResponse:
    """A 200 carrying ``body``, built once while the body is the same.

    A VM's document bytes stay the same object until its events change, and VMs with the same
    document share one answer; finding it costs less than building a frozen response on every
    poll (measured with ``python -m bench``). The body holds the incarnation, so the same body
    always has the same tag.
    """
    return ImdsResponse(200, body, etag=etag)


def _parse_query(raw: str, limits: Limits) -> dict[str, str] | str:
    """Parameters by name, or an error message. Each endpoint caches it by the query alone
    (clients repeat one query; hashing the limits on every request cost more than the
    rest of the lookup); callers only read the mapping."""
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return "Bad request. The query string is not valid"
    params: dict[str, str] = {}
    for key, value in pairs:
        if len(key) > limits.max_parameter_key:
            return (
                "Parameter key length is larger than MaxParameterKeyLength: "
                f"{limits.max_parameter_key}"
            )
        if len(value) > limits.max_parameter_value:
            return (
                "Parameter value length is larger than MaxParameterValueLength: "
                f"{limits.max_parameter_value}"
            )
        if key in params:
            return messages.DUPLICATE_PARAMETER
        params[key] = value
    return params


class ImdsEndpoint:
    """Answers ``/metadata/scheduledevents``, ``/metadata/instance`` and ``/metadata/versions``."""

    def __init__(
        self,
        service: ScheduledEventsService,
        *,
        rate_limit: float = 5.0,
        limits: Limits | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        impact: ImpactPolicies | None = None,
        group_writes: bool = False,
    ) -> None:
        self.service = service
        #: Whether approvals are answered later, once committed with the others of the same
        #: turn of the event loop (a front-end sharing its journal, in ``forewarn serve``).
        self.group_writes = group_writes
        self.impact = impact or ImpactPolicies()
        self.limits = limits or Limits()
        self.rate_limiter = RateLimiter(rate_limit)
        self._monotonic = monotonic
        self._parse_query = functools.lru_cache(maxsize=_QUERY_CACHE_SIZE)(
            functools.partial(_parse_query, limits=self.limits)
        )

    def handle(self, request: ImdsRequest) -> ImdsResponse:
        return self.respond(request).response

    def respond(self, request: ImdsRequest, *, admitted: bool = False) -> Answer:
        """The answer as a transport needs it: what :meth:`handle` answers, with the platform
        time for its Date header, told to :meth:`answered`. ``admitted``: the request was held
        (its VM paused) and counted against the rate limit when it arrived; it is not counted
        again now that it is answered."""
        answer = self.answer(request, admitted=admitted)
        self.answered(request, answer.response, answer.vm, answer.at)
        return answer

    def faulted(self, request: ImdsRequest, kind: str) -> None:
        """Told of every request an injected fault (:mod:`forewarn.faults`) meets, before the
        transport carries it out; ``kind`` is the fault's (``"error"``, ``"truncate"``...).
        Nothing here; endpoints that record requests override it, so what a client met is
        known even when the endpoint never answered it."""

    def answered(
        self, request: ImdsRequest, response: ImdsResponse, vm: Vm | None, at: datetime
    ) -> None:
        """Told of every request a transport has answered through :meth:`respond` or
        :meth:`respond_again`: ``vm`` is the calling VM when the request got as far as
        finding it, ``at`` the platform time of the answer. Nothing here; endpoints that
        record requests override it, so a repeated poll is recorded as any other."""

    def respond_again(
        self,
        request: ImdsRequest,
        response: ImdsResponse,
        vm: Vm,
        repeats_under: int,
        *,
        admitted: bool = False,
    ) -> datetime | None:
        """Answer ``request`` with ``response`` again: a poll repeated from the same address
        (on a kept connection, as every kept-alive VM sends every second, or on a new one, as
        the documentation's sample does; the same bytes, Host aside) that :meth:`respond`
        answered ``response``, finding ``vm``, with
        :attr:`Answer.repeats_under` ``repeats_under``. The platform time it is answered at,
        the request counted, rate-limited and told to :meth:`answered` as by
        :meth:`respond`; None when the answer may differ now (something of the VM's changed,
        or it is over its rate limit), and :meth:`respond` says what it is. ``admitted`` as for
        :meth:`respond`."""
        try:
            at = self.service.request_again(vm.name, repeats_under)
        except StoreUnavailableError:  # answered by respond, which says so
            return None
        if at is None or not (admitted or self.rate_limiter.allow(vm.name, self._monotonic())):
            return None
        self.answered(request, response, vm, at)
        return at

    def answer(self, request: ImdsRequest, *, admitted: bool = False) -> Answer:
        """The response, the calling VM when the request got as far as finding it (so a
        wrapper recording requests by VM need not look it up again) and the platform time it
        was answered at, read once per request.

        The rate limit counts requests as they arrive: "5 requests per second (on a per VM
        basis)" (IMDS overview, "Rate limiting"). One its paused VM cannot answer yet (the
        first-call delay, an impact) is counted then, and held only when within the rate;
        when the pause ends it is answered ``admitted``, not counted a second time, so a VM
        that polled within its rate is never refused for having been kept waiting."""
        path = request.path
        method = request.method
        allowed = _ALLOWED_METHODS.get(path)
        if allowed is None:
            if path == INSTANCE_PATH or path.startswith(INSTANCE_PATH + "/"):
                allowed = ("GET",)
            else:
                response = _error(404, messages.not_found_message(path, method))
                return Answer(response, None, self.service.now())
        if method not in allowed:
            response = _error(405, messages.method_not_allowed_message(path, method))
            return Answer(response, None, self.service.now())

        # What the request's own bytes decide is worked out now (it has no effect) but
        # answered only in its turn, after the caller and its rate limit.
        checked = request.checked
        if checked is None:
            checked = request.checked = self._check(request)
        polled = checked.version if isinstance(checked, Checked) and method == "GET" else None
        try:
            # Only a request for events counts for enablement (Platform.arrive).
            arrival = self.service.request_from(
                request.local_address,
                request.peer_address,
                polled,
                for_events=path == SCHEDULED_EVENTS_PATH,
            )
        except AnswerLaterError as later:
            # Answered once the store has confirmed what the platform must not show before
            # (a write's commit, or this VM's first request's record), off the event loop.
            wait = functools.partial(self._answer_later, later.wait)
            return Answer(ImdsResponse(0, later=wait), None, self.service.now())
        except StoreUnavailableError:
            # The request would change state (a first request turns Scheduled Events on)
            # and the store cannot record it, or the platform cannot be read back: refused
            # with the text IMDS gives (SPEC 1), nothing changed; clients retry.
            return Answer(_UNAVAILABLE, None, self.service.now())
        if arrival is None:
            message = f"Bad request. No virtual machine answers at {request.local_address}"
            return Answer(_error(400, message), None, self.service.now())
        # One body for every VM's every request (a poll above all): each call saved here is
        # saved on every poll of the fleet.
        vm, pause, at, encoded, repeats_under = arrival
        if pause is not None:
            paused = self._paused(pause)
            if paused.held_until is None or admitted:  # nothing answers it, or counted already
                return Answer(paused, vm, at)
            if not self.rate_limiter.allow(vm.name, self._monotonic()):
                return Answer(_TOO_MANY, vm, at)
            return Answer(paused, vm, at)
        if not admitted and not self.rate_limiter.allow(vm.name, self._monotonic()):
            return Answer(_TOO_MANY, vm, at)
        if not isinstance(checked, Checked):  # refused by the request's own bytes
            return Answer(checked, vm, at)
        if encoded is not None:  # a GET of Scheduled Events
            tags = checked.tags
            if tags is not None:
                not_modified = conditional(tags, encoded.tag, encoded.etag)
                if not_modified is not None:
                    return Answer(not_modified, vm, at, repeats_under)
            return Answer(_ok(encoded.body, encoded.etag), vm, at, repeats_under)
        if checked.version is not None:  # a POST of Scheduled Events
            return Answer(self._approve(request, vm), vm, at)
        if path == VERSIONS_PATH:
            return Answer(ImdsResponse(200, instance_wire.versions_body()), vm, at)
        return Answer(self._instance(vm, path, checked.query), vm, at)

    def _check(self, request: ImdsRequest) -> ImdsResponse | Checked:
        """The checks after the rate limit (SPEC 1's order): a refusal, or what is asked."""
        headers = request.headers
        if "x-forwarded-for" in headers:
            return _FORWARDED
        query = self._parse_query(request.query)
        if isinstance(query, str):
            return _error(400, query)
        metadata = headers.get("metadata")
        has_header = metadata is not None and metadata.lower() == "true"
        if request.path == SCHEDULED_EVENTS_PATH:
            given = query.get("api-version")
            version = find_version(given)
            if not has_header and not (
                request.method == "POST"
                and version is not None
                and not version.metadata_header_on_post
            ):
                return _MISSING_HEADER
            if version is None:
                return _INVALID_API_VERSION if given else _MISSING_API_VERSION
            return Checked(query, version, headers.get("if-none-match"))
        if not has_header:
            return _MISSING_HEADER
        return Checked(query, None, None)

    # -- pieces ----------------------------------------------------------------------------

    def _paused(self, pause: Pause) -> ImdsResponse:
        policy = self.impact.for_pause(pause)
        if policy is ImpactPolicy.HOLD:
            if pause.until is None:  # gone: held with no end
                return UNANSWERED
            return ImdsResponse(0, held_until=pause.until)
        return RESET if policy is ImpactPolicy.REFUSE else NO_ANSWER

    def _approve(self, request: ImdsRequest, vm: Vm) -> ImdsResponse:
        """Every api-version approves the same way."""
        body = request.body
        if len(body) > self.limits.max_body:
            return _error(400, f"Request body is larger than MaxBodyLength: {self.limits.max_body}")
        try:
            event_ids = parse_start_requests(body)
        except MalformedApprovalError as exc:
            return _error(400, f"Bad request. {exc}")
        if self.group_writes:
            later = functools.partial(self._approve_later, request, vm, event_ids)
            return ImdsResponse(0, later=later)
        try:
            self.approve(vm, event_ids)
        except (UnknownEventError, UnstorableValueError, StorageError) as exc:
            return _approval_refused(exc)
        return _APPROVED

    def _approve_later(
        self, request: ImdsRequest, vm: Vm, event_ids: tuple[str, ...], reply: Reply
    ) -> None:
        """Approve with the others of this turn of the event loop, and answer once that is
        committed (told to :meth:`answered` then, as a held request is when answered)."""

        def done(error: Exception | None) -> None:
            try:
                response = _APPROVED if error is None else _approval_refused(error)
            except Exception as exc:  # no status answers it: the transport's 500
                reply(exc)
                return
            self.answered(request, response, vm, self.service.now())
            reply(response)

        self.service.approve_soon(vm.name, event_ids, done)

    @staticmethod
    def _answer_later(wait: Callable[[Ready], None], reply: Reply) -> None:
        """Have the request handled afresh once what it waits for is done
        (:class:`AnswerLaterError`), or refuse it as the store being unavailable when that
        failed."""

        def ready(error: Exception | None) -> None:
            reply(AFRESH if error is None else _UNAVAILABLE)

        wait(ready)

    def approve(self, vm: Vm, event_ids: tuple[str, ...]) -> None:
        """``vm`` approves ``event_ids`` (a well-formed POST's): the platform's step, which
        an endpoint serving something else (a replayed recording) replaces; an id the VM
        is not shown raises UnknownEventError, answered 400."""
        self.service.approve(vm.name, event_ids)

    def _instance(self, vm: Vm, path: str, query: dict[str, str]) -> ImdsResponse:
        api_version = query.get("api-version")
        if api_version not in instance_wire.INSTANCE_API_VERSIONS:
            return ImdsResponse(
                400, messages.invalid_api_version_body_for(instance_wire.INSTANCE_NEWEST_VERSIONS)
            )
        parts = tuple(part for part in path[len(INSTANCE_PATH) :].split("/") if part)
        try:
            value = instance_wire.select(instance_wire.instance_fields(vm, api_version), parts)
        except KeyError:
            return _error(404, messages.not_found_message(path, "GET"))
        fmt = query.get("format", "json")
        if fmt == "json" and not instance_wire.is_leaf(value):
            return ImdsResponse(200, instance_wire.encode_json(value))
        if fmt == "text" and parts:
            return ImdsResponse(200, instance_wire.encode_text(value), TEXT)
        return _error(400, f'Bad request. Query parameter format="{fmt}" is not allowed here')


def response_headers(
    response: ImdsResponse, request_id: bytes, date: bytes
) -> list[tuple[bytes, bytes]]:
    """A response's headers in the order of real captures (SPEC 1), for transports that
    build header lists; the socket server writes the same bytes from pre-formatted parts."""
    headers: list[tuple[bytes, bytes]] = []
    if response.content_type is not None:
        headers.append((b"Content-Type", response.content_type))
    headers += [(b"Server", SERVER), (b"x-ms-request-id", request_id), (b"Date", date)]
    if response.status != 304:
        headers.append((b"Content-Length", b"%d" % len(response.body)))
    if response.etag is not None:
        headers.append((b"ETag", response.etag))
    return headers


@functools.lru_cache(maxsize=_MATCH_CACHE_SIZE)
def conditional(if_none_match: str, tag: str, etag: bytes) -> ImdsResponse | None:
    """The 304 for ``etag`` (no body, no Content-Type) when If-None-Match matches the current
    tag by RFC 9110 13.1.2's weak comparison; None when it does not.

    Clients echo the tag as they got it; Microsoft's sample (Azure/vm-scheduled-events)
    stores it and sends it back, starting from a bare ``0`` before its first answer. Cached,
    answer and all: a poller repeats one header against one tag until its document changes,
    and comparing anew (a split and three strips) or finding the answer apart would make a
    304 cost more than the 200 it saves.
    """
    for candidate in if_none_match.split(","):
        value = candidate.strip()
        if value == "*" or value.removeprefix("W/").strip('"') == tag:
            return ImdsResponse(304, b"", None, etag=etag)
    return None


def split_target(target: str) -> tuple[str, str]:
    """``/path?query`` into a percent-decoded path and the raw query."""
    path, _, query = target.partition("?")
    return unquote(path), query


__all__ = [
    "INSTANCE_PATH",
    "JSON",
    "NO_ANSWER",
    "RESET",
    "SCHEDULED_EVENTS_PATH",
    "SERVER",
    "TEXT",
    "UNANSWERED",
    "VERSIONS_PATH",
    "Answer",
    "Checked",
    "ImdsEndpoint",
    "ImdsRequest",
    "ImdsResponse",
    "Limits",
    "RequestIds",
    "conditional",
    "response_headers",
    "split_target",
]

"""The VM-facing endpoint as a plain function from request to response.

Transport-free on purpose: the socket server (:mod:`forewarn.server.http`), the ASGI adapter
used for in-process tests and the benchmarks all call :meth:`ImdsEndpoint.handle`, so every one
of them answers byte for byte the same. Checks run in a fixed order (SPEC 1): route, method,
caller, rate limit, X-Forwarded-For, query, Metadata header, api-version.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote

from forewarn.domain.api_versions import find_version
from forewarn.domain.errors import UnknownEventError
from forewarn.domain.ratelimit import RateLimiter
from forewarn.domain.vms import Vm
from forewarn.service import ScheduledEventsService
from forewarn.wire import errors as messages
from forewarn.wire import instance as instance_wire
from forewarn.wire.approvals import MalformedApprovalError, parse_start_requests

JSON = b"application/json; charset=utf-8"
TEXT = b"text/plain; charset=utf-8"

SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
INSTANCE_PATH = "/metadata/instance"
VERSIONS_PATH = "/metadata/versions"


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
    """What the transport saw: header names lower-cased, values as sent."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    local_address: str
    peer_address: str


@dataclass(frozen=True, slots=True)
class ImdsResponse:
    status: int
    body: bytes = b""
    content_type: bytes | None = JSON


class _BadQueryError(Exception):
    pass


def _error(status: int, message: str) -> ImdsResponse:
    return ImdsResponse(status, messages.error_body(message))


_INVALID_API_VERSION = ImdsResponse(400, messages.invalid_api_version_body())
_MISSING_HEADER = _error(400, messages.MISSING_METADATA_HEADER)
_FORWARDED = _error(400, messages.FORWARDED_REQUEST)
_TOO_MANY = _error(429, messages.TOO_MANY_REQUESTS)
_APPROVED = ImdsResponse(200, b"", None)

#: Status 0: close the connection without a response, as a VM that is rebooting, frozen or
#: deleted cannot be talking to its endpoint at all.
NO_ANSWER = ImdsResponse(0, b"", None)

_ALLOWED_METHODS = {
    SCHEDULED_EVENTS_PATH: ("GET", "POST"),
    VERSIONS_PATH: ("GET",),
}
_QUERY_CACHE_SIZE = 512
_OK_CACHE_SIZE = 1024


class ImdsEndpoint:
    """Answers ``/metadata/scheduledevents``, ``/metadata/instance`` and ``/metadata/versions``."""

    def __init__(
        self,
        service: ScheduledEventsService,
        *,
        rate_limit: float = 5.0,
        limits: Limits | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.limits = limits or Limits()
        self.rate_limiter = RateLimiter(rate_limit)
        self._monotonic = monotonic
        self._queries: dict[str, dict[str, str] | str] = {}
        self._ok_responses: dict[bytes, ImdsResponse] = {}

    def handle(self, request: ImdsRequest) -> ImdsResponse:
        path = request.path
        method = request.method
        allowed = _ALLOWED_METHODS.get(path)
        if allowed is None:
            if path == INSTANCE_PATH or path.startswith(INSTANCE_PATH + "/"):
                allowed = ("GET",)
            else:
                return _error(404, messages.not_found_message(path, method))
        if method not in allowed:
            return _error(405, messages.method_not_allowed_message(path, method))

        vm = self.service.resolve_vm(request.local_address, request.peer_address)
        if vm is None:
            return _error(
                400, f"Bad request. No virtual machine answers at {request.local_address}"
            )
        if not self.service.vm_request(vm.name):
            return NO_ANSWER
        if not self.rate_limiter.allow(vm.name, self._monotonic()):
            return _TOO_MANY
        headers = request.headers
        if "x-forwarded-for" in headers:
            return _FORWARDED
        query = self._parse_query(request.query)
        if isinstance(query, str):
            return _error(400, query)
        has_header = headers.get("metadata", "").lower() == "true"

        if path == SCHEDULED_EVENTS_PATH:
            version = find_version(query.get("api-version", ""))
            if not has_header and not (
                method == "POST" and version is not None and not version.metadata_header_on_post
            ):
                return _MISSING_HEADER
            if version is None:
                return _INVALID_API_VERSION
            if method == "GET":
                return self._ok(self.service.document_bytes(vm.name, version))
            return self._approve(vm, request.body)

        if not has_header:
            return _MISSING_HEADER
        if path == VERSIONS_PATH:
            return ImdsResponse(200, instance_wire.versions_body())
        return self._instance(vm, path, query)

    # -- pieces ----------------------------------------------------------------------------

    def _ok(self, body: bytes) -> ImdsResponse:
        """A 200 carrying ``body``, reused while the body is the same.

        A VM's document bytes stay the same object until its events change, and VMs with the
        same document share one answer; finding it costs less than building a frozen response
        on every poll (measured with ``python -m bench``).
        """
        response = self._ok_responses.get(body)
        if response is None:
            if len(self._ok_responses) >= _OK_CACHE_SIZE:
                self._ok_responses.clear()
            response = self._ok_responses[body] = ImdsResponse(200, body)
        return response

    def _approve(self, vm: Vm, body: bytes) -> ImdsResponse:
        """Every api-version approves the same way."""
        if len(body) > self.limits.max_body:
            return _error(400, f"Request body is larger than MaxBodyLength: {self.limits.max_body}")
        try:
            event_ids = parse_start_requests(body)
        except MalformedApprovalError as exc:
            return _error(400, f"Bad request. {exc}")
        try:
            self.service.approve(vm.name, event_ids)
        except UnknownEventError as exc:
            return _error(400, f"Bad request. {exc}")
        return _APPROVED

    def _instance(self, vm: Vm, path: str, query: dict[str, str]) -> ImdsResponse:
        api_version = query.get("api-version", "")
        if api_version not in instance_wire.INSTANCE_API_VERSIONS:
            return ImdsResponse(
                400, messages.invalid_api_version_body_for(instance_wire.INSTANCE_NEWEST_VERSIONS)
            )
        parts = tuple(part for part in path[len(INSTANCE_PATH) :].split("/") if part)
        try:
            value = instance_wire.select(instance_wire.instance_fields(vm), parts)
        except KeyError:
            return _error(404, messages.not_found_message(path, "GET"))
        fmt = query.get("format", "json")
        if fmt == "json":
            return ImdsResponse(200, instance_wire.encode_json(value))
        if fmt == "text" and parts:
            return ImdsResponse(200, instance_wire.encode_text(value), TEXT)
        return _error(400, f'Bad request. Query parameter format="{fmt}" is not allowed here')

    def _parse_query(self, raw: str) -> dict[str, str] | str:
        """Parameters by name, or an error message; cached, since clients repeat one query."""
        cached = self._queries.get(raw)
        if cached is not None:
            return cached
        try:
            result: dict[str, str] | str = self._parse_query_uncached(raw)
        except _BadQueryError as exc:
            result = str(exc)
        if len(self._queries) >= _QUERY_CACHE_SIZE:
            self._queries.clear()
        self._queries[raw] = result
        return result

    def _parse_query_uncached(self, raw: str) -> dict[str, str]:
        limits = self.limits
        params: dict[str, str] = {}
        try:
            pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=False, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise _BadQueryError("Bad request. The query string is not valid") from None
        for key, value in pairs:
            if len(key) > limits.max_parameter_key:
                raise _BadQueryError(
                    f"Parameter key length is larger than MaxParameterKeyLength: "
                    f"{limits.max_parameter_key}"
                )
            if len(value) > limits.max_parameter_value:
                raise _BadQueryError(
                    f"Parameter value length is larger than MaxParameterValueLength: "
                    f"{limits.max_parameter_value}"
                )
            if key in params:
                raise _BadQueryError(messages.DUPLICATE_PARAMETER)
            params[key] = value
        return params


def split_target(target: str) -> tuple[str, str]:
    """``/path?query`` into a percent-decoded path and the raw query."""
    path, _, query = target.partition("?")
    return unquote(path), query

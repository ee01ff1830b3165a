"""The blocking client, on ``httpx.Client``."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import Self, TypeVar

import httpx

from forewarn.client._discovery import Endpoint
from forewarn.client._errors import ImdsError
from forewarn.client._models import ComputeMetadata, ScheduledEvent, ScheduledEventsDocument
from forewarn.client._protocol import (
    DEFAULT_API_VERSION,
    DEFAULT_INSTANCE_API_VERSION,
    DEFAULT_RETRY,
    DEFAULT_TIMEOUT,
    FIRST_CALL_TIMEOUT,
    Call,
    ClientCore,
    read_bounded,
)
from forewarn.client._retry import RetryPolicy
from forewarn.client._watch import (
    DEFAULT_POLL_INTERVAL,
    DocumentChange,
    IncarnationTracker,
    PollSchedule,
)

_T = TypeVar("_T")


class Client:
    """Reads and approves this VM's scheduled events.

    ``endpoint`` skips discovery (see :func:`~forewarn.client.discover_endpoint` for the
    order otherwise). ``transport`` replaces the network, so tests can talk to an app in
    the same process; ``sleep``, ``monotonic`` and ``rng`` are what retries and
    :meth:`watch` wait with, so tests need not wait at all. ``environ`` and ``lease_paths``
    replace the process environment and the lease files discovery reads. Proxy variables
    are ignored: the Metadata Service is reached directly, never through a proxy.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        api_version: str = DEFAULT_API_VERSION,
        instance_api_version: str = DEFAULT_INSTANCE_API_VERSION,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        first_call_timeout: float | None = FIRST_CALL_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        environ: Mapping[str, str] | None = None,
        lease_paths: Sequence[str] | None = None,
    ) -> None:
        self._core = ClientCore(
            endpoint,
            api_version=api_version,
            instance_api_version=instance_api_version,
            timeout=timeout,
            first_call_timeout=first_call_timeout,
            retry=retry,
            rng=rng,
            environ=environ,
            lease_paths=lease_paths,
        )
        self._sleep = sleep
        self._monotonic = monotonic
        self._http = httpx.Client(transport=transport, trust_env=False, follow_redirects=False)

    @property
    def endpoint(self) -> Endpoint:
        """The endpoint requests go to now."""
        return self._core.endpoint

    @property
    def api_version(self) -> str:
        return self._core.api_version

    # -- the API ---------------------------------------------------------------------------

    def get(self) -> ScheduledEventsDocument:
        """The current document (``GET /metadata/scheduledevents``)."""
        return self._send(self._core.document_call(), self._core.document)

    def approve(self, *events: str | ScheduledEvent) -> None:
        """Let events start now (``POST`` with their EventIds; ids or events, any number).

        Nothing is sent for no events, so ``client.approve(*maybe_none)`` needs no guard. An
        approval is safe to repeat (the service answers 200 "even if another VM already
        approved the event"), so it is retried like a read.
        """
        call = self._core.approval_call(events)
        if call is not None:
            self._send(call, lambda body: None)

    def instance(self) -> ComputeMetadata:
        """Who this VM is (``GET /metadata/instance/compute``)."""
        return self._send(self._core.compute_call(), self._core.compute)

    def watch(
        self,
        *,
        interval: float = DEFAULT_POLL_INTERVAL,
        on_error: Callable[[ImdsError], None] | None = None,
    ) -> Generator[DocumentChange, None, None]:
        """Poll every ``interval`` seconds and yield a change whenever DocumentIncarnation
        moves, the first document included.

        An error that survives the retries ends the watch, unless ``on_error`` is given: it is
        called with the error, and the watch goes on with the next poll unless it raises.
        """
        tracker = IncarnationTracker()
        schedule = PollSchedule(interval, self._monotonic())
        while True:
            wait = schedule.wait(self._monotonic())
            if wait > 0:
                self._sleep(wait)
            try:
                document = self.get()
            except ImdsError as error:
                if on_error is None:
                    raise
                on_error(error)
                continue
            change = tracker.observe(document)
            if change is not None:
                yield change

    # -- sending ---------------------------------------------------------------------------

    def _send(self, call: Call, read: Callable[[bytes], _T]) -> _T:
        started = self._monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return read(self._send_once(call))
            except ImdsError as error:
                elapsed = self._monotonic() - started
                delay = self._core.retry_delay(error, attempt=attempt, elapsed=elapsed)
                if delay is None:
                    raise
            self._sleep(delay)

    def _send_once(self, call: Call) -> bytes:
        core = self._core
        while True:
            try:
                with self._http.stream(
                    call.method,
                    core.url(call),
                    params=dict(call.params),
                    headers=dict(call.headers),
                    content=call.content,
                    timeout=call.timeout,
                ) as response:
                    content = read_bounded(response.headers, response.iter_bytes())
            except httpx.TransportError as exc:
                error = core.on_transport_error(call, exc)
                if error is None:
                    continue
                raise error from exc
            body = core.on_answer(call, response.status_code, content, response.headers)
            if body is not None:
                return body

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

"""The asyncio client, on ``httpx.AsyncClient``: the same rules as :class:`Client`."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
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
    MAX_BODY_BYTES,
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


class AsyncClient:
    """Reads and approves this VM's scheduled events without blocking the event loop.

    Takes the same arguments as :class:`~forewarn.client.Client`, with an
    ``httpx.AsyncBaseTransport`` (``httpx.ASGITransport`` for an app in the same process)
    and an awaitable ``sleep``.
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
        transport: httpx.AsyncBaseTransport | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
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
        self._http = httpx.AsyncClient(transport=transport, trust_env=False, follow_redirects=False)

    @property
    def endpoint(self) -> Endpoint:
        """The endpoint requests go to now."""
        return self._core.endpoint

    @property
    def api_version(self) -> str:
        return self._core.api_version

    # -- the API ---------------------------------------------------------------------------

    async def get(self) -> ScheduledEventsDocument:
        """The current document (``GET /metadata/scheduledevents``)."""
        return await self._send(self._core.document_call(), self._core.document)

    async def approve(self, *events: str | ScheduledEvent) -> None:
        """Let events start now; see :meth:`forewarn.client.Client.approve`."""
        call = self._core.approval_call(events)
        if call is not None:
            await self._send(call, lambda body: None)

    async def instance(self) -> ComputeMetadata:
        """Who this VM is (``GET /metadata/instance/compute``)."""
        return await self._send(self._core.compute_call(), self._core.compute)

    async def watch(
        self,
        *,
        interval: float = DEFAULT_POLL_INTERVAL,
        on_error: Callable[[ImdsError], Awaitable[None] | None] | None = None,
    ) -> AsyncGenerator[DocumentChange, None]:
        """Poll and yield changes; see :meth:`forewarn.client.Client.watch`. ``on_error`` may
        be a plain function or a coroutine function."""
        tracker = IncarnationTracker()
        schedule = PollSchedule(interval, self._monotonic())
        while True:
            wait = schedule.wait(self._monotonic())
            if wait > 0:
                await self._sleep(wait)
            try:
                document = await self.get()
            except ImdsError as error:
                if on_error is None:
                    raise
                handled = on_error(error)
                if handled is not None:
                    await handled
                continue
            change = tracker.observe(document)
            if change is not None:
                yield change

    # -- sending ---------------------------------------------------------------------------

    async def _send(self, call: Call, read: Callable[[bytes], _T]) -> _T:
        started = self._monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return read(await self._send_once(call))
            except ImdsError as error:
                elapsed = self._monotonic() - started
                delay = self._core.retry_delay(error, attempt=attempt, elapsed=elapsed)
                if delay is None:
                    raise
            await self._sleep(delay)

    async def _send_once(self, call: Call) -> bytes:
        core = self._core
        while True:
            try:
                async with self._http.stream(
                    call.method,
                    core.url(call),
                    params=dict(call.params),
                    headers=dict(call.headers),
                    content=call.content,
                    timeout=call.timeout,
                ) as response:
                    received = bytearray()
                    async for chunk in response.aiter_bytes():
                        received += chunk
                        if len(received) > MAX_BODY_BYTES:
                            break  # read_bounded refuses it; no need to read the rest
                    content = read_bounded(response.headers, [bytes(received)])
            except httpx.TransportError as exc:
                error = core.on_transport_error(call, exc)
                if error is None:
                    continue
                raise error from exc
            body = core.on_answer(call, response.status_code, content, response.headers)
            if body is not None:
                return body

    # -- lifetime --------------------------------------------------------------------------

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

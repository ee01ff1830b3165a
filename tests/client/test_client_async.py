"""The asyncio client against the real endpoint wrapped as ASGI (``httpx.ASGITransport``):
the endpoint of a :class:`forewarn.testing.ForewarnPlatform`, behind forewarn's ASGI app."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from forewarn.client import (
    AsyncClient,
    BadRequestError,
    DocumentChange,
    EventStatus,
    EventType,
    ImdsError,
    InvalidApiVersionError,
)
from forewarn.commands import ScheduleEvent
from forewarn.domain.vms import Vm
from forewarn.server.asgi import ImdsAsgiApp
from forewarn.testing import ForewarnPlatform

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


class RecordingTransport(httpx.ASGITransport):
    def __init__(self, requests: list[httpx.Request], **options: Any) -> None:
        super().__init__(**options)
        self.requests = requests

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await super().handle_async_request(request)


class AsyncWorld:
    """``vm0`` on a manual clock; the client's sleep moves platform time, never real time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.platform = ForewarnPlatform(
            vms=[Vm(name="vm0", vm_id="id-vm0")], seed=2, monotonic=lambda: self.now
        )
        self.service = self.platform.service
        self.app = ImdsAsgiApp(self.platform.endpoint)
        self.requests: list[httpx.Request] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        self.service.advance_clock(timedelta(seconds=seconds))

    def client(self, **options: Any) -> AsyncClient:
        return AsyncClient(
            "http://169.254.169.254",
            transport=RecordingTransport(self.requests, app=self.app, client=("10.0.0.4", 5000)),
            sleep=self.sleep,
            monotonic=lambda: self.now,
            **options,
        )

    def schedule(self, event_type: str, source: str = "Platform") -> str:
        (event,) = self.service.execute(ScheduleEvent(event_type, ("vm0",), source=source))
        return event.event_id


def run(scenario: Callable[[AsyncWorld], Coroutine[Any, Any, None]]) -> AsyncWorld:
    world = AsyncWorld()
    asyncio.run(scenario(world))
    return world


def test_get_approve_and_instance() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Query for events" and
    "Start an event": read the document, approve by EventId, see the event Started with
    ``NotBefore`` ``""``."""

    async def scenario(world: AsyncWorld) -> None:
        async with world.client() as client:
            assert (await client.get()).incarnation == 1
            assert (await client.instance()).name == "vm0"
            event_id = world.schedule("Redeploy", source="User")
            (event,) = (await client.get()).events
            assert (event.event_id, event.event_type) == (event_id, EventType.REDEPLOY)
            assert event.not_before == START + timedelta(minutes=10)  # Redeploy's notice
            await client.approve(event_id)
            world.service.advance_clock(timedelta(seconds=8))
            (started,) = (await client.get()).events
            assert started.status is EventStatus.STARTED
            assert started.not_before is None

    world = run(scenario)
    assert all(r.headers["Metadata"] == "true" for r in world.requests)
    post = next(r for r in world.requests if r.method == "POST")
    assert json.loads(post.content)["StartRequests"][0]["EventId"]
    assert post.url.params["api-version"] == "2020-07-01"


def test_errors_come_from_the_same_tree() -> None:
    """SPEC 1: ``latest`` is refused with the newest versions listed; SPEC 3
    [ours]: an unknown EventId is 400."""

    async def scenario(world: AsyncWorld) -> None:
        async with world.client(api_version="latest") as client:
            with pytest.raises(InvalidApiVersionError) as caught:
                await client.get()
            assert caught.value.newest_versions[0] == "2020-07-01"
        async with world.client() as client:
            with pytest.raises(BadRequestError):
                await client.approve("F020BA2E-3BC0-4C40-A10B-86575A9EABD5")

    run(scenario)


def test_watch_reports_added_started_and_removed() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview"
    pseudo code: prepare for new events, recover from those gone; "Example responses": Scheduled,
    then Started, then gone. Nobody approves, so the Reboot starts at its NotBefore; while the VM
    reboots its endpoint answers nothing, and ``on_error`` (a coroutine function here) keeps the
    watch going."""

    async def scenario(world: AsyncWorld) -> None:
        changes: list[DocumentChange] = []
        errors: list[ImdsError] = []

        async def keep_going(error: ImdsError) -> None:
            errors.append(error)

        async with (
            world.client() as client,
            aclosing(client.watch(on_error=keep_going)) as watch,
        ):
            async for change in watch:
                changes.append(change)
                if change.previous is None:
                    world.schedule("Reboot")
                elif change.added:
                    assert change.added[0].event_type is EventType.REBOOT
                if change.removed:
                    break
        first, scheduled, started, removed = changes
        assert first.added == ()
        assert first.incarnation == 1
        assert [e.status for e in scheduled.added] == [EventStatus.SCHEDULED]
        assert [e.event_id for e in started.started] == [scheduled.added[0].event_id]
        assert [e.event_id for e in removed.removed] == [scheduled.added[0].event_id]
        # The 7 s of reboot with no answer, reported to on_error once the retries were spent.
        assert errors
        assert all(e.transient for e in errors)

    world = run(scenario)
    assert world.now >= (15 + 10) * 60


def test_a_plain_on_error_may_end_the_watch_by_raising() -> None:
    """The caller decides what is fatal: ``on_error`` may be a plain function, and raising
    from it ends the watch."""

    class EnoughError(Exception):
        pass

    async def scenario(world: AsyncWorld) -> None:
        seen: list[ImdsError] = []

        def on_error(error: ImdsError) -> None:
            seen.append(error)
            if len(seen) == 2:
                raise EnoughError

        async def watch_until_told() -> None:
            async with (
                world.client(api_version="1999-01-01") as client,
                aclosing(client.watch(on_error=on_error)) as watch,
            ):
                async for _ in watch:
                    pass

        with pytest.raises(EnoughError):
            await watch_until_told()
        assert [type(e) for e in seen] == [InvalidApiVersionError] * 2

    world = run(scenario)
    assert world.sleeps == [1.0]

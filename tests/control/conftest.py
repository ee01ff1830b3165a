"""The control app in-process, on a manual clock and the documented timing profile."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from forewarn.config.fleet import parse_fleet
from forewarn.domain.clock import ManualClock
from forewarn.domain.timing import DOCUMENTED
from forewarn.scenario.client import in_process_client
from forewarn.scenario.inprocess import service_for_fleet
from forewarn.server.control import create_control_app
from forewarn.service import ScheduledEventsService

from .control_support import FLEET, START


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def service(clock: ManualClock) -> ScheduledEventsService:
    return service_for_fleet(parse_fleet(FLEET, "control-fleet"), clock, timing=DOCUMENTED, seed=1)


@pytest.fixture
def http(service: ScheduledEventsService) -> Iterator[httpx.Client]:
    with in_process_client(create_control_app(service)) as client:
        yield client

"""The control app in-process, on a manual clock and the documented timing profile: a
:class:`forewarn.testing.ForewarnPlatform` on the fleet of ``control_support``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from forewarn.domain.clock import ManualClock
from forewarn.service import ScheduledEventsService
from forewarn.testing import ForewarnPlatform, MakePlatform

from .control_support import FLEET, START


@pytest.fixture
def platform(make_forewarn_platform: MakePlatform) -> ForewarnPlatform:
    return make_forewarn_platform(fleet=FLEET, start=START, seed=1)


@pytest.fixture
def clock(platform: ForewarnPlatform) -> ManualClock:
    return platform.clock


@pytest.fixture
def service(platform: ForewarnPlatform) -> ScheduledEventsService:
    return platform.service


@pytest.fixture
def http(platform: ForewarnPlatform) -> Iterator[httpx.Client]:
    with platform.control_client() as client:
        yield client

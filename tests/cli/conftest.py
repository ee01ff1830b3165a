from __future__ import annotations

import pytest

from forewarn.config.fleet import load_fleet
from forewarn.domain.clock import ManualClock
from forewarn.domain.timing import DOCUMENTED
from forewarn.scenario.inprocess import service_for_fleet

from .cli_support import EXAMPLES, START, Cli


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def cli(clock: ManualClock) -> Cli:
    fleet = load_fleet(EXAMPLES / "fleet-every-operation.yaml")
    return Cli(service_for_fleet(fleet, clock, timing=DOCUMENTED, seed=3))

"""The CLI's fixtures: ``forewarn ...`` against a :class:`forewarn.testing.ForewarnPlatform` on
examples/scenarios/fleet-every-operation.yaml, the documented profile and a manual clock."""

from __future__ import annotations

import pytest

from forewarn.domain.clock import ManualClock
from forewarn.testing import MakePlatform

from .cli_support import EXAMPLES, START, Cli


@pytest.fixture
def cli(make_forewarn_platform: MakePlatform) -> Cli:
    fleet = EXAMPLES / "fleet-every-operation.yaml"
    return Cli(make_forewarn_platform(fleet=fleet, start=START, seed=3, rate_limit=1000))


@pytest.fixture
def clock(cli: Cli) -> ManualClock:
    return cli.platform.clock

"""Fixtures of the agent's tests: a :class:`World` per test, closed afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .agent_support import World


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    built = World(tmp_path)
    try:
        yield built
    finally:
        built.close()

"""Fixtures of the end-to-end tier: ``forewarn serve`` started as a real process per test.

The helpers live in ``e2e_support`` beside this file; pytest's importlib mode does not put test
folders on ``sys.path``, so this folder is added once here for the test modules to import it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_support import (
    ForewarnServer,
    StartServer,
    start_forewarn,
    stopped_at_exit,
)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start servers with ``start_forewarn``'s options; all are stopped (SIGTERM, then
    SIGKILL) at teardown, their output printed so a failing test shows it."""
    with ExitStack() as stack:
        count = 0

        def start(**options: Any) -> ForewarnServer:
            nonlocal count
            count += 1
            workdir = tmp_path / f"server{count}"
            workdir.mkdir()
            return stack.enter_context(stopped_at_exit(start_forewarn(workdir, **options)))

        yield start


@pytest.fixture
def server(start_server: StartServer) -> ForewarnServer:
    """The zero-configuration server (one VM, ``vm0``) with a rate limit high enough for a
    test that asks quickly; the default limit has its own test."""
    return start_server(rate_limit=1000)

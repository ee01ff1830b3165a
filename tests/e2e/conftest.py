"""Fixtures of the end-to-end tier: ``forewarn serve`` started as a real process per test.

The helpers live in ``e2e_support`` beside this file, on ``sys.path`` through the pytest
configuration's ``pythonpath`` (importlib mode puts no test folder there itself), so the other
folders' process tests use the same ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    OUTSIDER_HOST,
    PAIR_HOSTS,
    ForewarnServer,
    StartServer,
    pair_fleet,
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


@pytest.fixture(scope="session")
def pair_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForewarnServer]:
    """One server for WestNO_0 and WestNO_1 (and a standalone Outsider), shared: starting a
    process costs more than most tests, and each test starts from empty documents."""
    workdir = tmp_path_factory.mktemp("pair")
    fleet = pair_fleet(*PAIR_HOSTS, OUTSIDER_HOST)
    hosts = (*PAIR_HOSTS, OUTSIDER_HOST)
    started = start_forewarn(workdir, fleet=fleet, vm_hosts=hosts, rate_limit=1000)
    with stopped_at_exit(started) as server:
        yield server


@pytest.fixture
def pair(pair_server: ForewarnServer) -> Iterator[ForewarnServer]:
    """The shared server, healthy and with empty documents; requests go to WestNO_0 unless a
    test says otherwise. What the server printed during the test is shown if it fails."""
    pair_server.process.assert_healthy()
    pair_server.clear()
    start = len(pair_server.process.output())
    yield pair_server
    print(f"--- forewarn serve output during the test ---\n{pair_server.process.output()[start:]}")
    pair_server.process.assert_healthy()

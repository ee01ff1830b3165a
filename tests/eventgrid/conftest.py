"""Fixtures of the Event Grid tests."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture
def server_zone_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The server's own zone three hours east of UTC (a POSIX TZ, no zone database needed),
    for the rules that hold whatever zone the server runs in; the zone is put back after."""
    monkeypatch.setenv("TZ", "FWT-03")
    time.tzset()
    assert time.strftime("%z", time.localtime(0)) == "+0300"  # the zone is in force
    yield
    monkeypatch.undo()
    time.tzset()

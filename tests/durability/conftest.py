"""A disk that fills: a 2 MB tmpfs mounted for one test and unmounted after it
(``fault_tier.small_disk_at``, which says why a machine without root cannot have one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_tier import SmallDisk, small_disk_at


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disk_at(tmp_path / "disk") as disk:
        yield disk

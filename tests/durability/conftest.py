"""A disk that fills: a 2 MB tmpfs mounted for one test and unmounted after it.

Mounting needs root (CI runs as root, as the network-namespace tests do). Elsewhere a test
that needs it skips and says why, except under ``CI``, where its absence must fail the run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_tier import SmallDisk
from machine_support import unavailable


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        reason = (
            "cannot mount a 2 MB tmpfs for a full disk (needs root): "
            f"{' '.join(mounted.stderr.split()) or mounted.returncode}"
        )
        unavailable(reason)
    try:
        yield SmallDisk(root)
    finally:
        if subprocess.run(["umount", str(root)], check=False).returncode != 0:
            subprocess.run(["umount", "--lazy", str(root)], check=False)

"""``python -m bench --smoke`` as the benchmark tier's entry-command tests run it (here, on
the suite's import path, because ``tests/bench`` cannot hold a module of its own: pytest may
register that folder under the name of the real ``bench`` package)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_smoke(only: str, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """The scenario ``only`` in smoke mode with ``options``, its JSON written to ``out``,
    never an apt-get; the caller reads its exit status and output."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "bench", "--smoke", "--no-install"),
            *("--only", only, *options, "--json", str(out)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

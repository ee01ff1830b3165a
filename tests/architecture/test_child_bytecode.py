"""The processes the suite starts cache forewarn's compiled modules, as an installed package
has them, whatever the environment the suite was started in says (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_process_the_suite_starts_writes_bytecode() -> None:
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    shown = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.dont_write_bytecode)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert shown.stdout.strip() == "False"

"""docs/faults.md's snippets run as written: the Python block as a script, the scenario as a
scenario on the examples fleet."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from forewarn.scenario import parse_scenario
from forewarn.testing import ForewarnPlatform

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "faults.md").read_text(encoding="utf-8")
EXAMPLES = ROOT / "examples" / "scenarios"


def block(language: str) -> str:
    found: list[str] = re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.S)
    assert len(found) == 1, language
    return found[0]


def test_the_python_snippet_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-c", block("python")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_the_scenario_snippet_runs() -> None:
    scenario = parse_scenario(block("yaml"), "faults.md", EXAMPLES)
    platform = ForewarnPlatform(fleet=EXAMPLES / "fleet-live-migration.yaml", profile="fast")
    result = platform.run_scenario(scenario)
    assert result.passed, result.failure
    assert platform.service.faults(time.monotonic()) == ()

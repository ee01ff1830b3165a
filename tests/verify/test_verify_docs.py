"""docs/verify.md says what the code does: its trial table is the trial definitions, its CI
examples are valid and run.

Issue text, "Done means": "docs/verify.md: every trial, its source and what pass requires";
"a documented CI example (a GitHub Actions job and a plain shell one) running
``forewarn verify --suite quick --junit report.xml -- python my_handler.py``". The shell job
runs in tests/verify/test_example_handlers.py, as good_stdlib.py's graded run.

The trial table is generated from :data:`forewarn.verify.trials.TRIALS` (name, suites, title,
what a pass requires, source): a trial added, renamed or reworded fails this test until the
page is written again, with ``FOREWARN_REGENERATE_DOCS=1`` (it rewrites the table in place).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from forewarn.verify.model import TrialInfo
from forewarn.verify.trials import TRIALS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "verify.md"
REGENERATE_VARIABLE = "FOREWARN_REGENERATE_DOCS"
TABLE_START = (
    "<!-- trials: generated from forewarn.verify.trials by tests/verify/test_verify_docs.py -->"
)
TABLE_END = "<!-- trials: end -->"
CHECK_WORKFLOWS = (
    sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
)  # fmt: skip
CI_COMMAND = "forewarn verify --suite quick --junit report.xml -- python my_handler.py"
_PUBLIC = re.compile(r"((?:learn|docs)\.microsoft\.com/[^\s,;]+)")


def _source(source: str) -> str:
    """A trial's source as Markdown: the public page a link, the section and SPEC as text."""
    return _PUBLIC.sub(lambda found: f"[{found.group(1)}](https://{found.group(1)})", source)


def trial_table(trials: list[TrialInfo]) -> str:
    """The table docs/verify.md shows, one row per trial in the catalogue's order."""
    rows = [
        "| trial | suites | what it checks | a pass requires | source |",
        "|---|---|---|---|---|",
    ]
    for info in trials:
        cells = (
            f"`{info.name}`",
            ", ".join(info.suites),
            info.title,
            info.requires,
            _source(info.source),
        )
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


def _blocks(language: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def _shown_table() -> tuple[str, int, int]:
    text = DOC.read_text(encoding="utf-8")
    return text, text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)


def test_the_trial_table_is_the_trial_definitions() -> None:
    wanted = "\n" + trial_table([trial.info for trial in TRIALS]) + "\n"
    text, start, end = _shown_table()
    if text[start:end] != wanted and os.environ.get(REGENERATE_VARIABLE) == "1":
        DOC.write_text(text[:start] + wanted + text[end:], encoding="utf-8")
        text, start, end = _shown_table()
    assert text[start:end] == wanted, f"rewrite it: {REGENERATE_VARIABLE}=1 pytest {__file__}"


def test_the_github_actions_job_is_a_valid_workflow(tmp_path: Path) -> None:
    (workflow,) = [block for block in _blocks("yaml") if "runs-on:" in block]
    assert CI_COMMAND in workflow
    path = tmp_path / "verify-handler.yml"
    path.write_text(workflow, encoding="utf-8")
    checked = subprocess.run(
        [*CHECK_WORKFLOWS, str(path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_container_page_says_the_image_runs_verify() -> None:
    """Issue text, "In tests and CI": "the container image runs it too". docs/container.md is
    where a user of the image looks; it points to docs/verify.md's container block, which
    .ci/container runs against the image it built (``verify_in_image``)."""
    container = (ROOT / "docs" / "container.md").read_text(encoding="utf-8")
    assert "(verify.md#in-the-container-image)" in container
    assert "forewarn verify" in container
    assert re.search(r"^## In the container image$", DOC.read_text(encoding="utf-8"), re.M)

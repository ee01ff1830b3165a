"""What the README shows a newcomer is true of the repository and usable from a clone.

Seen by a newcomer: the README's inline copy of ``examples/fleet.yaml`` differed from the
file; the Faithfulness section pointed at files beside the checkout, which a clone does not have; the
quick start installed into ``.venv`` while later sections called a bare ``forewarn``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {"README.md": README} | {
    f"docs/{page.name}": page.read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md"))
}
SHELL = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def test_the_inline_copy_of_the_example_fleet_is_the_file() -> None:
    marker = "`examples/fleet.yaml`:\n\n```yaml\n"
    start = README.index(marker) + len(marker)
    copy = README[start : README.index("```", start)]
    assert copy == (ROOT / "examples" / "fleet.yaml").read_text(encoding="utf-8")


def test_faithfulness_cites_public_pages_not_files_a_clone_lacks() -> None:
    section = _section("Faithfulness")
    assert "learn.microsoft.com/azure/virtual-machines/linux/scheduled-events" in section
    assert "learn.microsoft.com/azure/virtual-machines/instance-metadata-service" in section
    for page, text in PAGES.items():
        assert "../shared" not in text, page
        assert not re.search(r"`reference/[\w/.-]+`", text), page


def test_the_quick_start_activates_the_environment_the_rest_is_written_for() -> None:
    quick_start = _section("Quick start")
    assert ". .venv/bin/activate" in quick_start
    for page, text in PAGES.items():
        for block in SHELL.findall(text):
            for line in block.splitlines():
                if ".venv/bin/forewarn" in line:
                    # sudo keeps no activated PATH: there the path itself is needed.
                    assert line.lstrip().startswith("sudo "), (page, line)

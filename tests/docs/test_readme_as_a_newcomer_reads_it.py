"""What the README shows a newcomer is true of the repository and usable from a clone.

Seen by a newcomer: the README's inline copy of ``examples/fleet.yaml`` differed from the
file; the Faithfulness section pointed at files beside the checkout, which a clone does not
have; the quick start installed into ``.venv`` while later sections called a bare
``forewarn``; at 848 lines, two of the three ways in sat past line 340, behind reference
sections a newcomer did not need yet.
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
#: A Markdown link outside code: its text and target.
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
#: The README stays a front page: the reference lives in docs/.
README_MOST_LINES = 400


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def test_the_inline_copy_of_the_example_fleet_is_the_file() -> None:
    serve = PAGES["docs/serve.md"]
    marker = "`examples/fleet.yaml`:\n\n```yaml\n"
    start = serve.index(marker) + len(marker)
    copy = serve[start : serve.index("```", start)]
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


def test_the_readme_is_a_front_page_with_the_reference_in_docs() -> None:
    """The README is a front page of at most 400 lines; the reference it used to hold is one
    link away, each section keeping a summary line."""
    assert README.count("\n") <= README_MOST_LINES
    for title, page in [
        ("Faithfulness", "docs/faithfulness.md"),
        ("Security", "docs/security.md"),
        ("Design", "docs/design.md"),
        ("Benchmarks", "docs/benchmarks.md"),
        ("Development", "docs/contributing.md"),
    ]:
        assert f"]({page}" in _section(title), title
        assert page in PAGES, page


def test_which_way_in_names_every_way_in_near_the_top() -> None:
    """The "Which way in?" table comes right after the two set-up commands, and each of its rows
    leads to a section of the README and a page of docs/ that exist."""
    table = _section("Which way in?")
    assert README.index("\n## Which way in?\n") < README.index("\n## Try it\n")
    assert README.index("\n## Quick start\n") < README.index("\n## Which way in?\n")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    targets = {target for row in rows[1:] for _, target in LINK.findall(row)}
    for page in ["docs/testing.md", "docs/verify.md", "docs/container.md", "docs/platform.md"]:
        assert page in targets, page
    anchors = {_anchor(title) for title in re.findall(r"^## (.+)$", README, re.M)}
    for target in targets:
        if target.startswith("#"):
            assert target[1:] in anchors, target
    assert len(rows) - 1 >= 5


def test_the_contents_list_every_section_in_order() -> None:
    """The table of contents links every section of the README, in the order they come."""
    contents = _section("Contents")
    listed = [target for _, target in LINK.findall(contents)]
    titles = [title for title in re.findall(r"^## (.+)$", README, re.M) if title != "Contents"]
    assert listed == [f"#{_anchor(title)}" for title in titles]


def test_the_two_set_up_commands_are_one_line_each_and_ci_runs_the_second() -> None:
    """The two set-up commands stay together near the top, each one line on a fresh machine:
    one installs and runs ``forewarn serve`` (trying it needs no ``[dev]`` extra), one
    installs what the tests need and runs the suite, as ``.ci/run`` does. Seen by a
    newcomer: trying it installed the test tools, and ``pytest -n auto`` alone assumed them."""
    quick_start = _section("Quick start")
    assert README[: README.index("\n## Quick start\n")].count("\n") < 40  # near the top
    try_it, test_it = (block.strip() for block in SHELL.findall(quick_start))
    assert try_it.split(" && ") == [
        "python3 -m venv .venv",
        ". .venv/bin/activate",
        "pip install -e .",
        "forewarn serve",
    ]
    steps = test_it.split(" && ")
    assert steps == [
        "python3 -m venv .venv",
        ". .venv/bin/activate",
        "pip install -e '.[dev]'",
        "pytest -n auto",
    ]
    # .ci/run writes the environment's tools by path and installs quietly: the same steps.
    ci = [
        re.sub(r"\.venv/bin/(python -m )?|--quiet ", "", line.strip())
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    ]
    ran = [ci.index(step) for step in steps if step != ". .venv/bin/activate"]
    assert ran == sorted(ran)


def _anchor(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _outside_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def test_every_relative_link_of_the_pages_leads_somewhere() -> None:
    """Every link of the README and docs/ to a file of the repository names one that exists,
    and a link to a heading names a heading of that page (the reference moved to docs/, so
    the links moved with it)."""
    broken = []
    for name, text in PAGES.items():
        here = (ROOT / name).parent
        for _, target in LINK.findall(_outside_code(text)):
            if re.match(r"(https?:|mailto:)", target):
                continue
            path, _, anchor = target.partition("#")
            page = (here / path).resolve() if path else ROOT / name
            if not page.exists():
                broken.append(f"{name}: {target}")
                continue
            if anchor and page.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", _outside_code(page.read_text("utf-8")), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)

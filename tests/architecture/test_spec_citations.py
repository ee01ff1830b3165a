"""Everything the code cites is in the repository (docs/spec.md) or on a public page.

Comments, docstrings, test names and pages cite the rules as ``SPEC N`` or ``SPEC N.M``: each
must name a section of docs/spec.md, so a reader of a clone can follow it. Azure's pages are
cited by their public address (docs/spec.md, "Sources"); a path into the copies of those pages
kept beside a development checkout, or the name of one of those copies, means nothing to a
clone and fails here. String literals in Python code are data, not citations: the end-to-end
support that reads the saved pages, where they are at hand, names its files that way.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC_PAGE = ROOT / "docs" / "spec.md"
#: Where ``SPEC N`` citations may appear (README.md and these folders).
CITING = ("src", "tests", "docs", "examples", "bench")
#: Folders that are no part of the sources: environments, caches, mutation copies, builds.
_NOT_SOURCES = {".git", ".venv", "venv", "mutants", "node_modules", "build", "dist", "__pycache__"}
_BINARY_SUFFIXES = {".png", ".jpg", ".sqlite3", ".gz", ".whl", ".pyc"}

_HEADING = re.compile(r"^#{2,3} (\d+)(?:\.(\d+))?[. ]", re.M)
_CITATION = re.compile(r"\bSPEC (\d+)(?:\.(\d+))?(?:-(\d+))?")

# Built from parts so that this file does not match itself.
_SHARED = re.escape(".." + "/shared")
_FOLDER = r"(?<![\w-])" + "reference" + "/"
_COPIES = "|".join(
    (
        r"scheduled-events-[\w-]+\.txt",
        r"scheduled-events-preview-\d+\.md",
        "SPEC" + r"\.md",
        r"(?<![\w/.-])(?:instance-metadata-service|troubleshoot-load-balancer-imds"
        r"|vmss-terminate-notification|spot-vms)\.md",
    )
)
_OUTSIDE = re.compile(f"{_SHARED}|{_FOLDER}|{_COPIES}")


def spec_sections(text: str) -> set[str]:
    """The section numbers docs/spec.md has: ``"4"`` for ``## 4. ...``, ``"4.3"`` for
    ``### 4.3 ...``."""
    return {f"{major}.{minor}" if minor else major for major, minor in _HEADING.findall(text)}


def cited_sections(text: str) -> Iterator[str]:
    """Every section a text cites, ``SPEC 3-4`` giving both ends."""
    for major, minor, last in _CITATION.findall(text):
        yield f"{major}.{minor}" if minor else major
        if last:
            yield last


def _sources(*tops: str) -> Iterator[Path]:
    for top in tops:
        path = ROOT / top
        if path.is_file():
            yield path
            continue
        for found in sorted(path.rglob("*")):
            parts = set(found.relative_to(ROOT).parts)
            if (
                found.is_file()
                and not parts & _NOT_SOURCES
                and found.suffix not in _BINARY_SUFFIXES
            ):
                yield found


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def _data_strings(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The spans of a Python module's string literals that are not docstrings."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(body[0].value.lineno)
    spans = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING and token.start[0] not in docstrings:
            spans.append((token.start, token.end))
    return spans


def outside_citations(path: Path, text: str) -> list[str]:
    """``line: text`` of each citation of a page copy outside the repository."""
    spans = _data_strings(text) if path.suffix == ".py" else []
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        for match in _OUTSIDE.finditer(line):
            at = (number, match.start())
            if any(start <= at < end for start, end in spans):
                continue
            found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_the_spec_page_has_sections_1_to_9() -> None:
    sections = spec_sections(SPEC_PAGE.read_text(encoding="utf-8"))
    assert {str(n) for n in range(1, 10)} <= sections


def test_every_cited_spec_section_exists() -> None:
    sections = spec_sections(SPEC_PAGE.read_text(encoding="utf-8"))
    missing = [
        f"{path.relative_to(ROOT)}: SPEC {cited}"
        for path in _sources(*CITING, "README.md")
        for text in [_text(path)]
        if text is not None
        for cited in cited_sections(text)
        if cited not in sections
    ]
    assert not missing, "cited sections docs/spec.md does not have:\n" + "\n".join(missing)


def test_nothing_cites_the_page_copies_beside_a_checkout() -> None:
    found = [
        hit
        for path in _sources(*CITING, "README.md", "CHANGELOG.md", "deploy", ".ci", "Containerfile")
        for text in [_text(path)]
        if text is not None
        for hit in outside_citations(path, text)
    ]
    assert not found, "cite the public page (docs/spec.md, Sources) instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "sections"),
    [
        ("SPEC 4", ["4"]),
        ("(SPEC 3.2 [ours]).", ["3.2"]),
        ("SPEC 4-7", ["4", "7"]),
        ("in SPEC 2. Each", ["2"]),
        ("no SPECS 3, no SPEC-free text", []),
    ],
)
def test_citations_are_read_as_written(text: str, sections: list[str]) -> None:
    assert list(cited_sections(text)) == sections


def test_headings_are_read_as_sections() -> None:
    page = "# Title\n## Sources\n## 1. The endpoint\n### 1.2 Statuses\n#### 1.2.1 deeper\n"
    assert spec_sections(page) == {"1", "1.2"}


def test_a_citation_of_a_copy_is_found_and_a_file_name_in_code_is_not(tmp_path: Path) -> None:
    copy = "scheduled-events-" + "windows-2024.txt"
    module = ROOT / "tests" / "architecture" / "example.py"
    source = (
        f'"""Quoting {copy}, "Start an event"."""\n'
        f'PAGE = "{copy}"  # read where the copies are at hand\n'
        f"# see {'..' + '/shared'}/x and {'reference' + '/imds'}\n"
    )
    hits = outside_citations(module, source)
    assert [hit.split(":")[1] for hit in hits] == ["1", "3", "3"]

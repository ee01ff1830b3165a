"""Every shell block of README.md and docs/*.md runs as written (README "Development").

Each block runs in bash with ``set -e``, in a scratch directory that has a copy of the
repository's ``examples/`` and a ``.venv/bin`` holding this environment's ``forewarn`` (also
first on ``PATH``, as the quick start's activated environment has it), as a reader who
followed the quick start would have. A ``forewarn serve`` or ``forewarn agent`` line is what
the reader leaves running: it is started in the background (as its trailing ``&`` says, or as
"in another terminal" means) and the block goes on once the server's start-up lines are out;
whatever a block started is stopped when it ends. Blocks that need a server started before
them say so in a comment the page shows as nothing (``<!-- snippet: serve ARGS -->``);
blocks that cannot run here say why (``<!-- snippet: skip REASON -->``). The default ports
(16954, 16955) are the ones the docs name, so the test skips when they are taken.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*snippet:\s*(skip|serve)\s*(.*?)\s*-->")
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
LONG_RUNNING = re.compile(
    r"^\s*(?:\.venv/bin/)?forewarn (serve|agent)\b(?!.*--(print-config|help))"
)
#: Seconds a block may take: a scenario on the fast profile is the longest.
BLOCK_TIMEOUT = 120


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    text: str
    marker: tuple[str, str] | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def snippets() -> list[Snippet]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            marked = MARKER.search(before[-1]) if before else None
            line = text.count("\n", 0, match.start()) + 1
            marker = (marked.group(1), marked.group(2)) if marked else None
            found.append(Snippet(page, line, match.group(1), marker))
    return found


SNIPPETS = snippets()


def _script(snippet: Snippet) -> str:
    """The block as bash runs it: long-running lines in the background, waited for."""
    lines = ["set -e", "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT"]
    if snippet.marker is not None and snippet.marker[0] == "serve":
        lines.append(f"forewarn serve {snippet.marker[1]} > serve.log 2>&1 &")
        lines.append("wait_for_serve serve.log")
    logical = snippet.text.replace("\\\n", " ").splitlines()
    for index, line in enumerate(logical):
        if LONG_RUNNING.match(line):
            command = re.sub(r"\s*&\s*(#.*)?$", "", line.split(" #")[0])
            lines.append(f"{command} > background-{index}.log 2>&1 &")
            if " serve" in command:
                lines.append(f"wait_for_serve background-{index}.log")
            else:
                lines.append("sleep 2")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


_PRELUDE = """
wait_for_serve() {
  for _ in $(seq 200); do
    grep -q 'control: http' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "forewarn serve did not start:"; cat "$1"; return 1
}
"""


def _ports_free() -> bool:
    for port in (16954, 16955):
        with socket.socket() as probe:
            # As the server binds: a previous block's connections in TIME_WAIT don't count.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


@pytest.mark.e2e
@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.name for s in SNIPPETS])
def test_the_block_runs_as_written(snippet: Snippet, tmp_path: Path) -> None:
    if snippet.marker is not None and snippet.marker[0] == "skip":
        pytest.skip(f"{snippet.name}: {snippet.marker[1]}")
    if not _ports_free():
        pytest.skip("the documented ports 16954 and 16955 are taken on this machine")
    # A copy: what a block writes beside an example (the local agent's state) stays here.
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    venv_bin = Path(sys.executable).parent
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "bin").symlink_to(venv_bin)
    env = {k: v for k, v in os.environ.items() if k not in ("FOREWARN_TOKEN", "FOREWARN_CONTROL")}
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env["FOREWARN_RUNTIME_DIR"] = str(tmp_path / "runtime")
    finished = subprocess.run(
        ["bash", "-c", _PRELUDE + _script(snippet)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    logs = "".join(f"\n--- {p.name} ---\n{p.read_text()}" for p in tmp_path.glob("*.log"))
    assert finished.returncode == 0, f"{snippet.name}\n{finished.stdout}\n{finished.stderr}{logs}"


def test_every_page_with_shell_blocks_is_covered() -> None:
    pages = {s.page for s in SNIPPETS}
    assert ROOT / "README.md" in pages
    assert len(SNIPPETS) >= 10

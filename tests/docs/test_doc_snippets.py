"""Every shell block of README.md and docs/*.md runs as written, and prints what the page shows
(docs/contributing.md; docs/contributing.md, "Documentation that runs").

Each block runs in bash with ``set -e -o pipefail``, in a scratch directory that has a copy of the
repository's ``examples/`` and a ``.venv/bin`` holding this environment's ``forewarn`` (also
first on ``PATH``, as the quick start's activated environment has it), as a reader who
followed the quick start would have. What the page shows is checked three ways:

- **Exit statuses.** Every command must succeed, and every ``curl`` must get a success status
  (it runs with ``--fail-with-body``), unless it prints the status itself
  (``-w '%{http_code}'``), in which case the status is shown output like any other.
- **Shown output.** A comment line of its own right after a command (``# {...}``) is what that
  command prints on its standard output, all of it, one comment line a line. A plain block
  marked ``<!-- snippet: output COMMAND -->`` is what the long-running ``COMMAND`` prints once
  it has started. Before comparing, what differs from run to run is masked on both sides:
  GUIDs (EventIds, request ids, tenants), RFC 1123 and ISO 8601 times, the control token, and
  the home directory (shown as ``~``); so the page shows real values, never placeholders.
- **Ports.** The documented ports (16954, 16955, the agent's 9464) may be taken on this machine,
  or by another block running at the same time: each block gets free ones. The block's text
  has the documented numbers replaced, and the settings the commands read for their defaults
  (``FOREWARN_SERVE_BIND``, ``FOREWARN_SERVE_CONTROL``, ``FOREWARN_CONTROL``,
  ``FOREWARN_AGENT_METRICS_ADDRESS``) name the free ones; what the commands print is mapped
  back to the documented numbers before it is compared.

A ``forewarn serve`` or ``forewarn agent`` line is what the reader leaves running: it is
started in the background (as its trailing ``&`` says, or as "in another terminal" means) and
the block goes on once it is up (the server's start-up lines are out; the agent's metrics port
answers); whatever a block started is stopped when it ends. Blocks that need a server started
before them say so in a comment the page shows as nothing (``<!-- snippet: serve ARGS -->``);
blocks that cannot run here say why (``<!-- snippet: skip REASON -->``), and are skipped: those
are the only skips here, by design.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2e_support import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*snippet:\s*(skip|serve|output)\s*(.*?)\s*-->")
BLOCK = re.compile(r"^```(sh|)\n(.*?)^```", re.S | re.M)
LONG_RUNNING = re.compile(
    r"^\s*(?:\.venv/bin/)?forewarn (serve|agent)\b(?!.*--(print-config|help))"
)
#: A comment line of its own: shown output when it follows a command.
SHOWN = re.compile(r"^\s*#(?: (.*)|)$")
#: Seconds a block may take: a scenario on the fast profile is the longest.
BLOCK_TIMEOUT = 120
#: The numbers the pages name, each replaced by a free port of the block's own.
DOCUMENTED_PORTS = {"vm": 16954, "control": 16955, "agent_metrics": 9464}
#: A path the pages name that two runs at once must not share.
DOCUMENTED_PATHS = {"/tmp/forewarn-agent": "agent-state-dir"}

_GUID = re.compile(
    r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b"
)
_RFC1123 = re.compile(
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} "
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT\b"
)
_ISO8601 = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_TOKEN = re.compile(r"([?&]token=)[^\s&)]+")


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
    """Every ``sh`` block, and every plain block marked as a command's output."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            marked = MARKER.search(before[-1]) if before else None
            marker = (marked.group(1), marked.group(2)) if marked else None
            if match.group(1) == "" and (marker is None or marker[0] != "output"):
                continue  # a diagram, a tree, an error message quoted: not a command's output
            line = text.count("\n", 0, match.start()) + 1
            found.append(Snippet(page, line, match.group(2), marker))
    return found


SNIPPETS = snippets()


@dataclass
class Setting:
    """Where one run of a block happens: its free ports, its paths and its environment."""

    work: Path
    ports: dict[str, int]
    paths: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_block(cls, text: str, work: Path) -> Setting:
        hosts = ["127.0.0.1", *sorted(_fleet_addresses(text) - {"127.0.0.1"})]
        ports: dict[str, int] = {}
        for role in DOCUMENTED_PORTS:
            while (port := free_port(hosts if role == "vm" else ["127.0.0.1"])) in ports.values():
                pass
            ports[role] = port
        paths = {documented: str(work / name) for documented, name in DOCUMENTED_PATHS.items()}
        return cls(work, ports, paths)

    def rewrite(self, text: str) -> str:
        """The block as run here: the documented ports and paths replaced by this run's."""
        for role, port in DOCUMENTED_PORTS.items():
            text = re.sub(rf"\b{port}\b", str(self.ports[role]), text)
        for documented, actual in self.paths.items():
            text = text.replace(documented, actual)
        return text

    def as_documented(self, output: str) -> str:
        """What a command printed, with this run's ports and paths put back as the page
        names them, and the home directory as ``~``."""
        for documented, actual in self.paths.items():
            output = output.replace(actual, documented)
        output = output.replace(str(self.work), "~")
        for role, port in DOCUMENTED_PORTS.items():
            output = re.sub(rf"\b{self.ports[role]}\b", str(port), output)
        return output

    def environment(self) -> dict[str, str]:
        drop = ("FOREWARN_TOKEN", "FOREWARN_CONTROL", "FOREWARN_RUNTIME_DIR", "XDG_RUNTIME_DIR")
        env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("CURL")}
        venv_bin = Path(sys.executable).parent
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
        env["HOME"] = str(self.work)  # the token file goes where a reader's would: ~/.local/state
        env["FOREWARN_SERVE_BIND"] = f"127.0.0.1:{self.ports['vm']}"
        env["FOREWARN_SERVE_CONTROL"] = f"127.0.0.1:{self.ports['control']}"
        env["FOREWARN_CONTROL"] = f"127.0.0.1:{self.ports['control']}"
        env["FOREWARN_AGENT_METRICS_ADDRESS"] = f"127.0.0.1:{self.ports['agent_metrics']}"
        env["FOREWARN_AGENT_STATE_DIR"] = str(self.work / "agent-state")
        return env


def _fleet_addresses(text: str) -> set[str]:
    """The loopback addresses a block's servers listen on: those its text names, and those of
    the example fleet files it names."""
    found = set(re.findall(r"\b127\.\d+\.\d+\.\d+\b", text))
    for name in re.findall(r"\bexamples/[\w./-]+\.yaml\b", text):
        path = ROOT / name
        if path.is_file():
            found |= set(re.findall(r"\b127\.\d+\.\d+\.\d+\b", path.read_text(encoding="utf-8")))
    return found


def mask(text: str) -> str:
    """What differs from run to run, masked; the same for the page and for the run."""
    text = _GUID.sub("<guid>", text)
    text = _RFC1123.sub("<time>", text)
    text = _ISO8601.sub("<time>", text)
    return _TOKEN.sub(r"\1<token>", text)


@dataclass(frozen=True)
class Shown:
    """One command's output as the page shows it, and where the run puts what it printed."""

    command: str
    expected: str
    captured: str


def _logical_lines(text: str) -> list[str]:
    return text.replace("\\\n", " ").splitlines()


def plan(snippet: Snippet, setting: Setting) -> tuple[str, list[Shown]]:
    """The bash script that runs the block as a reader would, and the outputs it must print."""
    lines = [
        "set -e -o pipefail",
        "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT",
    ]
    shown: list[Shown] = []
    if snippet.marker is not None and snippet.marker[0] == "output":
        command = setting.rewrite(snippet.marker[1])
        if not LONG_RUNNING.match(command):
            raise AssertionError(f"{snippet.name}: an output block names a forewarn serve")
        lines += [f"{command} > shown-0.txt 2>&1 &", "wait_for_serve shown-0.txt"]
        expected = snippet.text.rstrip("\n")
        return "\n".join(lines) + "\n", [Shown(snippet.marker[1], expected, "shown-0.txt")]
    if snippet.marker is not None and snippet.marker[0] == "serve":
        lines.append(f"forewarn serve {setting.rewrite(snippet.marker[1])} > serve.log 2>&1 &")
        lines.append("wait_for_serve serve.log")
    logical = _logical_lines(snippet.text)
    index = 0
    while index < len(logical):
        line = setting.rewrite(logical[index])
        outputs: list[str] = []
        while (
            line.strip()
            and not SHOWN.match(line)
            and index + 1 < len(logical)
            and (comment := SHOWN.match(logical[index + 1]))
        ):
            outputs.append(comment.group(1) or "")
            index += 1
        if LONG_RUNNING.match(line):
            if outputs:
                raise AssertionError(f"{snippet.name}: output shown for a command left running")
            command = re.sub(r"\s*&\s*(#.*)?$", "", line.split(" #")[0])
            log = f"background-{index}.log"
            lines.append(f"{command} > {log} 2>&1 &")
            lines.append(f"wait_for_serve {log}" if " serve" in command else "wait_for_agent")
        elif outputs:
            captured = f"shown-{len(shown)}.txt"
            lines += [f"{{ {line}\n}} > {captured}", f"cat {captured}"]
            shown.append(Shown(logical[index - len(outputs)], "\n".join(outputs), captured))
        else:
            lines.append(line)
        index += 1
    return "\n".join(lines) + "\n", shown


_PRELUDE = """
wait_for_serve() {
  for _ in $(seq 300); do
    grep -q 'control: http' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "forewarn serve did not start:"; cat "$1"; return 1
}
wait_for_agent() {  # its metrics port answers once it runs
  for _ in $(seq 300); do
    command curl -s -o /dev/null "http://127.0.0.1:$AGENT_METRICS_PORT/healthz" && return 0
    sleep 0.1
  done
  echo "forewarn agent did not start"; return 1
}
curl() {  # a status the page does not show must be a success
  local arg
  for arg in "$@"; do
    case "$arg" in
      *%{http_code}*|--fail|--fail-with-body) command curl "$@"; return ;;
      --*) ;;
      -*f*) command curl "$@"; return ;;  # -f among short options: fails on an error already
    esac
  done
  command curl --fail-with-body "$@"
}
"""


def run_snippet(snippet: Snippet, work: Path) -> None:
    """Run ``snippet`` in ``work``; an AssertionError says how it differed from the page."""
    # A copy: what a block writes beside an example (the local agent's state) stays here.
    shutil.copytree(ROOT / "examples", work / "examples")
    (work / ".venv").mkdir()
    (work / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    setting = Setting.for_block(snippet.text + (snippet.marker or ("", ""))[1], work)
    script, shown = plan(snippet, setting)
    env = setting.environment()
    env["AGENT_METRICS_PORT"] = str(setting.ports["agent_metrics"])
    finished = subprocess.run(
        ["bash", "-c", _PRELUDE + script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    logs = "".join(f"\n--- {p.name} ---\n{p.read_text()}" for p in sorted(work.glob("*.log")))
    context = f"{snippet.name}\n--- script ---\n{script}{finished.stdout}\n{finished.stderr}{logs}"
    assert finished.returncode == 0, context
    for one in shown:
        printed = setting.as_documented((work / one.captured).read_text(encoding="utf-8"))
        expected = mask(one.expected).splitlines()
        actual = mask(printed).splitlines()
        if snippet.marker is not None and snippet.marker[0] == "output":
            actual = start_up(actual)  # what it printed once started, all of it
        assert actual == expected, (
            f"{snippet.name}: `{one.command.strip()}` printed otherwise than the page shows:\n"
            + "\n".join(difflib.unified_diff(expected, actual, "page", "run", lineterm=""))
        )


def start_up(lines: list[str]) -> list[str]:
    """What a ``forewarn serve`` printed down to the end of its start-up lines
    (``forewarn.server.banner``: a line ``forewarn: ...`` and the lines indented under it),
    whatever it logs after; everything when it printed no such line, for the page to differ
    from."""
    first = next((i for i, line in enumerate(lines) if line.startswith("forewarn: ")), None)
    if first is None:
        return lines
    end = first + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[:end]


def runnable(snippet: Snippet) -> bool:
    return snippet.marker is None or snippet.marker[0] != "skip"


@pytest.mark.e2e
@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.name for s in SNIPPETS])
def test_the_block_runs_as_written(snippet: Snippet, tmp_path: Path) -> None:
    if not runnable(snippet):
        assert snippet.marker is not None
        pytest.skip(f"{snippet.name}: {snippet.marker[1]}")  # by design: the page says why
    run_snippet(snippet, tmp_path)


def test_every_page_with_shell_blocks_is_covered() -> None:
    pages = {s.page for s in SNIPPETS}
    assert ROOT / "README.md" in pages
    assert len(SNIPPETS) >= 10
    # The README's own outputs are among those checked: the quick start's start-up lines,
    # a document before and after an approval.
    outputs = [s for s in SNIPPETS if s.page == ROOT / "README.md" and runnable(s)]
    assert any(s.marker is not None and s.marker[0] == "output" for s in outputs)
    shown = sum(len(plan(s, _dry_setting())[1]) for s in outputs)
    assert shown >= 3


def _dry_setting() -> Setting:
    return Setting(Path("/nonexistent"), dict(DOCUMENTED_PORTS))


# -- the checker itself: a page that says otherwise than the run must fail -------------------

_DOCUMENT = (
    'curl -H Metadata:true "http://127.0.0.1:16954/metadata/scheduledevents?api-version=2020-07-01"'
)


def _block(text: str, marker: tuple[str, str] | None = ("serve", "")) -> Snippet:
    return Snippet(ROOT / "README.md", 1, text, marker)


def test_what_differs_from_run_to_run_is_masked_on_both_sides(tmp_path: Path) -> None:
    setting = Setting(tmp_path, {"vm": 40001, "control": 40002, "agent_metrics": 40003})
    printed = (
        f'{{"EventId":"EDE4DCA4-A676-4D6C-8496-B942253A922C","NotBefore":"Fri, 27 Nov 2026 '
        f'08:37:24 GMT"}} at http://127.0.0.1:40001/?token=Kk9_x- in {tmp_path}/.local/a-40002.token'
    )
    page = (
        '{"EventId":"00000000-1111-2222-3333-444444444444","NotBefore":"Mon, 19 Sep 2016 '
        '18:29:47 GMT"} at http://127.0.0.1:16954/?token=... in ~/.local/a-16955.token'
    )
    assert mask(setting.as_documented(printed)) == mask(page)
    assert mask(setting.as_documented(printed.replace("40001", "40004"))) != mask(page)
    assert setting.rewrite(_DOCUMENT).count("40001") == 1


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f'{_DOCUMENT}\n# {{"DocumentIncarnation":1,"Events":[]}}\n', None),
        (f'{_DOCUMENT}\n# {{"DocumentIncarnation":2,"Events":[]}}\n', "printed otherwise"),
        (_DOCUMENT.replace("2020-07-01", "latest"), "returned error: 400"),
        (
            "curl -s -o /dev/null -w '%{http_code}\\n' -H Metadata:true -X POST "
            '-d \'{"StartRequests": [{"EventId": "<EventId>"}]}\' '
            '"http://127.0.0.1:16954/metadata/scheduledevents?api-version=2020-07-01"\n# 200\n',
            r"printed otherwise(.|\n)*-200\n\s*\+400",
        ),
    ],
    ids=["as shown", "another output", "an error status", "a status shown otherwise"],
)
def test_a_block_whose_output_or_status_differs_from_the_page_fails(
    tmp_path: Path, text: str, reason: str | None
) -> None:
    """The README's old approval, a POST of the literal ``<EventId>``, gets a 400: a block
    showing it as a success (or not saying) fails, as does any other output than the page's."""
    if reason is None:
        run_snippet(_block(text), tmp_path)
        return
    with pytest.raises(AssertionError, match=reason):
        run_snippet(_block(text), tmp_path)


@pytest.mark.e2e
def test_a_start_up_that_differs_from_the_page_fails(tmp_path: Path) -> None:
    shown = "forewarn: Scheduled Events for 2 VM(s) (vm0) at http://127.0.0.1:16954/metadata/scheduledevents\n"
    with pytest.raises(AssertionError, match=r"\+forewarn: Scheduled Events for 1 VM"):
        run_snippet(_block(shown, ("output", "forewarn serve")), tmp_path)


def test_start_up_lines_end_where_the_banner_ends() -> None:
    banner = ["forewarn: Scheduled Events for 1 VM(s)", "  try: curl", "  control: http://x"]
    logged = ["INFO forewarn.operations restart vm0", "  an indented log line"]
    assert start_up(["open files: raised", *banner, *logged]) == ["open files: raised", *banner]
    assert start_up(["Error: no such file"]) == ["Error: no such file"]


@pytest.mark.e2e
def test_a_page_showing_fewer_start_up_lines_than_printed_fails(tmp_path: Path) -> None:
    """docs/contributing.md, "Documentation that runs": the block after ``snippet: output``
    "is what that command prints once started": every start-up line, not only as many as
    the page shows. The README's start-up block without its last line fails."""
    (readme,) = [s for s in SNIPPETS if s.marker == ("output", "forewarn serve")]
    shortened = "\n".join(readme.text.rstrip("\n").splitlines()[:-1]) + "\n"
    with pytest.raises(AssertionError, match=r"\+  control: http"):
        run_snippet(_block(shortened, ("output", "forewarn serve")), tmp_path)

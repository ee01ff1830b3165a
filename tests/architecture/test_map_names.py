"""Every name docs/architecture.md gives in backticks exists in the code.

The page is the map a newcomer follows ("where is the minimum notice?"), so a module, file,
class, function or attribute it names must be there: a rename that forgets the map fails here.
What the backticks hold is read as the page writes it: a path (``domain/_jobs.py``, ``http/``)
must be a file or folder of the repository or of ``src/forewarn`` (a bare file name, one in the
package the sentence describes); ``forewarn.x`` must import; ``Class.member`` must be a member
of that class, ``module.name`` a name of that module (or of a class in it), and a plain name
one the code defines. Commands, routes, values and JSON keys (``forewarn serve``,
``GET /...``, ``503``, ``scheduledEventsPolicy``) are no Python names; they must at least
appear in the sources.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "forewarn"
MAP = ROOT / "docs" / "architecture.md"

_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_CALL = re.compile(r"^([\w.]+)\(.*\)$")
_FILE = re.compile(r"\.(py|js|html|css|md|yaml|toml)$")


@dataclass
class Definitions:
    """What the package defines: names anywhere, members by class, names by module."""

    names: set[str] = field(default_factory=set)
    members: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    modules: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Tuple | ast.List):
        return [name for element in node.elts for name in _targets(element)]
    return []


@cache
def definitions() -> Definitions:
    found = Definitions()
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        found.names.update(parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for member in ast.walk(node):
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                        found.members[node.name].add(member.name)
                    elif isinstance(member, ast.Assign | ast.AnnAssign | ast.AugAssign):
                        targets = (
                            member.targets if isinstance(member, ast.Assign) else [member.target]
                        )
                        for target in targets:
                            found.members[node.name].update(_targets(target))
                found.modules[module].add(node.name)
                found.modules[module].update(found.members[node.name])
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.names.add(node.name)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                for argument in (*arguments.args, *arguments.kwonlyargs, *arguments.posonlyargs):
                    found.names.add(argument.arg)
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    found.names.update(_targets(target))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.modules[module].add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    found.modules[module].update(_targets(target))
            elif isinstance(node, ast.ImportFrom):
                found.modules[module].update(alias.asname or alias.name for alias in node.names)
    return found


@cache
def _source_text() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file() and path.suffix in {".py", ".js", ".html", ".css", ".yaml", ".sh"}
    )


def _modules_named(last: str) -> list[str]:
    return [module for module in definitions().modules if module.split(".")[-1] == last]


def _path_exists(name: str) -> bool:
    stripped = name.rstrip("/")
    candidates = [ROOT / stripped, PACKAGE / stripped]
    if any(path.exists() for path in candidates):
        return True
    # A bare name, or one relative to the package the sentence is about (``http/``, ``limits.py``).
    return any(
        path.as_posix().endswith("/" + stripped)
        for path in PACKAGE.rglob(Path(stripped).name)
        if path.is_dir() == name.endswith("/") or not name.endswith("/")
    )


def _name_exists(name: str) -> bool:
    found = definitions()
    parts = name.split(".")
    if parts[0] == "forewarn":
        for cut in range(len(parts), 0, -1):
            try:
                target: object = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attribute in parts[cut:]:
                if not hasattr(target, attribute):
                    return False
                target = getattr(target, attribute)
            return True
        return False
    if len(parts) == 1:
        return name in found.names
    *owner_path, member = parts
    owner = owner_path[-1]
    dotted = ".".join(owner_path)
    if owner in found.members and member in found.members[owner]:
        return True
    modules = [dotted] if dotted in found.modules else _modules_named(owner)
    if any(member in found.modules[module] for module in modules):
        return True
    # An instance (``DOCUMENTED``, the plugin's ``platform``): a member of some class, or a
    # method the registry declares by name.
    return owner in found.names and (
        any(member in members for members in found.members.values()) or _in_strings(member)
    )


def _in_strings(name: str) -> bool:
    """``name`` as a string the code uses (a JSON key, a record kind, a header, a method the
    registry declares) or an attribute it reads (``resource.RLIMIT_NOFILE``)."""
    text = _source_text()
    return any(form in text for form in (f'"{name}"', f"'{name}'", f".{name}"))


def _route(name: str) -> str | None:
    """The path of a route as the map writes it (``GET /metadata/...?...``, ``/healthz``)."""
    words = name.split()
    path = words[-1] if words[0] in {"GET", "POST", "PUT", "DELETE"} else name
    return path.split("?")[0] if path.startswith("/") and len(words) <= 2 else None


def exists(name: str) -> bool:
    """Whether the code has what ``name``, as the map writes it, names."""
    called = _CALL.match(name)
    if called:
        name = called.group(1)
    route = _route(name)
    if route is not None:
        # The package's own prefix, then the route's first segment (routes are assembled).
        first = "/" + route.strip("/").split("/")[0]
        return first in _source_text()
    if name.endswith(".sqlite3"):
        return name in _source_text()
    if name.endswith("/") or _FILE.search(name):
        return _path_exists(name)
    if "/" in name and _IDENTIFIER.match(name.replace("/", ".")):
        # ``domain/operations.update_host``: a module path and a name in it.
        return _name_exists(name.replace("/", "."))
    if _IDENTIFIER.match(name):
        return _name_exists(name) or ("." not in name and _in_strings(name))
    # A command line or a scenario step: its first word is the program or the step's key.
    return name.split()[0].rstrip(":") in _source_text()


def map_names() -> list[str]:
    """The backticked names of the map, less what is no name (empty, ``_``, a fragment)."""
    text = MAP.read_text(encoding="utf-8")
    names = sorted(set(re.findall(r"`([^`\n]+)`", text)))
    return [name for name in names if name.strip(" _;") and not name.startswith(";")]


@pytest.mark.parametrize("name", map_names())
def test_the_map_names_what_exists(name: str) -> None:
    assert exists(name), f"docs/architecture.md names `{name}`, which the code does not have"


@pytest.mark.parametrize(
    "name",
    [
        "domain/nowhere.py",
        "server/nowhere/",
        "forewarn.nowhere",
        "Platform.nowhere",
        "ScheduledEventsService._nowhere",
        "no_such_function_anywhere",
        "domain/operations.no_such_operation",
        "tests/unit/test_service_door.py",
    ],
)
def test_a_stale_name_is_found_out(name: str) -> None:
    assert not exists(name)


def test_the_service_names_its_door_test_where_it_is() -> None:
    """service.py's docstring points at the test that holds adapters to its door."""
    text = (PACKAGE / "service.py").read_text(encoding="utf-8")
    named = re.findall(r"``(tests/[\w/]+\.py)``", text)
    assert named
    assert all((ROOT / path).is_file() for path in named), named


def test_every_test_folder_is_in_contributing_s_table() -> None:
    """docs/contributing.md, "Where the tests are": each folder of ``tests/`` has its row, so a
    newcomer finds where a test goes (three were missing: azure_side, trace, verify)."""
    page = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `tests/([\w-]+)/` \|", page, re.M))
    folders = {
        path.name
        for path in (ROOT / "tests").iterdir()
        if path.is_dir() and not path.name.startswith((".", "_"))
    }
    assert folders - rows == set(), "add a row to docs/contributing.md for each"
    assert rows - folders == set(), "rows for folders that are gone"

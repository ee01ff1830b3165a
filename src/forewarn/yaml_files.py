"""YAML nobody vetted (fleet files, scenario files and uploads): read bounded and strict.

PyYAML's safe loader builds whatever a text says: a document nested thousands deep (its
pure-Python composer recurses until ``RecursionError``, seconds later), a few aliases that make
some bytes stand for millions of values, an integer of thousands of digits (converted in
quadratic time; past 4,300 digits a raw ``ValueError``), and a key given twice, whose first
value it drops without a word. :func:`load_yaml` composes the document with libyaml (whose own
nesting limit keeps the composer's recursion short), walks the node tree once, without
recursion, refusing each of those at its place (the dotted path of keys and indexes, and the
line), and only then builds the values. Callers prefix the file's name, or the scenario step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from forewarn import collector
from forewarn.errors import ForewarnError

__all__ = [
    "MAX_DEPTH",
    "MAX_INTEGER_CHARACTERS",
    "YamlInputError",
    "dotted",
    "load_yaml",
]

#: How deep mappings and sequences may nest: a fleet file needs 5 levels, a scenario 7.
MAX_DEPTH = 32
#: How long an integer may be written: no count forewarn takes needs more than 20 digits.
MAX_INTEGER_CHARACTERS = 32
#: Values the document may stand for, aliases expanded, per character of its text: enough for
#: ``<<: *defaults`` on every entry of a list, far too few for aliases of aliases.
_VALUES_PER_CHARACTER = 4
_INT = "tag:yaml.org,2002:int"
_MERGE = "tag:yaml.org,2002:merge"
#: libyaml's loader when present: it is fast, and bounds nesting before composing.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Path = tuple[str | int, ...]


class YamlInputError(ForewarnError):
    """A YAML document refused by :func:`load_yaml`; ``path`` and ``line`` say where, the
    message says ``path: reason`` (the reason alone at the top level)."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{dotted(path)}: {reason}" if path else reason)
        self.path = path
        self.line = line
        self.reason = reason


def dotted(path: Path) -> str:
    """``scaleSets.0.capacity``: the path as the validation errors of the files name fields."""
    return ".".join(str(part) for part in path)


def load_yaml(text: str) -> Any:
    """The values of the single YAML document ``text`` (None when it holds none); raises
    :class:`YamlInputError`, in one line, for text that is not YAML, past a bound, or with a
    key given twice."""
    # The nodes and values of a large file are a million objects none of which is garbage:
    # the collector would walk them again and again while they pile up (forewarn.collector).
    with collector.paused():
        return _load(text)


def _load(text: str) -> Any:
    loader = _LOADER(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise _not_yaml(exc) from None
        except RecursionError:  # the pure-Python composer, without libyaml
            raise YamlInputError((), 1, f"nested deeper than {MAX_DEPTH} levels") from None
        if node is None:
            return None
        _check(node, budget=_VALUES_PER_CHARACTER * len(text) + 1024)
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as exc:  # a tag safe YAML does not build (!!python/object...)
            raise _not_yaml(exc) from None
    finally:
        loader.dispose()


def _not_yaml(exc: yaml.YAMLError) -> YamlInputError:
    """libyaml's several-line message as one line: the problem and where it is."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        line = int(mark.line) + 1
        problem = " ".join(str(exc.problem).split())
        return YamlInputError(
            (), line, f"not valid YAML: {problem}, line {line}, column {int(mark.column) + 1}"
        )
    return YamlInputError((), 1, "not valid YAML: " + " ".join(str(exc).split()))


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _check(root: Node, *, budget: int) -> None:
    """Walk every node in document order (aliases as often as they are used), refusing the
    first one past a bound."""
    pending: list[tuple[Node, Path]] = [(root, ())]
    seen = 0
    while pending:
        node, path = pending.pop()
        seen += 1
        if seen > budget:
            raise YamlInputError(
                path,
                _line(node),
                f"aliases make the document stand for more than {budget:,} values, "
                f"line {_line(node)}",
            )
        if len(path) > MAX_DEPTH:
            raise YamlInputError(
                path[:4],
                _line(node),
                f"nested deeper than {MAX_DEPTH} levels, line {_line(node)}",
            )
        if isinstance(node, ScalarNode):
            if node.tag == _INT and len(node.value) > MAX_INTEGER_CHARACTERS:
                raise YamlInputError(
                    path,
                    _line(node),
                    f"an integer of {len(node.value):,} characters (at most "
                    f"{MAX_INTEGER_CHARACTERS}), line {_line(node)}",
                )
        elif isinstance(node, SequenceNode):
            pending.extend(reversed([(child, (*path, i)) for i, child in enumerate(node.value)]))
        elif isinstance(node, MappingNode):
            pending.extend(reversed(list(_entries(node, path))))


def _entries(node: MappingNode, path: Path) -> Iterator[tuple[Node, Path]]:
    """The keys and values of a mapping with their paths; a key given twice is refused.
    ``<<`` merges (whose keys the mapping's own may override) are not duplicates."""
    first_line: dict[tuple[str, str], int] = {}
    for key, value in node.value:
        if key.tag == _MERGE:
            yield value, path
            continue
        name: str | int = "?"
        if isinstance(key, ScalarNode):
            name = key.value
            known = first_line.get((key.tag, key.value))
            if known is not None:
                raise YamlInputError(
                    path,
                    _line(key),
                    f"key {key.value!r} is given twice, on lines {known} and {_line(key)}",
                )
            first_line[(key.tag, key.value)] = _line(key)
        yield key, (*path, name)
        yield value, (*path, name)

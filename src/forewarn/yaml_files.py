"""YAML nobody vetted (fleet files, scenario files and uploads): read bounded and strict.

PyYAML's safe loader builds whatever a text says: a document nested thousands deep (its
pure-Python composer recurses until ``RecursionError``, seconds later), a few aliases that make
some bytes stand for millions of values, an integer of thousands of digits (converted in
quadratic time; past 4,300 digits a raw ``ValueError``), and a key given twice, whose first
value it drops without a word. :func:`load_yaml` builds a document of strings, implicit
scalars, lists and mappings (a fleet file) straight from libyaml's events, within every bound;
anything else, or past a bound, it composes with libyaml (whose own nesting limit keeps the
composer's recursion short), walks the node tree once, without recursion, refusing each of
those at its place (the dotted path of keys and indexes, and the line), and only then builds
the values. Callers prefix the file's name, or the scenario step. The nesting bound is the
one every untrusted input shares (:mod:`forewarn.nesting`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from forewarn import collector
from forewarn.errors import ForewarnError
from forewarn.nesting import MAX_NESTING

__all__ = [
    "MAX_INTEGER_CHARACTERS",
    "YamlInputError",
    "dotted",
    "load_yaml",
]

#: How long an integer may be written: no count forewarn takes needs more than 20 digits.
MAX_INTEGER_CHARACTERS = 32
#: Values the document may stand for, aliases expanded, per character of its text: enough for
#: ``<<: *defaults`` on every entry of a list, far too few for aliases of aliases.
_VALUES_PER_CHARACTER = 4
_INT = "tag:yaml.org,2002:int"
_MERGE = "tag:yaml.org,2002:merge"
#: libyaml's loader when present: it is fast, and bounds nesting before composing.
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _plain_scalar_tags(
    loader: type[yaml.SafeLoader],
) -> dict[str, tuple[tuple[str, re.Pattern[str]], ...]]:
    """The implicit resolvers a plain scalar is tried against, by its first character (the
    empty string for an empty scalar), the wildcard ones after them: what PyYAML's
    ``resolve`` gathers anew for every scalar."""
    implicit = loader.yaml_implicit_resolvers
    wildcard = implicit.get(None, [])
    return {
        first: tuple(resolvers + wildcard) for first, resolvers in implicit.items() if first
    } | {"": tuple(implicit.get("", []) + wildcard)}


class _Loader(_BASE_LOADER):  # type: ignore[valid-type,misc]  # a class chosen at import
    """The safe loader, resolving a plain scalar's tag as PyYAML's ``resolve`` does, from
    resolvers gathered once: the composer calls it for every scalar, half a million times
    for a fleet of 100,000 VMs, and PyYAML's gathered and joined two lists each time (the
    composition of such a fleet takes about a sixth less). Safe YAML has no path resolvers,
    so a plain scalar no resolver matches is a string."""

    _by_first = _plain_scalar_tags(_BASE_LOADER)
    _no_resolvers: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
        _BASE_LOADER.yaml_implicit_resolvers.get(None, [])
    )

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode and implicit[0]:
            for tag, pattern in self._by_first.get(value[:1], self._no_resolvers):
                if pattern.match(value):
                    return tag
            return _STRING_TAG
        resolved: str = super().resolve(kind, value, implicit)
        return resolved


_LOADER: type[yaml.SafeLoader] = _Loader
_STRING_TAG: str = _BASE_LOADER.DEFAULT_SCALAR_TAG

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
    budget = _VALUES_PER_CHARACTER * len(text) + 1024
    loader = _LOADER(text)
    try:
        return _plain_document(loader, budget)
    except _NotPlainError:
        pass
    finally:
        loader.dispose()
    loader = _LOADER(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise _not_yaml(exc) from None
        except RecursionError:  # the pure-Python composer, without libyaml
            raise YamlInputError((), 1, f"nested deeper than {MAX_NESTING} levels") from None
        if node is None:
            return None
        _check(node, budget=budget)
        try:
            return _plain_values(node, loader, {})
        except _NotPlainError:
            pass
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as exc:  # a tag safe YAML does not build (!!python/object...)
            raise _not_yaml(exc) from None
        except ValueError as exc:  # a timestamp that is no date, where no node is named
            raise YamlInputError((), 1, f"not valid YAML: a value cannot be built: {exc}") from None
    finally:
        loader.dispose()


class _NotPlainError(Exception):
    """The document holds what only PyYAML's constructor builds as safe YAML says."""


#: Safe YAML's scalar types, built by the safe constructor's own functions.
_SCALARS = {
    tag: build
    for tag, build in yaml.SafeLoader.yaml_constructors.items()
    if tag is not None
    and tag.rpartition(":")[2] in ("null", "bool", "int", "float", "binary", "timestamp")
}
_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


def _plain_values(node: Node, loader: yaml.SafeLoader, built: dict[int, Any]) -> Any:
    """The values of a checked document made of strings, safe YAML's scalars, lists and
    mappings with scalar keys and no ``<<`` merge, as PyYAML's safe constructor builds
    them (a node used twice through an alias is one value), in a third of its time: it
    calls a function of its own for every node. Anything else (a merge, a set, an omap,
    a tag safe YAML does not build) raises :class:`_NotPlainError`, and PyYAML builds the
    document. Recursion is bounded: the document is checked (:data:`MAX_NESTING`)."""
    if isinstance(node, ScalarNode):
        if node.tag == _STR:
            return node.value
        build = _SCALARS.get(node.tag)
        if build is None:
            raise _NotPlainError
        try:
            return build(loader, node)
        except ValueError as exc:  # a timestamp that is no date: 2024-13-45
            raise _unbuildable(node, exc) from None
    known = built.get(id(node))
    if known is not None:
        return known
    if isinstance(node, SequenceNode) and node.tag == _SEQ:
        values: Any = [_plain_values(child, loader, built) for child in node.value]
    elif isinstance(node, MappingNode) and node.tag == _MAP:
        values = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE:
                raise _NotPlainError
            values[_plain_values(key, loader, built)] = _plain_values(value, loader, built)
    else:
        raise _NotPlainError
    built[id(node)] = values
    return values


#: What a mapping on the stack of :func:`_plain_document` waits for when its next node is a key.
_KEY = object()
#: What a list on that stack has in place of a key.
_NOT_A_MAPPING = object()


def _plain_document(loader: yaml.SafeLoader, budget: int) -> Any:
    """The values of a document of strings, safe YAML's implicit scalars, lists and mappings
    with scalar keys, built straight from the parser's events, each bound of :func:`_check`
    kept on the way (no node tree: for a large fleet file, composing one cost twice the
    rest). Whatever else the text holds or is (an anchor or alias, a tag, a ``<<`` merge, a
    key given twice or equal to an earlier one, a collection as a key, a collection past
    :data:`MAX_NESTING`, a long integer, more than ``budget`` values, a value the scalar's
    constructor refuses, not one YAML document) raises :class:`_NotPlainError`: the tree is
    composed, checked and built then, refusing it as ever, at its place."""
    get_event: Callable[[], Any] = loader.get_event  # untyped in the stubs
    try:
        if type(get_event()) is not StreamStartEvent or (
            type(get_event()) is not DocumentStartEvent
        ):
            raise _NotPlainError
        by_first, no_resolvers = _Loader._by_first, _Loader._no_resolvers
        document: list[Any] = []  # holds the document's value, as a list holds its items
        open_: list[Any] = [document]  # the collections being filled, innermost last
        keys: list[Any] = [_NOT_A_MAPPING]  # for each, the key its next value is for
        values = 0
        while True:
            event = get_event()
            kind = type(event)
            if kind is ScalarEvent:
                value: Any = event.value
                if event.implicit[0]:
                    tag = _STRING_TAG
                    for resolved, pattern in by_first.get(value[:1], no_resolvers):
                        if pattern.match(value):
                            tag = resolved
                            break
                    if tag != _STRING_TAG:
                        build = _SCALARS.get(tag)
                        if build is None or (tag == _INT and len(value) > MAX_INTEGER_CHARACTERS):
                            raise _NotPlainError
                        # safe YAML's scalar constructors read a node's value alone
                        value = build(loader, ScalarNode(tag, value))
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if len(open_) > MAX_NESTING:  # the document's own list is one
                    raise _NotPlainError
                value = {} if kind is MappingStartEvent else []
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                open_.pop()
                keys.pop()
                continue
            elif kind is DocumentEndEvent:
                break
            else:  # an alias
                raise _NotPlainError
            if event.anchor is not None or event.tag is not None:
                raise _NotPlainError
            values += 1
            if values > budget:
                raise _NotPlainError
            key = keys[-1]
            if key is _NOT_A_MAPPING:
                open_[-1].append(value)
            elif key is _KEY:
                if kind is not ScalarEvent or value in open_[-1]:
                    raise _NotPlainError
                keys[-1] = value
            else:
                open_[-1][key] = value
                keys[-1] = _KEY
            if kind is not ScalarEvent:
                open_.append(value)
                keys.append(_KEY if kind is MappingStartEvent else _NOT_A_MAPPING)
        if type(get_event()) is not StreamEndEvent:
            raise _NotPlainError
    except (yaml.YAMLError, ValueError):  # the parser, or a scalar's constructor, refuses it
        raise _NotPlainError from None
    return document[0]


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


def _unbuildable(node: Node, exc: ValueError) -> YamlInputError:
    """A scalar of a type safe YAML builds whose constructor refuses its text (a timestamp
    that is no date, ``2024-13-45``): one line naming the text, its type and where it is."""
    line = _line(node)
    kind = str(node.tag).rpartition(":")[2]
    return YamlInputError(
        (), line, f"not valid YAML: {node.value!r} is not a {kind} ({exc}), line {line}"
    )


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _check(root: Node, *, budget: int) -> None:
    """Walk every node in document order (aliases as often as they are used), refusing the
    first one past a bound. A node's path is a link to its parent's (:data:`_Trail`), made
    into keys and indexes only for the message of a refusal: a tuple per node cost more
    than the rest of the walk."""
    pending: list[tuple[Node, int, _Trail]] = [(root, 0, None)]
    seen = 0
    while pending:
        node, depth, trail = pending.pop()
        seen += 1
        if seen > budget:
            raise YamlInputError(
                _path(trail),
                _line(node),
                f"aliases make the document stand for more than {budget:,} values, "
                f"line {_line(node)}",
            )
        if depth >= MAX_NESTING and not isinstance(node, ScalarNode):  # the 33rd collection
            raise YamlInputError(
                _path(trail)[:4],
                _line(node),
                f"nested deeper than {MAX_NESTING} levels, line {_line(node)}",
            )
        if isinstance(node, ScalarNode):
            if node.tag == _INT and len(node.value) > MAX_INTEGER_CHARACTERS:
                raise YamlInputError(
                    _path(trail),
                    _line(node),
                    f"an integer of {len(node.value):,} characters (at most "
                    f"{MAX_INTEGER_CHARACTERS}), line {_line(node)}",
                )
        elif isinstance(node, SequenceNode):
            below = depth + 1
            children = node.value
            pending.extend(
                [(children[i], below, (trail, i)) for i in range(len(children) - 1, -1, -1)]
            )
        elif isinstance(node, MappingNode):
            entries = _entries(node, depth, trail)
            entries.reverse()
            pending.extend(entries)


#: A node's path, innermost last: None at the top, else its parent's trail and its own key
#: or index.
_Trail = tuple["_Trail", str | int] | None


def _path(trail: _Trail) -> Path:
    parts: list[str | int] = []
    while trail is not None:
        trail, part = trail
        parts.append(part)
    parts.reverse()
    return tuple(parts)


def _entries(node: MappingNode, depth: int, trail: _Trail) -> list[tuple[Node, int, _Trail]]:
    """The keys and values of a mapping with their depths and trails; a key given twice is
    refused. ``<<`` merges (whose keys the mapping's own may override) are not duplicates,
    and add nothing to the path."""
    first: dict[tuple[str, str], Node] = {}
    entries: list[tuple[Node, int, _Trail]] = []
    below = depth + 1
    for key, value in node.value:
        if key.tag == _MERGE:
            entries.append((value, depth, trail))
            continue
        name: str | int = "?"
        if isinstance(key, ScalarNode):
            name = key.value
            seen = (key.tag, key.value)
            known = first.get(seen)
            if known is not None:
                raise YamlInputError(
                    _path(trail),
                    _line(key),
                    f"key {name!r} is given twice, on lines {_line(known)} and {_line(key)}",
                )
            first[seen] = key
        below_trail = (trail, name)
        entries.append((key, below, below_trail))
        entries.append((value, below, below_trail))
    return entries

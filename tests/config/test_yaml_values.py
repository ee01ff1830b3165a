"""The values :func:`forewarn.yaml_files.load_yaml` builds are PyYAML's safe loader's,
whichever of its two ways builds them (its own walk for strings, scalars, lists and
mappings; PyYAML's constructor for the rest), and its refusals name the same place."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest
import yaml

from forewarn import yaml_files
from forewarn.yaml_files import YamlInputError, load_yaml

DOCUMENTS = [
    "vms:\n  - {name: vm1, address: 127.1.0.1}\n  - {name: vm2, address: '127.1.0.2'}\n",
    "a: 1\nb: -0x1F\nc: 0o17\nd: 1_000\ne: 3.5\nf: .inf\ng: ~\nh: yes\ni: off\nj: ''\n",
    "when: 2024-04-11T22:00:00Z\nday: 2024-04-11\nraw: !!binary aGVsbG8=\n",
    "1: one\n2.5: two\nnull: three\ntrue: four\n",
    "nested: {a: [1, [2, [3, {b: c}]]], empty: {}, none: []}\n",
    'text: |\n  two\n  lines\nfolded: >\n  one\n  line\nquoted: "x\\ty"\n',
    "defaults: &d {size: small, zone: '1'}\nvms:\n  - *d\n  - *d\n",
    "base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\n",
    "set: !!set {a, b}\nomap: !!omap [{a: 1}, {b: 2}]\npairs: !!pairs [{a: 1}]\n",
    "- 1\n- two\n- [3]\n",
    "just a string\n",
    "42\n",
    # Tags written out, the non-specific one among them:
    "a: !!str 1\nb: !!int '2'\nc: ! 3\nd: !!map {e: !!seq [f]}\n",
    # Keys equal once built: the last value stays, under the first key (a dict's rule):
    "1: a\n1.0: b\ntrue: c\nyes: d\n",
    # An anchor no alias uses; no document at all:
    "a: &x 1\nb: &y [2]\nc: &z {d: 3}\n",
    "",
    "# only a comment\n",
    # A plain scalar's tag by its first character, every resolver's (yaml_files._Loader):
    "a: n\nb: No\nc: NULL\nd: 190:20:30\ne: 1.2.3\nf: -.5\ng: +1\nh: 0b101\ni: .NaN\n"
    "j: 2024-04-11 22:00:00\nk: 127.1.0.1\nl: vm000001\nm: On\nn: ''\no:\n",
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_values_are_pyyamls(text: str) -> None:
    ours = load_yaml(text)
    theirs = yaml.safe_load(text)
    assert ours == theirs
    assert pickle.dumps(ours) == pickle.dumps(theirs)  # types and shared values alike


#: A resolver every first character shares (PyYAML's ``add_implicit_resolver`` with ``first``
#: None): "nope" begins with a character of its own resolvers, "wild" with one of none.
_WILD = ("tag:example.com,2026:wild", re.compile(r"^(?:wild|nope|7up)$"))


def _tags(node: yaml.Node | None) -> list[tuple[str, str | None]]:
    """Every node's tag, with a scalar's value (None for a collection), in document order."""
    assert node is not None
    if isinstance(node, yaml.ScalarNode):
        return [(node.tag, node.value)]
    children = node.value if isinstance(node, yaml.SequenceNode) else sum(node.value, ())
    return [(node.tag, None)] + [tag for child in children for tag in _tags(child)]


def test_the_table_of_plain_scalar_tags_gives_pyyamls_tags() -> None:
    """The loader resolves a plain scalar's tag from a table made once, at import
    (yaml_files._plain_scalar_tags), where PyYAML's ``BaseResolver.resolve`` gathers "the
    resolvers of the scalar's first character (those of '' for an empty one), then the
    wildcard ones" for every scalar (https://github.com/yaml/pyyaml/blob/main/lib/yaml/
    resolver.py). Made again here for a loader with a wildcard resolver too, the table gives
    PyYAML's tags for a plain scalar of each first character, an empty one, one only the
    wildcard matches, and a quoted one it would match."""

    class Theirs(yaml.SafeLoader):
        pass

    class Ours(yaml_files._Loader):
        pass

    for loader in (Theirs, Ours):
        loader.add_implicit_resolver(*_WILD, None)
    Ours._by_first = yaml_files._plain_scalar_tags(Ours)
    Ours._no_resolvers = tuple(Ours.yaml_implicit_resolvers[None])
    wild = "{a: wild, b: nope, c: 7up, d: 'wild', e: }\n"
    for text in (DOCUMENTS[-1], wild, DOCUMENTS[0]):
        assert _tags(yaml.compose(text, Loader=Ours)) == _tags(yaml.compose(text, Loader=Theirs))
    assert _tags(yaml.compose(wild, Loader=Ours)) == [
        ("tag:yaml.org,2002:map", None),
        ("tag:yaml.org,2002:str", "a"),
        (_WILD[0], "wild"),
        ("tag:yaml.org,2002:str", "b"),
        (_WILD[0], "nope"),
        ("tag:yaml.org,2002:str", "c"),
        (_WILD[0], "7up"),
        ("tag:yaml.org,2002:str", "d"),
        ("tag:yaml.org,2002:str", "wild"),  # quoted: no resolver is tried
        ("tag:yaml.org,2002:str", "e"),
        ("tag:yaml.org,2002:null", ""),  # empty: the resolvers of ''
    ]


def test_the_table_of_a_loader_without_wildcard_or_empty_scalar_resolvers() -> None:
    """PyYAML's ``resolve`` takes "none" for a missing first character, empty scalar or
    wildcard entry (``yaml_implicit_resolvers.get(..., [])``,
    https://github.com/yaml/pyyaml/blob/main/lib/yaml/resolver.py): so does the table, for
    a loader without any resolver, one with only a wildcard one, and the safe loader, which
    has no wildcard one."""

    class Bare(yaml.SafeLoader):
        yaml_implicit_resolvers: dict[Any, list[Any]] = {}  # noqa: RUF012  # PyYAML's own table

    assert yaml_files._plain_scalar_tags(Bare) == {"": ()}
    Bare.add_implicit_resolver(*_WILD, None)
    assert yaml_files._plain_scalar_tags(Bare) == {"": (_WILD,)}
    safe = yaml.SafeLoader.yaml_implicit_resolvers
    assert yaml_files._plain_scalar_tags(yaml.SafeLoader) == {
        first: tuple(resolvers) for first, resolvers in safe.items()
    }


def test_a_node_used_twice_is_one_value() -> None:
    loaded: Any = load_yaml("defaults: &d {size: small}\nvms: [*d, *d]\n")
    assert loaded["vms"][0] is loaded["vms"][1] is loaded["defaults"]


@pytest.mark.parametrize(
    ("text", "path", "line", "reason"),
    [
        ("a:\n  b: 1\n  b: 2\n", ("a",), 3, "key 'b' is given twice, on lines 2 and 3"),
        ("l:\n  - {x: 1}\n  - {y: " + "9" * 40 + "}\n", ("l", 1, "y"), 3, "an integer of 40"),
        ("a: " + "[" * 40 + "]" * 40 + "\n", ("a", 0, 0, 0), 1, "nested deeper than 32"),
    ],
)
def test_refusals_name_the_path_and_line(
    text: str, path: tuple[str | int, ...], line: int, reason: str
) -> None:
    with pytest.raises(YamlInputError) as refused:
        load_yaml(text)
    assert refused.value.path == path
    assert refused.value.line == line
    assert reason in refused.value.reason


def test_a_tag_safe_yaml_does_not_build_is_refused_in_one_line() -> None:
    with pytest.raises(YamlInputError, match=r"not valid YAML: .*python/object") as refused:
        load_yaml("a: !!python/object:os.system {}\n")
    assert "\n" not in str(refused.value)


def test_a_list_as_a_key_is_refused_in_one_line() -> None:
    with pytest.raises(YamlInputError, match="not valid YAML: found unhashable key, line 1"):
        load_yaml("[a, b]: 1\n")


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        # libyaml counts lines and columns from 0; a reader counts them from 1.
        ("a: 1\nb: [2\n", 3, "did not find expected ',' or ']', line 3, column 1"),
        ("a: 1\n  - b: [\n", 2, "mapping values are not allowed in this context, line 2, column 6"),
    ],
)
def test_text_that_is_not_yaml_is_refused_at_its_line_and_column(
    text: str, line: int, reason: str
) -> None:
    """docs/serve.md, "A mistake in a fleet file is reported with the file, the field and the
    reason"; docs/design.md: refused "with its line and column". Counted from 1, as an
    editor shows them; no path, since the document never became values."""
    with pytest.raises(YamlInputError) as refused:
        load_yaml(text)
    assert refused.value.path == ()
    assert refused.value.line == line
    assert refused.value.reason == f"not valid YAML: {reason}"
    assert str(refused.value) == refused.value.reason


def test_a_character_yaml_does_not_allow_is_refused_in_one_line_at_line_one() -> None:
    """A control character is refused by YAML's reader before any line is parsed: its error
    carries a position, not a line, so it is reported at line 1, in libyaml's words made one
    line (docs/serve.md: the reason, in one line)."""
    with pytest.raises(YamlInputError) as refused:
        load_yaml("a: \x07")
    assert refused.value.path == ()
    assert refused.value.line == 1
    assert refused.value.reason == (
        "not valid YAML: unacceptable character #x0007: control characters are not allowed "
        'in "<unicode string>", position 3'
    )
    assert str(refused.value) == refused.value.reason


def _aliased(extra: int, length: int) -> str:
    """A list of 100 values and 100 aliases of it, ``extra`` plain values after them, padded
    with a comment to ``length`` characters: 5 nodes for the two keys, their values and the
    root, 100 for the list, 101 for each alias (the list and its values), 1 for each extra."""
    listed = "x: &a [" + ", ".join(["0"] * 100) + "]\n"
    aliases = "y: [" + ", ".join(["*a"] * 100 + ["0"] * extra) + "]\n"
    body = listed + aliases
    return body + "#" + "p" * (length - len(body) - 2) + "\n"


def test_aliases_may_stand_for_exactly_four_values_per_character_and_1024_more() -> None:
    """docs/control.md (scenario files): "aliases standing for at most 4 values per character
    of the file" [ours: and 1,024 more, so a short file may still use a few]: a document of
    exactly that many values is read, one value more is refused where it is met."""
    values = 5 + 100 + 100 * 101 + 3
    length = (values - 1024) // 4
    assert 4 * length + 1024 == values
    at_the_bound = _aliased(3, length)
    assert len(at_the_bound) == length
    loaded: Any = load_yaml(at_the_bound)
    assert len(loaded["y"]) == 103
    with pytest.raises(YamlInputError) as refused:
        load_yaml(_aliased(4, length))
    assert refused.value.path == ("y", 103)
    assert refused.value.line == 2
    assert refused.value.reason == (
        f"aliases make the document stand for more than {values:,} values, line 2"
    )


def test_an_integer_of_exactly_32_characters_is_read_and_33_refused() -> None:
    """docs/control.md: "integers of at most 32 characters"; the first element of a list is
    checked as well as the last."""
    assert load_yaml("n: " + "1" * 32 + "\n") == {"n": int("1" * 32)}
    with pytest.raises(YamlInputError) as refused:
        load_yaml("l: [" + "1" * 33 + ", 1]\n")
    assert refused.value.path == ("l", 0)
    assert refused.value.line == 1
    assert refused.value.reason == "an integer of 33 characters (at most 32), line 1"


def test_keys_after_a_merge_are_checked_too() -> None:
    """docs/control.md: "a key given twice in one mapping is an error rather than the last
    one silently winning", whatever comes before it, a ``<<`` merge included."""
    with pytest.raises(YamlInputError) as refused:
        load_yaml("<<: {a: 1}\nb: 1\nb: 2\n")
    assert refused.value.path == ()
    assert refused.value.reason == "key 'b' is given twice, on lines 2 and 3"


def test_a_place_under_a_key_that_is_not_a_scalar_is_named_by_a_question_mark() -> None:
    """A complex key (YAML's ``? key``) has no name a dotted path can hold: ``?`` stands for
    it, as YAML writes it."""
    with pytest.raises(YamlInputError) as refused:
        load_yaml("? [a]\n: {x: 1, x: 2}\n")
    assert refused.value.path == ("?",)
    assert refused.value.line == 2
    assert str(refused.value) == "?: key 'x' is given twice, on lines 2 and 2"


def test_a_scalar_of_a_tag_safe_yaml_does_not_build_is_refused_in_one_line() -> None:
    """docs/control.md: files and uploads are read as safe YAML; a tag it does not build is
    the file's mistake, reported in one line (docs/serve.md), never a crash of the reader."""
    with pytest.raises(YamlInputError, match=r"^not valid YAML: could not determine a constructor"):
        load_yaml("a: !!python/name:os.system\n")


@pytest.mark.parametrize(
    "text",
    [
        "omap: !!omap [{a: 1}, {b: 2}]\n",
        "pairs: !!pairs [{a: 1}]\n",
        "set: !!set {a, b}\n",
        "<<: {a: 1}\nb: 2\n",
    ],
)
def test_what_only_pyyamls_constructor_builds_is_built_by_it_alone(text: str) -> None:
    """Each kind only PyYAML's constructor builds, in a document of its own: the values are
    still PyYAML's safe loader's (an ordered map is a list of pairs, a set a set)."""
    ours = load_yaml(text)
    assert ours == yaml.safe_load(text)
    assert pickle.dumps(ours) == pickle.dumps(yaml.safe_load(text))


PLAIN = [text for text in DOCUMENTS if "<<" not in text and "!!set" not in text]


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_document_is_built_without_pyyamls_constructor(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """forewarn.yaml_files: strings, safe YAML's scalars, lists and mappings are built by its
    own walk, "in a third of its time" (a large fleet file is read at every start); only the
    rest goes to PyYAML's constructor, which the test takes away here."""
    expected = yaml.safe_load(text)

    def no_constructor(*_: object) -> None:
        raise AssertionError("PyYAML's constructor was used")

    monkeypatch.setattr(yaml_files._LOADER, "construct_document", no_constructor)
    assert load_yaml(text) == expected


#: Documents of strings, implicit scalars, lists and mappings only, nested to the bound.
FROM_EVENTS = [
    text
    for text in PLAIN
    if text.strip() and not any(mark in text for mark in ("&", "*", "!", "1: ", "# "))
] + ["a: " + "[" * 30 + "{b: 1}" + "]" * 30 + "\n", "l: [" + "1" * 32 + ", 2]\n"]


@pytest.mark.parametrize("text", FROM_EVENTS)
def test_a_plain_document_is_built_from_the_parsers_events_without_a_node_tree(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """forewarn.yaml_files._plain_document: a document of strings, implicit scalars, lists and
    mappings is built from the parser's events, checked on the way; no node tree is composed
    (the test takes the composer away) nor any value built by PyYAML's constructor."""
    expected = yaml.safe_load(text)

    def no_tree(*_: object) -> None:
        raise AssertionError("a node tree was composed")

    monkeypatch.setattr(yaml_files._LOADER, "get_single_node", no_tree)
    monkeypatch.setattr(yaml_files._LOADER, "construct_document", no_tree)
    ours = load_yaml(text)
    assert pickle.dumps(ours) == pickle.dumps(expected)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\n",  # an anchor
        "a: !!str 1\n",  # a tag
        "a: ! 1\n",  # the non-specific tag
        "a: [! b]\n",
        "a: !!map {}\n",
        "a: !!seq []\n",
        "<<: {a: 1}\n",  # a merge
        "a: 1\nb: 2\na: 3\n",  # a key given twice
        "1: a\n1.0: b\n",  # a key equal to an earlier one
        "? [a]\n: 1\n",  # a collection as a key
        "? {a: 1}\n: 1\n",
        "a: " + "[" * 32 + "]" * 32 + "\n",  # past the nesting bound
        "a: {b: " + "[" * 31 + "]" * 31 + "}\n",
        "n: " + "1" * 33 + "\n",  # a long integer
        "a: 2024-13-45\n",  # a value its scalar's constructor refuses
        "a: 1\n---\nb: 2\n",  # two documents
        "",  # none
        "a: [1\n",  # not YAML
        "a: b: c\n",
    ],
)
def test_anything_else_leaves_the_events_for_the_node_tree(text: str) -> None:
    """Whatever the events alone do not build exactly as the tree does, or a bound refuses, is
    left to the tree (composed, checked, built), which refuses it at its place as ever."""
    loader = yaml_files._LOADER(text)
    try:
        with pytest.raises(yaml_files._NotPlainError):
            yaml_files._plain_document(loader, budget=1000)
    finally:
        loader.dispose()


def test_the_events_keep_the_budget_of_values() -> None:
    """Without an alias a document's values are its nodes, each counted against the budget
    as the walk of the tree counts them: exactly the budget is built, one more left to it."""
    text = "{a: [1, 2], b: c}\n"  # the mapping, two keys, a list of two, a string: 7

    def built(budget: int) -> Any:
        loader = yaml_files._LOADER(text)
        try:
            return yaml_files._plain_document(loader, budget)
        finally:
            loader.dispose()

    assert built(7) == {"a": [1, 2], "b": "c"}
    with pytest.raises(yaml_files._NotPlainError):
        built(6)


def test_a_key_given_twice_is_refused_though_an_earlier_value_is_not_built() -> None:
    """A bound's refusal comes before any value is built (the tree is checked first): a key
    given twice is the refusal even where a value before it is one no date can be."""
    with pytest.raises(YamlInputError) as refused:
        load_yaml("a: 2024-13-45\na: 1\n")
    assert str(refused.value) == "key 'a' is given twice, on lines 1 and 2"


def test_without_libyaml_a_deep_document_is_the_nesting_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without libyaml, PyYAML's own composer recurses once per level and runs out of stack
    before the walk can count: that is the same refusal, at the top, never a RecursionError
    (forewarn.nesting: MAX_NESTING is every reader's bound)."""
    monkeypatch.setattr(yaml_files, "_LOADER", yaml.SafeLoader)
    with pytest.raises(YamlInputError) as refused:
        load_yaml("[" * 3000 + "]" * 3000)
    assert refused.value.path == ()
    assert refused.value.line == 1
    assert str(refused.value) == "nested deeper than 32 levels"


#: An alias: the document goes to the node tree, whose walk (yaml_files._check) keeps the bounds.
_ALIASED = "x: &a 0\ny: *a\nz: "


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("[" * 31 + "]" * 31, "nested deeper than 32 levels"),
        ("{a: " * 31 + "1" + "}" * 31, "nested deeper than 32 levels"),
        ("1" * 32, "an integer of 33 characters (at most 32)"),
    ],
)
def test_the_node_tree_reads_exactly_the_bounds_and_refuses_one_more(
    value: str, reason: str
) -> None:
    """forewarn.nesting: 32 levels (the document's own mapping one of them); docs/control.md:
    "integers of at most 32 characters": kept alike by the tree a document with an alias is
    composed into, exactly the bound read, one more refused."""
    text = _ALIASED + value + "\n"
    assert load_yaml(text) == yaml.safe_load(text)
    one_more = _ALIASED + value.replace("1", "11", 1).replace("[", "[[", 1).replace("]", "]]", 1)
    one_more = one_more.replace("{a: ", "{a: {a: ", 1).replace("}", "}}", 1) + "\n"
    with pytest.raises(YamlInputError) as refused:
        load_yaml(one_more)
    assert refused.value.reason.startswith(reason)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: 1\nb: 2024-13-45\n", 2),  # read from the parser's events, then the node tree
        ("base: &b {x: 1}\nc:\n  <<: *b\n  d: 2024-02-30\n", 1),  # a merge: PyYAML builds it
    ],
)
def test_a_timestamp_that_is_no_date_is_refused_in_one_line(text: str, line: int) -> None:
    """YAML's timestamp type (https://yaml.org/type/timestamp.html) reads ``2024-13-45`` as
    a date; the date cannot be made, which is refused as any other bad text is, not raised
    as Python's ValueError."""
    with pytest.raises(YamlInputError) as refused:
        load_yaml(text)
    assert refused.value.line == line
    assert refused.value.path == ()  # no value was built: the document has no path yet
    assert refused.value.reason.startswith("not valid YAML: ")
    assert "\n" not in str(refused.value)
    if line > 1:
        assert refused.value.reason == (
            "not valid YAML: '2024-13-45' is not a timestamp (month must be in 1..12), line 2"
        )

"""The values :func:`forewarn.yaml_files.load_yaml` builds are PyYAML's safe loader's,
whichever of its two ways builds them (its own walk for strings, scalars, lists and
mappings; PyYAML's constructor for the rest), and its refusals name the same place."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import yaml

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
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_values_are_pyyamls(text: str) -> None:
    ours = load_yaml(text)
    theirs = yaml.safe_load(text)
    assert ours == theirs
    assert pickle.dumps(ours) == pickle.dumps(theirs)  # types and shared values alike


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

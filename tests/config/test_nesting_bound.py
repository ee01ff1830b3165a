"""One nesting bound for everything forewarn reads and did not write (forewarn.nesting).

The project's standards: "Untrusted input (HTTP bodies, headers, queries, config files,
journal records) is bounded and validated". A 200 KB line of ``[`` made ``json.loads``
raise ``RecursionError``, which no reader caught: the readers of YAML, of journal records
and of JSON now share :data:`~forewarn.nesting.MAX_NESTING` [ours] and agree on it to the
level: what one keeps, the others keep; one level more, all refuse.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import yaml

from forewarn.nesting import MAX_NESTING, NestingError, check_json_nesting, load_json
from forewarn.scenario.client import ControlClient, ControlError
from forewarn.storage.errors import NotSerializableError
from forewarn.storage.journal import decode_record, encode_record
from forewarn.yaml_files import YamlInputError, load_yaml


def _lists(levels: int, innermost: Any) -> Any:
    value = innermost
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("innermost", [[], 1], ids=["empty", "holding-a-number"])
def test_yaml_json_and_journal_records_keep_the_bound_and_refuse_one_more(
    innermost: Any,
) -> None:
    at_bound = {"x": _lists(MAX_NESTING - 1 - (innermost == []), innermost)}
    past = {"x": _lists(MAX_NESTING - (innermost == []), innermost)}
    text = json.dumps(at_bound)
    assert load_json(text) == at_bound
    assert load_yaml(text) == at_bound  # JSON is YAML
    assert decode_record(encode_record(at_bound), 1, "memory journal") == at_bound

    deeper = json.dumps(past)
    with pytest.raises(NestingError, match="nested deeper than 32 levels"):
        load_json(deeper)
    with pytest.raises(YamlInputError, match="nested deeper than 32 levels"):
        load_yaml(deeper)
    with pytest.raises(NotSerializableError, match="nested deeper than 32 levels"):
        encode_record(past)


def _yaml_mappings(levels: int) -> str:
    """``levels`` block mappings, each holding the next, the innermost a number."""
    lines = [" " * (2 * level) + f"k{level}:" for level in range(levels)]
    return "\n".join(lines) + " 1\n"


def _yaml_flow(levels: int) -> str:
    """``levels`` flow collections, mappings and sequences by turns, the innermost a number."""
    opening = "".join("{k: " if level % 2 else "[" for level in range(levels))
    closing = "".join("}" if level % 2 else "]" for level in reversed(range(levels)))
    return opening + "1" + closing + "\n"


def _yaml_block_sequences(levels: int) -> str:
    """``levels`` block sequences, one inside another on one line (``- - - 1``)."""
    return "- " * levels + "1\n"


YAML_SHAPES = [_yaml_mappings, _yaml_flow, _yaml_block_sequences]


def test_the_bound_is_the_documented_32() -> None:
    """docs/control.md, "Scenarios": "The YAML itself is read bounded ...: mappings and
    sequences nested at most 32 deep"; docs/record-replay.md: a trace's "JSON nested deeper
    than 32 levels" is refused."""
    assert MAX_NESTING == 32


@pytest.mark.parametrize("shape", YAML_SHAPES, ids=lambda shape: shape.__name__)
def test_yaml_of_exactly_max_nesting_levels_is_read_and_one_more_refused(shape: Any) -> None:
    """docs/control.md, "Scenarios": "mappings and sequences nested at most 32 deep", in
    every way YAML writes them: MAX_NESTING levels read as PyYAML's safe loader reads them,
    MAX_NESTING + 1 refused naming the bound and the line of the collection past it."""
    at_bound = shape(MAX_NESTING)
    assert load_yaml(at_bound) == yaml.safe_load(at_bound)
    with pytest.raises(YamlInputError) as refused:
        load_yaml(shape(MAX_NESTING + 1))
    assert refused.value.reason == (f"nested deeper than 32 levels, line {refused.value.line}")
    expected_line = MAX_NESTING + 1 if shape is _yaml_mappings else 1
    assert refused.value.line == expected_line


def test_a_merge_adds_no_level() -> None:
    """A ``<<`` merge's keys are the mapping's own (YAML's merge key type), so a mapping
    merged in at the bound is as deep as the mapping merging it."""
    base = "base: &b {x: 1}\n"
    merged = _yaml_mappings(MAX_NESTING - 1).replace(" 1\n", "\n")
    indent = " " * (2 * (MAX_NESTING - 1))
    text = base + merged + f"{indent}<<: *b\n{indent}y: 2\n"
    assert load_yaml(text) == yaml.safe_load(text)


def _json_objects(levels: int) -> str:
    return '{"k": ' * levels + "1" + "}" * levels


def _json_arrays(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def _json_mixed(levels: int) -> str:
    opening = "".join('{"k": ' if level % 2 else "[" for level in range(levels))
    closing = "".join("}" if level % 2 else "]" for level in reversed(range(levels)))
    return opening + "1" + closing


@pytest.mark.parametrize(
    "shape", [_json_objects, _json_arrays, _json_mixed], ids=lambda shape: shape.__name__
)
def test_json_of_exactly_max_nesting_levels_is_read_and_one_more_refused(shape: Any) -> None:
    """docs/record-replay.md: a trace's "JSON nested deeper than 32 levels" is refused; 32
    levels of objects, arrays or both are read, and a 33rd refused before decoding."""
    at_bound = shape(MAX_NESTING)
    check_json_nesting(at_bound)
    assert load_json(at_bound) == json.loads(at_bound)
    # the same depth in a text opening more brackets than the bound (no shortcut decides)
    beside = f"[{shape(MAX_NESTING - 1)}, []]"
    assert load_json(beside) == json.loads(beside)
    with pytest.raises(NestingError, match=r"^nested deeper than 32 levels$"):
        check_json_nesting(shape(MAX_NESTING + 1))


def test_depth_is_counted_along_one_path_not_over_the_whole_text() -> None:
    """Two nests of MAX_NESTING - 1 side by side in one array are MAX_NESTING deep, though
    the text opens twice as many brackets: the bound is on nesting, not on size."""
    inner = _json_arrays(MAX_NESTING - 1)
    text = f"[{inner}, {inner}]"
    assert text.count("[") > MAX_NESTING
    assert load_json(text) == json.loads(text)
    assert load_yaml(text) == json.loads(text)
    deeper = f"[{inner}, [{inner}]]"
    with pytest.raises(NestingError):
        load_json(deeper)
    with pytest.raises(YamlInputError, match="nested deeper than 32 levels"):
        load_yaml(deeper)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000,  # the hostile run's line: unclosed
        "[" * 50_000 + "]" * 50_000,
        '{"a":' * 5_000 + "1" + "}" * 5_000,
        b"[" * 200_000,
    ],
)
def test_deep_json_is_a_value_error_never_a_recursion_error(text: str | bytes) -> None:
    with pytest.raises(ValueError, match="nested deeper than 32 levels"):
        load_json(text)


@pytest.mark.parametrize(
    "text",
    [
        '["' + "[" * 1_000 + '"]',  # brackets in a string are text
        '["\\"' + "{" * 1_000 + '"]',  # after an escaped quote, still the string
        json.dumps([{"Resources": ["[" * 40]} for _ in range(100)]),
    ],
)
def test_brackets_inside_strings_do_not_count(text: str) -> None:
    check_json_nesting(text)
    assert load_json(text) == json.loads(text)


def test_what_is_not_json_is_left_to_the_decoder() -> None:
    with pytest.raises(json.JSONDecodeError):
        load_json("[1, 2")
    with pytest.raises(ValueError, match="NaN is not allowed"):
        load_json("[NaN]", parse_constant=_refuse)
    assert load_json(b"\xef\xbb\xbf[1]") == [1]  # bytes decoded as json.loads decodes them


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def test_a_control_api_answer_nested_too_deep_is_one_control_error() -> None:
    """What answers at a ``--control`` address is read as untrusted: the CLI's and the
    scenario runner's client refuse deep JSON as any answer that is no JSON."""
    deep = httpx.MockTransport(lambda request: httpx.Response(200, content=b"[" * 200_000))
    client = ControlClient(httpx.Client(transport=deep, base_url="http://127.0.0.1:16955"))
    with pytest.raises(ControlError) as refused:
        client.get("/vms")
    assert str(refused.value) == (
        "http://127.0.0.1:16955/api/v1/vms did not answer JSON; is it forewarn?"
    )


def test_a_text_whose_every_bracket_is_inside_a_string_is_read() -> None:
    """More brackets than the bound, none of them nesting: a JSON string alone, its brackets
    text, is read as the decoder reads it (nothing to count is nothing deep)."""
    text = '"' + "[" * (MAX_NESTING + 8) + '"'
    check_json_nesting(text)
    assert load_json(text) == "[" * (MAX_NESTING + 8)


def test_bytes_holding_a_lone_surrogate_are_decoded_as_json_loads_decodes_them() -> None:
    """``load_json``'s contract: bytes are decoded as ``json.loads`` decodes them, which
    lets a UTF-8-encoded lone surrogate through (``surrogatepass``) for the reader to judge
    (the journal refuses such text by name: forewarn.storage.journal)."""
    encoded = b'["\xed\xa0\x80"]'
    assert load_json(encoded) == json.loads(encoded) == ["\ud800"]

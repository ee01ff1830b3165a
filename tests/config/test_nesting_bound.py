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

"""A stored record is read as untrusted input: a JSON object within the bound writes keep.

The project's standards: "Untrusted input (HTTP body, header, query, config file, journal
record) is bounded and validated". A journal's file or table can be edited or damaged: what
comes back that no append could have written is refused, naming the record, never raised
as whatever the JSON decoder or a command would raise (issue text: a record body that is not
JSON gave raw tracebacks from ``serve`` and ``store check``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from forewarn.nesting import MAX_NESTING
from forewarn.storage import MAX_RECORD_BYTES
from forewarn.storage.errors import CorruptRecordError, CorruptStoreError, NotSerializableError
from forewarn.storage.journal import check_after, decode_record, encode_record


@pytest.mark.parametrize(
    ("stored", "says"),
    [
        ('{"op": "restart"', "its body is not JSON"),
        ("[1, 2]", "its body is a JSON array, not an object"),
        ('"restart"', "its body is a JSON string, not an object"),
        ("null", "its body is a JSON null, not an object"),
        ('{"at": NaN}', "its body is not JSON (NaN is not a JSON value)"),
        ('{"at": Infinity}', "its body is not JSON (Infinity is not a JSON value)"),
        ("[" * 100_000 + "]" * 100_000, "its body is not JSON (nested deeper than 32 levels)"),
        ('{"x":' * 33 + "1" + "}" * 33, "its body is not JSON (nested deeper than 32 levels)"),
        (b'{"op": "restart"}', "its body is binary data, not JSON text"),
        (7, "its body is a number, not JSON text"),
        (["op"], "its body is a list, not JSON text"),  # a kind no column holds: named as is
        ('{"pad": "' + "x" * MAX_RECORD_BYTES + '"}', "characters long, over 1048576 bytes"),
    ],
)
def test_a_body_no_append_writes_is_refused_naming_its_record(stored: object, says: str) -> None:
    with pytest.raises(CorruptRecordError) as refused:
        decode_record(stored, 12, "SQLite journal /data/forewarn.sqlite3")
    assert refused.value.position == 12
    assert says in refused.value.reason
    assert str(refused.value).startswith("SQLite journal /data/forewarn.sqlite3: record 12: ")
    assert "\n" not in str(refused.value)
    assert isinstance(refused.value, CorruptStoreError)


def test_what_an_append_writes_reads_back() -> None:
    record = {"op": "restart", "at": "2022-04-11T22:11:58+00:00", "vm": "WestNO_0", "n": 2.5}
    assert decode_record(encode_record(record), 1, "memory journal") == record


def _nested(levels: int, container: str) -> dict[str, Any]:
    """A record holding ``levels`` objects (or arrays) one inside the other."""
    inner: Any = 1
    for _ in range(levels):
        inner = {"x": inner} if container == "object" else [inner]
    return {"x": inner}


@pytest.mark.parametrize("container", ["object", "array"])
def test_a_record_nested_32_levels_is_kept_and_one_more_is_refused(container: str) -> None:
    """[ours] (``MAX_NESTING``, the bound YAML files and every JSON reader share): a
    command's fields are flat, so deep nesting is refused before the JSON encoder recurses
    into it; the bound itself is kept, in objects and arrays alike, and what is written at
    the bound reads back (the record and ``levels`` containers inside it)."""
    kept = _nested(MAX_NESTING - 1, container)
    assert decode_record(encode_record(kept), 1, "memory journal") == kept
    with pytest.raises(NotSerializableError) as refused:
        encode_record(_nested(MAX_NESTING, container))
    assert str(refused.value) == "record nested deeper than 32 levels"
    assert MAX_NESTING == 32


@pytest.mark.parametrize(
    ("record", "said"),
    [
        (["op"], "a record is a JSON object, not a list"),
        ({"vms": {"1": {2: "x"}}}, "record key 2 is not a string"),  # json.dumps: "2"
        ({"vms": [{"at": math.inf}]}, "record holds inf, which JSON cannot represent"),
        ({"vm": "WestNO_\ud800"}, "record holds a string that is not valid Unicode"),
    ],
)
def test_a_record_that_would_not_read_back_as_written_is_refused_saying_why(
    record: Any, said: str
) -> None:
    """[ours]: a record is kept only if replay gives back exactly what was appended, at any
    depth: JSON turns an int key into a string, and holds no infinity."""
    with pytest.raises(NotSerializableError) as refused:
        encode_record(record)
    assert str(refused.value) == said


@pytest.mark.parametrize("after", [True, -1, 1.0, "1"])
def test_a_position_to_read_after_is_a_sequence_number(after: Any) -> None:
    """[ours] ``records(after=...)``: a bool is an int to Python, but no sequence number."""
    said = f"after must be a sequence number >= 0, not {after!r}"
    with pytest.raises(ValueError, match="after must be") as refused:
        check_after(after)
    assert str(refused.value) == said

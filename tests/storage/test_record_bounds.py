"""A stored record is read as untrusted input: a JSON object within the bound writes keep.

The project's standards: "Untrusted input (HTTP body, header, query, config file, journal
record) is bounded and validated". A journal's file or table can be edited or damaged: what
comes back that no append could have written is refused, naming the record, never raised
as whatever the JSON decoder or a command would raise (issue text: a record body that is not
JSON gave raw tracebacks from ``serve`` and ``store check``).
"""

from __future__ import annotations

import pytest

from forewarn.storage import MAX_RECORD_BYTES
from forewarn.storage.errors import CorruptRecordError, CorruptStoreError
from forewarn.storage.journal import decode_record, encode_record


@pytest.mark.parametrize(
    ("stored", "says"),
    [
        ('{"op": "restart"', "its body is not JSON"),
        ("[1, 2]", "its body is a JSON array, not an object"),
        ('"restart"', "its body is a JSON string, not an object"),
        ("null", "its body is a JSON null, not an object"),
        ('{"at": NaN}', "its body is not JSON (NaN is not a JSON value)"),
        ('{"at": Infinity}', "its body is not JSON (Infinity is not a JSON value)"),
        ("[" * 100_000 + "]" * 100_000, "its body is not JSON (nested too deeply)"),
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

"""The trace format (docs/record-replay.md): versioned, and every mistake one message naming
the file and the line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from forewarn.trace.format import (
    MAX_LINE_BYTES,
    TRACE_VERSION,
    DocumentRecord,
    TraceError,
    document_line,
    format_time,
    load_trace,
    parse_trace,
    start_line,
)

AT = datetime(2026, 4, 20, 22, 11, 58, 250000, tzinfo=UTC)
START = start_line(
    AT,
    endpoint="http://169.254.169.254",
    api_version="2020-07-01",
    recorder="forewarn 0.1.0",
    approve_after=None,
    max_bytes=1000,
    compute={"name": "WestNO_0"},
)
EMPTY = document_line(AT, 200, {"ETag": '"1"'}, '{"DocumentIncarnation":1,"Events":[]}')


def test_a_trace_reads_back_what_was_written() -> None:
    trace = parse_trace(START + EMPTY, "t.trace")
    assert trace.start.at == AT.replace(microsecond=250000)
    assert trace.vm_name == "WestNO_0"
    (document,) = trace.documents
    assert isinstance(document, DocumentRecord)
    assert (document.line, document.incarnation, document.events) == (2, 1, ())
    assert document.header("etag") == '"1"'
    assert json.loads(START)["forewarnTrace"] == TRACE_VERSION == 1
    assert format_time(AT) == "2026-04-20T22:11:58.250Z"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (b"", "t.trace: empty, not a forewarn trace"),
        (b"hello\n", "t.trace:1: not a JSON object"),
        (b"[1]\n", "t.trace:1: not a JSON object"),
        (b'{"kind": "start"}\n', 't.trace:1: not a forewarn trace: its first line has no "forewarnTrace": 1'),
        (b'{"forewarnTrace": 2, "kind": "start"}\n', "t.trace:1: a version 2 trace; this forewarn reads version 1"),
        (START.replace(b'"endpoint"', b'"place"'), "t.trace:1: a start line needs 'endpoint'"),
        (START + b'{"kind": "document"}\n', "t.trace:2: a document line needs 'at'"),
        (START + b'\n{"kind": "note", "at": "2026-04-20T22:11:59Z"}\n', "t.trace:3: unknown kind 'note'"),
        (START + b'{"kind": "resume", "at": "yesterday"}\n', "t.trace:2: 'at' is not an ISO 8601 time"),
        (START + b'{"kind": "resume", "at": "2026-04-20T22:11:59"}\n', "t.trace:2: 'at' has no time zone"),
        (START + b'{"kind": "resume", "at": "2026-04-20T22:11:57Z"}\n', "t.trace:2: its time goes back"),
        (START + START, "t.trace:2: a second start line"),
        (START + EMPTY.replace(b'"status":200', b'"status":304'), "t.trace:2: a document line holds a 200 answer, not 304"),
        (START + EMPTY.replace(b'"status":200', b'"status":true'), "t.trace:2: 'status' has the wrong type (bool)"),
        (START + document_line(AT, 200, {}, "{"), "t.trace:2: the body is not a JSON document"),
        (START + document_line(AT, 200, {}, '{"Events": []}'), "t.trace:2: the body has no integer DocumentIncarnation"),
        (START + document_line(AT, 200, {}, '{"DocumentIncarnation": 1, "Events": [1]}'), "t.trace:2: the body's Events is not a list of events"),
        (START + b'{"kind": "approval", "at": "2026-04-20T22:11:59Z", "eventIds": [1]}\n', "t.trace:2: 'eventIds' is a list of EventIds"),
        (START + b"\xff\n", "t.trace:2: not UTF-8 text"),
        (START + b"{" + b" " * MAX_LINE_BYTES + b"}\n", f"t.trace:2: longer than {MAX_LINE_BYTES} bytes"),
        # A 200 KB line of "[" was a RecursionError traceback (forewarn.nesting):
        (START + b"[" * 200_000 + b"\n", "t.trace:2: not a JSON object: nested deeper than 32 levels"),
        (START + document_line(AT, 200, {}, "[" * 200_000), "t.trace:2: the body is not a JSON document (nested deeper than 32 levels)"),
    ],
)  # fmt: skip
def test_a_malformed_trace_is_one_message_naming_the_line(lines: bytes, message: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse_trace(lines, "t.trace")
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unreadable_file_is_one_message(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"missing\.trace: cannot be read: No such file"):
        load_trace(tmp_path / "missing.trace")

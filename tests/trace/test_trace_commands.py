"""``forewarn record``, ``forewarn replay`` and ``scenario from-trace`` refuse what they cannot
use with one line and exit status 1, never a traceback (docs/record-replay.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from forewarn.cli import main

from .trace_support import EXAMPLE


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


def test_a_malformed_trace_is_one_line_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.trace"
    lines = EXAMPLE.read_bytes().splitlines(keepends=True)
    bad.write_bytes(b"".join(lines[:2]) + b'{"kind": "document", "at": 1}\n' + b"".join(lines[2:]))
    expected = f"Error: {bad}:3: 'at' has the wrong type (int)\n"
    assert run("replay", str(bad)) == (1, expected)
    assert run("scenario", "from-trace", str(bad)) == (1, expected)
    assert run("record", "--out", str(bad), "--endpoint", "http://127.0.0.1:9") == (1, expected)


def test_a_missing_trace_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.trace"
    code, stderr = run("replay", str(missing))
    assert (code, stderr) == (1, f"Error: {missing}: cannot be read: No such file or directory\n")


def test_record_refuses_polling_over_the_rate_limit(tmp_path: Path) -> None:
    code, stderr = run("record", "--out", str(tmp_path / "t"), "--interval", "0.1s")
    assert code == 2
    assert "over the IMDS rate limit" in stderr
    assert not (tmp_path / "t").exists()


def test_a_line_nested_too_deep_is_one_line_naming_it(tmp_path: Path) -> None:
    """A 200 KB line of ``[`` was a ``RecursionError`` traceback from ``replay`` and
    ``scenario from-trace``, and ``record`` wrote "interrupted" over it: JSON past the
    nesting bound (forewarn.nesting) is a mistake of the line, as any other."""
    deep = tmp_path / "deep.trace"
    lines = EXAMPLE.read_bytes().splitlines(keepends=True)
    deep.write_bytes(b"".join(lines[:2]) + b"[" * 200_000 + b"\n" + b"".join(lines[2:]))
    expected = f"Error: {deep}:3: not a JSON object: nested deeper than 32 levels\n"
    assert run("replay", str(deep)) == (1, expected)
    assert run("scenario", "from-trace", str(deep)) == (1, expected)
    assert run("record", "--out", str(deep), "--endpoint", "http://127.0.0.1:9") == (1, expected)
    assert deep.read_bytes().endswith(b"".join(lines[2:]))  # nothing written to it


def test_a_document_nested_too_deep_is_one_line_from_a_real_process(tmp_path: Path) -> None:
    deep = tmp_path / "deep.trace"
    lines = EXAMPLE.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["body"] = "[" * 200_000
    deep.write_bytes(lines[0] + json.dumps(record).encode() + b"\n")
    ran = subprocess.run(
        [sys.executable, "-m", "forewarn", "scenario", "from-trace", str(deep)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr == (
        f"Error: {deep}:2: the body is not a JSON document (nested deeper than 32 levels)\n"
    )

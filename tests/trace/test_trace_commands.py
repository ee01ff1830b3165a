"""``forewarn record``, ``forewarn replay`` and ``scenario from-trace`` refuse what they cannot
use with one line and exit status 1, never a traceback (docs/record-replay.md)."""

from __future__ import annotations

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

"""The suite's one rule for what it needs from the machine (tests/support/machine_support.py,
docs/contributing.md "What a test needs from the machine"): under ``CI`` a missing tool that
``.ci/run`` provides fails the run naming it; on a developer's machine it skips with the reason."""

from __future__ import annotations

import machine_support
import pytest
from machine_support import require, require_postgres, require_tool, under_ci


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE"])
def test_ci_is_any_value_but_empty_or_false(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert under_ci()
    for off in ("", "0", "false", "no"):
        monkeypatch.setenv("CI", off)
        assert not under_ci()
    monkeypatch.delenv("CI")
    assert not under_ci()


def test_a_missing_tool_fails_under_ci_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no-such-tool-here is not installed"):
        require_tool("no-such-tool-here", "nothing needs it")
    with pytest.raises(pytest.fail.Exception, match="CI provides this, but: the reason"):
        require("the reason")
    require(None)  # nothing missing: the test goes on


def test_a_missing_tool_skips_with_the_reason_on_a_developers_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-tool-here is not installed"):
        require_tool("no-such-tool-here", "nothing needs it")


def test_ci_without_postgresql_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(machine_support, "postgres_problem", lambda: "PostgreSQL at x is down")
    with pytest.raises(pytest.fail.Exception, match="PostgreSQL at x is down"):
        require_postgres()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL at x is down"):
        require_postgres()

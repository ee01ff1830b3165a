"""``forewarn scenario run|validate``: progress, a passing run, a failing one named precisely."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from forewarn.cli import main
from forewarn.testing import ForewarnPlatform

from .cli_support import EXAMPLES, START, Cli

LIVE_MIGRATION = EXAMPLES / "live-migration.yaml"


def _live_migration_cli() -> Cli:
    fleet = EXAMPLES / "fleet-live-migration.yaml"
    return Cli(ForewarnPlatform(fleet=fleet, start=START, profile="fast"))


def test_run_passes_with_a_progress_bar() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses", as
    a scenario (see the file)."""
    cli = _live_migration_cli()
    result = cli("scenario", "run", str(LIVE_MIGRATION))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{LIVE_MIGRATION}: all 12 steps passed\n"
    # The progress bar: drawn on a terminal; elsewhere click prints only its label.
    assert result.stderr == "live migration (documentation example)\n"


def test_run_fails_naming_the_step_and_expected_vs_actual(tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
    after the approval the document is incarnation 3; a scenario claiming 2 must fail there and say
    so."""
    wrong = tmp_path / "wrong.yaml"
    text = LIVE_MIGRATION.read_text(encoding="utf-8")
    wrong.write_text(
        text.replace("      incarnation: 3\n", "      incarnation: 2\n", 1), encoding="utf-8"
    )
    cli = _live_migration_cli()
    result = cli("scenario", "run", str(wrong))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    failed = next(line for line in lines if line.startswith("Error:"))
    assert failed == (
        f"Error: {wrong}: step 7 of 12 (incarnation 3, Started, NotBefore empty) failed: "
        "incarnation: expected 2, actual 3"
    )
    assert any(line.startswith("  expected: {'vm': 'WestNO_0'") for line in lines)
    assert any(
        line.startswith("  actual:   {") and "'DocumentIncarnation': 3" in line for line in lines
    )
    data = json.loads(_live_migration_cli()("scenario", "run", str(wrong), "-o", "json").stdout)
    assert (data["passed"], data["stepsRun"], data["failure"]["step"]) == (False, 6, 7)


def test_run_reports_an_api_error_as_the_failing_step(tmp_path: Path) -> None:
    """SPEC 6 [ours]: a step the control API refuses fails with its message."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  - advance: 1s\n  - host: {fail: h9}\n", encoding="utf-8")
    result = _live_migration_cli()("scenario", "run", str(bad))
    assert result.exit_code == 1
    assert (
        f"Error: {bad}: step 2 of 2 (host fail: h9) failed: 404: no virtual machine runs on host 'h9'"
        in result.stderr
    )


def test_run_in_process_needs_no_server() -> None:
    """SPEC 6 [ours]: `--in-process` builds the scenario's fleet on a manual clock."""
    result = CliRunner().invoke(
        main, ["scenario", "run", "--in-process", str(EXAMPLES / "every-operation.yaml")]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("steps passed\n")


def test_schema_errors_name_file_step_and_field(tmp_path: Path) -> None:
    """SPEC 6 [ours]: a scenario mistake names the file, the step and the field."""
    bad = tmp_path / "typo.yaml"
    bad.write_text("steps:\n  - advance: 1s\n  - expect: {vm: a, events: [{EventTyp: Freeze}]}\n")
    for command in (["scenario", "validate"], ["scenario", "run"]):
        result = CliRunner().invoke(main, [*command, str(bad)])
        assert result.exit_code == 1
        assert result.stderr == (
            f"Error: {bad}: step 2 (expect): events.0: unknown field 'EventTyp' "
            "(did you mean 'EventType'?)\n"
        )
    assert CliRunner().invoke(main, ["scenario", "validate", str(LIVE_MIGRATION)]).stdout == (
        f"{LIVE_MIGRATION}: 'live migration (documentation example)', 12 step(s), valid\n"
    )
    missing = CliRunner().invoke(main, ["scenario", "run", str(tmp_path / "none.yaml")])
    assert missing.exit_code == 1
    assert "cannot be read" in missing.stderr

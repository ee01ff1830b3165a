"""The propagation scenario: three front-ends on one PostgreSQL namespace, a change through
one, the first answer of another that shows it (docs/scale-out.md: whatever is done through
any front-end "shows in every front-end's next response").

Figures from runs this short are not quoted; what is asserted is that every change was made,
awaited and counted, and that a change never shown is a miss, not a figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_support import require_postgres

from bench.propagation import (
    Sample,
    fleet_yaml,
    run_propagation,
    summarise,
)
from bench.report import table, targets
from forewarn.config.fleet import parse_fleet


def test_each_pair_is_an_availability_set_of_two_at_their_own_addresses() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events: every VM of an
    availability set sees the set's events, so the restarted VM's partner is the one asked while the
    restarted VM is down."""
    fleet = parse_fleet(fleet_yaml(3), "generated")
    assert [(vm.name, vm.address) for vm in fleet.vms] == [
        ("set0000-a", "127.3.0.1"),
        ("set0000-b", "127.3.0.2"),
        ("set0001-a", "127.3.0.3"),
        ("set0001-b", "127.3.0.4"),
        ("set0002-a", "127.3.0.5"),
        ("set0002-b", "127.3.0.6"),
    ]
    assert fleet.vms[0].availability_set == fleet.vms[1].availability_set == "set0000"


def test_a_change_never_shown_is_a_miss_and_a_missed_target() -> None:
    samples = [
        Sample("operation", 0, 1, change_ms=4.0, latency_ms=6.0, first_answer_stale=False),
        Sample("approval", 1, 2, change_ms=2.0, latency_ms=3.0, first_answer_stale=True),
        Sample("operation", 1, 2, change_ms=5.0, latency_ms=None, first_answer_stale=True),
    ]
    result = summarise(samples, 3, timeout=5.0)
    assert (result.samples, result.shown, result.missed) == (3, 2, 1)
    assert (result.p50_ms, result.p99_ms, result.max_ms) == (3.0, 6.0, 6.0)
    assert (result.operation_p99_ms, result.approval_p99_ms) == (6.0, 3.0)
    assert (result.change_p50_ms, result.change_p99_ms) == (4.0, 5.0)
    assert (result.after_answer_p50_ms, result.after_answer_p99_ms) == (1.0, 2.0)
    assert result.stale_first_answers == 2
    found = {target.name: target for target in targets({"propagation": result.summary()})}
    latency = found["a change through one of 3 front-ends, first shown by another, p99"]
    assert (latency.measured, latency.limit, latency.met) == (6.0, 50.0, True)
    missed = found["changes not shown by another front-end within 5 s"]
    assert (missed.measured, missed.met) == (1, False)
    assert "2/3 changes shown by another front-end" in table({"propagation": result.summary()})


def test_nothing_shown_gives_no_latency_figure() -> None:
    result = summarise([Sample("operation", 0, 1, 3.0, None, True)], 3, timeout=5.0)
    found = {target.name: target for target in targets({"propagation": result.summary()})}
    assert list(found) == [
        "changes not shown by another front-end within 5 s",
        "another front-end's first answer after a change's answer not showing it (stale)",
    ]
    assert (
        found[
            "another front-end's first answer after a change's answer not showing it (stale)"
        ].measured
        == 1
    )


@pytest.mark.e2e
def test_changes_through_each_front_end_are_shown_by_the_others(tmp_path: Path) -> None:
    postgres_url = require_postgres()
    result = run_propagation(tmp_path, postgres_url, samples=6)
    assert (result.front_ends, result.samples) == (3, 6)
    assert (result.shown, result.missed) == (6, 0)
    assert 0 < result.p50_ms <= result.p99_ms <= result.max_ms
    assert 0 < result.change_p50_ms <= result.change_p99_ms

"""The fleet-wide campaign with three front-ends sharing the fleet (docs/scale-out.md): every
VM reads its own Reboot through its own front-end and approves it there, and the events end
everywhere. Figures from a run this short are not quoted; what is asserted is that the
scenario did all of it, that the events scheduled at once went into one transaction and one
record, that the approvals of a turn went into one transaction and one record per front-end
(and one each when a turn holds one), and that its ratio and steps are the runs' times."""

from __future__ import annotations

import pytest
from postgres_support import require_postgres

from bench.cluster_campaign import APPROVALS_PER_TURN, FRONT_ENDS, run_cluster_campaign
from bench.report import table
from bench.scale import CAMPAIGN_PHASES

VMS = 60


def test_three_front_ends_run_the_whole_campaign_and_it_is_reported() -> None:
    postgres_url = require_postgres()
    result = run_cluster_campaign(VMS, postgres_url)
    assert (result.vms, result.front_ends) == (VMS, FRONT_ENDS)
    assert result.approvals_per_turn == APPROVALS_PER_TURN
    # the events scheduled at once, in one transaction and one group record (fewer than
    # MAX_GROUP); the approvals, 20 to a front-end, in one turn: one transaction and one
    # group record per front-end; the clock's two moves (time records may come beside them,
    # at most one with each transaction)
    assert 1 + FRONT_ENDS + 2 <= result.journal_records <= 2 * (1 + FRONT_ENDS + 2)
    assert 1 + FRONT_ENDS <= result.journal_transactions <= 1 + FRONT_ENDS + 2
    assert result.ratio_to_single_process == pytest.approx(
        result.campaign_seconds / result.single_process_seconds
    )
    assert tuple(result.phase_seconds) == CAMPAIGN_PHASES
    assert tuple(result.single_process_phase_seconds) == CAMPAIGN_PHASES
    assert sum(result.phase_seconds.values()) == pytest.approx(result.campaign_seconds)
    assert sum(result.single_process_phase_seconds.values()) == pytest.approx(
        result.single_process_seconds
    )
    text = table({"cluster_campaign": [result.__dict__], "machine": {}, "skipped": {}})
    assert "Campaign, 3 front-ends sharing 60 VMs" in text
    assert f"{APPROVALS_PER_TURN} approvals to a front-end and a turn" in text


def test_approvals_arriving_one_a_turn_are_each_their_own_transaction() -> None:
    result = run_cluster_campaign(VMS, require_postgres(), approvals_per_turn=1)
    assert result.approvals_per_turn == 1
    assert result.journal_transactions >= VMS + 1


def test_a_turn_holds_at_least_one_approval() -> None:
    with pytest.raises(ValueError, match="at least one"):
        run_cluster_campaign(VMS, "postgresql://unused", approvals_per_turn=0)

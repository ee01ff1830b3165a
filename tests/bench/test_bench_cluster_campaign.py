"""The fleet-wide campaign with three front-ends sharing the fleet (docs/scale-out.md): every
VM reads its own Reboot through its own front-end and approves it there, and the events end
everywhere. Figures from a run this short are not quoted; what is asserted is that the
scenario did all of it, and that its ratio is the two runs' times."""

from __future__ import annotations

import pytest
from postgres_support import require_postgres

from bench.cluster_campaign import FRONT_ENDS, run_cluster_campaign
from bench.report import table


def test_three_front_ends_run_the_whole_campaign_and_it_is_reported() -> None:
    postgres_url = require_postgres()
    result = run_cluster_campaign(60, postgres_url)
    assert (result.vms, result.front_ends) == (60, FRONT_ENDS)
    # one scheduled event and one approval a VM and the clock's move, each journaled (time
    # records may come beside them)
    assert result.journal_records >= 2 * 60 + 1
    assert result.ratio_to_single_process == pytest.approx(
        result.campaign_seconds / result.single_process_seconds
    )
    assert "Campaign, 3 front-ends sharing 60 VMs" in table(
        {"cluster_campaign": [result.__dict__], "machine": {}, "skipped": {}}
    )

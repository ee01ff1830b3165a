"""The soak: a shared fleet under load while faults drawn from a seed come and go.

The rules it holds, each from its source: nothing acknowledged lost and nothing refused
visible (README, "State that survives restarts"; docs/scale-out.md, "What a VM sees when
PostgreSQL restarts": changes "are refused with `503` until PostgreSQL is back, and nothing
is half applied"); every state an event reaches delivered at least once
(learn.microsoft.com/azure/event-grid/delivery-and-retry, "Event Grid message delivery and
retry"; docs/azure-side.md, "Event Grid"); an EventId names one event (SPEC 1, "globally
unique"); a VM's DocumentIncarnation never goes backwards (SPEC 2), on any front-end, across
its restarts; and a VM's poll is answered outside its impacts whatever the database does
(docs/scale-out.md: "reads never wait on the database").

``FOREWARN_SOAK_SECONDS`` sets the length (30 s by default, the form every test run
includes; ``FOREWARN_SOAK_SECONDS=600 pytest tests/soak`` is the long one) and
``FOREWARN_SOAK_SEED`` the seed (drawn afresh otherwise; a failure prints it and the faults'
timeline). The run and its checks: fleet_soak.py.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from .fleet_soak import soak_run

SECONDS = float(os.environ.get("FOREWARN_SOAK_SECONDS") or 30)
SEED = int(os.environ.get("FOREWARN_SOAK_SEED") or random.SystemRandom().randrange(10**6))


@pytest.mark.soak
@pytest.mark.e2e
def test_a_shared_fleet_keeps_its_rules_through_faults_drawn_from_a_seed(
    tmp_path: Path, soak_store: str
) -> None:
    with soak_run(SEED, SECONDS, tmp_path, soak_store) as soak:
        try:
            soak.up()
            soak.run()
            soak.check()
        finally:
            print(soak.report())
    assert not soak.violations, soak.report()

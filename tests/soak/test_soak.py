"""The soak: a shared fleet under load while faults drawn from a seed come and go.

The rules it holds, each from its source: nothing acknowledged lost and nothing refused
visible (docs/serve.md, "State that survives restarts"; docs/scale-out.md, "What a VM sees when
PostgreSQL restarts": changes "are refused with `503` until PostgreSQL is back, and nothing
is half applied"); every state an event reaches delivered at least once
(learn.microsoft.com/azure/event-grid/delivery-and-retry, "Event Grid message delivery and
retry"; docs/azure-side.md, "Event Grid"); an EventId names one event (SPEC 1, "globally
unique"); a VM's DocumentIncarnation never goes backwards (SPEC 2), on any front-end, across
its restarts; and a VM's poll is answered outside its impacts whatever the database does
(docs/scale-out.md: "reads never wait on the database").

Every test run includes the short form (:data:`SHORT_SECONDS` of faults, a seed drawn
afresh each time); ``FOREWARN_SOAK_SECONDS`` sets another length
(``FOREWARN_SOAK_SECONDS=600 pytest tests/soak``, the long form) and ``FOREWARN_SOAK_SEED``
the seed (a failure prints it, the command that replays it and the faults' timeline). The
run and its checks: fleet_soak.py.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from .fleet_soak import soak_run

#: The short form's faults, in seconds: a fault of most kinds in most draws, and about a
#: minute in all on two quiet cores (the fleet's start and the checks take the rest).
SHORT_SECONDS = 30.0
SECONDS = float(os.environ.get("FOREWARN_SOAK_SECONDS") or SHORT_SECONDS)
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

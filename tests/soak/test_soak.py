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

``FOREWARN_SOAK_SECONDS`` sets the length and runs it (:data:`SHORT_SECONDS` the short form,
``FOREWARN_SOAK_SECONDS=600 pytest tests/soak`` the long one: see OPT_IN) and
``FOREWARN_SOAK_SEED`` the seed (drawn afresh otherwise; a failure prints it and the faults'
timeline). The run and its checks: fleet_soak.py.
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


#: Why the default run leaves the soak out: writes to PostgreSQL wait on the event loop, up
#: to 2 s each (docs/scale-out.md, "A silent PostgreSQL": reads are "held up only while a
#: write waits, 2 s at most each"), so several in a row during a long silence hold a VM's
#: poll past its bound (:data:`fleet_soak.POLL_BOUND`), and a test that fails on some draws
#: would stop every change from landing. Once writes wait off the event loop, removing the
#: mark puts the short form in every run (docs/contributing.md, "The soak").
OPT_IN = (
    "the seeded soak runs when asked (FOREWARN_SOAK_SECONDS=30 pytest tests/soak): it still "
    'finds open defects for some seeds (docs/contributing.md, "The soak")'
)


@pytest.mark.soak
@pytest.mark.e2e
@pytest.mark.skipif(not os.environ.get("FOREWARN_SOAK_SECONDS"), reason=OPT_IN)
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

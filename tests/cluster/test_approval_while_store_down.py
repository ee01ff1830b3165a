"""A VM's approval while the shared PostgreSQL store is down: refused with 503, nothing kept.

docs/scale-out.md, "What a VM sees when PostgreSQL restarts": "a VM's approval, [is] refused
with `503` until PostgreSQL is back, and nothing is half applied. A client that retries on
errors, as the IMDS documentation advises, gets its approval through once it is." The text is
the IMDS family's for a 503, SPEC 1: "503 `Internal service unavailable. Retry later`"
(learn.microsoft.com/azure/load-balancer/troubleshoot-load-balancer-imds, "Error codes").
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from forewarn.commands import Restart
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.events import EventStatus
from forewarn.server.imds import SCHEDULED_EVENTS_PATH, ImdsEndpoint, ImdsRequest, ImdsResponse
from forewarn.server.runner import ServeSettings
from forewarn.server.state import OpenedState, open_state

#: WestNO_0's address in the cluster tests' fleet (tests/cluster/conftest.py).
WEST_NO_0 = "127.0.0.2"


def approve(endpoint: ImdsEndpoint, event_id: str) -> ImdsResponse:
    """WestNO_0 posts a StartRequest, as a handler on the VM does."""
    return endpoint.handle(
        ImdsRequest(
            method="POST",
            path=SCHEDULED_EVENTS_PATH,
            query=f"api-version={CURRENT_VERSION.name}",
            headers={"metadata": "true"},
            body=orjson.dumps({"StartRequests": [{"EventId": event_id}]}),
            local_address=WEST_NO_0,
            peer_address="127.0.0.1",
        )
    )


def test_an_approval_is_refused_with_503_while_the_store_is_down_and_passes_once_it_is_back(
    shared_store: str, fleet_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ServeSettings(fleet=fleet_file, clock="manual", store=shared_store, seed=3)
    state: OpenedState = open_state(settings)
    assert state.replica is not None
    journal = state.replica.journal
    try:
        (event,) = state.service.execute(Restart("WestNO_0"))
        endpoint = ImdsEndpoint(state.service)
        document = state.service.document_bytes("WestNO_0", CURRENT_VERSION)
        with monkeypatch.context() as patched:
            patched.setattr(journal, "_conninfo", "postgresql://postgres@127.0.0.1:1/test")
            journal._conn.close()  # as the server closes it when it goes down
            refused = approve(endpoint, event.event_id)
            assert (refused.status, orjson.loads(refused.body)) == (
                503,
                {"error": "Internal service unavailable. Retry later"},
            )
            assert state.service.document_bytes("WestNO_0", CURRENT_VERSION) == document
        assert approve(endpoint, event.event_id).status == 200  # the client's retry
        (view,) = state.service.events()
        assert view.event.status is EventStatus.STARTED  # the one VM it was for approved
    finally:
        journal.close()

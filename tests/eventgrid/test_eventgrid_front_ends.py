"""Event Grid with three front-ends on one PostgreSQL namespace: only the leader delivers.

[ours] (docs/azure-side.md, docs/scale-out.md): the subscriptions and pending deliveries are
the fleet's, in its database, whatever front-end was asked; deliveries are made by the one
front-end holding the leader lock, not by every front-end ("at least once", learn.microsoft.com
"Event Grid message delivery and retry", allows a second delivery across a change of leader,
not one per front-end).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from e2e_support import ForewarnServer, start_forewarn, wait_for
from eventgrid_support import receiver, subscribe, subscription
from postgres_support import require_postgres

from forewarn.storage.urls import postgres_target

pytestmark = pytest.mark.e2e

PUBLISHING = """
availabilitySets:
  - name: west
    faultDomains: 2
    scheduledEventsPolicy:
      scheduledEventsAdditionalPublishingTargets: {eventGridAndResourceGraph: {enable: true}}
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1, host: h2}
"""


def _namespace_url() -> str:
    return f"{require_postgres()}?namespace=eventgrid_{uuid.uuid4().hex[:12]}"


def _drop(url: str) -> None:
    """Remove what the namespace at ``url`` made: Event Grid's schema, named by the store
    itself (never by a copy of its naming here), and the namespace's row."""
    from forewarn.eventgrid.postgres import PostgresDeliveryStore

    outbox = PostgresDeliveryStore(url)
    name = outbox.schema_name
    outbox.close()
    conninfo, namespace, _ = postgres_target(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.execute("DELETE FROM public.forewarn_namespaces WHERE namespace = %s", [namespace])


@pytest.fixture
def store() -> Iterator[str]:
    url = _namespace_url()
    try:
        yield url
    finally:
        _drop(url)


@pytest.fixture
def front_ends(store: str, tmp_path: Path) -> Iterator[list[ForewarnServer]]:
    started: list[ForewarnServer] = []
    try:
        for index in range(3):
            workdir = tmp_path / f"front-end-{index}"
            workdir.mkdir()
            started.append(
                start_forewarn(
                    workdir,
                    fleet=PUBLISHING,
                    vm_hosts=("127.0.0.2", "127.0.0.3"),
                    extra=("--store", store),
                )
            )
        yield started
    finally:
        for server in started:
            server.stop()
        for server in started:
            server.process.assert_healthy()


def test_each_change_is_delivered_once_not_once_per_front_end(
    front_ends: list[ForewarnServer], tmp_path: Path
) -> None:
    a, b, c = front_ends
    with receiver(tmp_path, "eventgrid") as sink:
        assert subscribe(a.control, "fleet", sink.url)["provisioningState"] == "Succeeded"
        for front_end in front_ends:  # the fleet's subscription, whoever is asked
            assert subscription(front_end.control, "fleet")["provisioningState"] == "Succeeded"
        answer = b.control.post("/vms/WestNO_1/restart")
        event_id = answer.json()["events"][0]["EventId"]
        c.advance(15 * 60)
        wait_for(lambda: len(sink.statuses(event_id)) >= 2, what="Scheduled and Started")
        c.advance(10 * 60)
        wait_for(lambda: len(sink.statuses(event_id)) >= 3, what="Completed")
        # What must come next: every front-end's own delivery loop showing the three made
        # and none pending. Each loop refreshes that view itself, in the round where it
        # would turn changes into deliveries; a follower that delivered too would have put
        # deliveries of its own in the fleet's store (pending, or more than three made) as
        # soon as each change reached it, the Scheduled and Started ones long before.
        wait_for(
            lambda: all(_loop_view(f, "fleet") == (3, 0) for f in front_ends),
            what="every front-end's loop showing 3 delivered and none pending",
        )
        assert sorted(sink.statuses(event_id)) == ["Completed", "Scheduled", "Started"]


def _loop_view(server: ForewarnServer, name: str) -> tuple[int, int] | None:
    """(delivered, pending) of subscription ``name`` as ``server``'s delivery loop last saw
    them: the view it keeps for the dashboard (the first snapshot of ``/api/v1/stream``),
    not the store read on the request's behalf."""
    with server.control.stream("GET", "/stream") as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                shown = json.loads(line.removeprefix("data: "))["eventGrid"]
                views = [(s["delivered"], s["pending"]) for s in shown if s["name"] == name]
                return views[0] if views else None
    return None


def test_the_delivery_store_outlives_a_lost_connection(store: str) -> None:
    """[ours] A PostgreSQL server restarted or cut under a front-end: the Event Grid store says
    its state cannot be reached (StoreUnavailableError, which the delivery loop waits out)
    instead of failing for good, and connects again at its next use."""
    from forewarn.eventgrid.postgres import PostgresDeliveryStore
    from forewarn.storage.errors import StoreUnavailableError

    deliveries = PostgresDeliveryStore(store)
    try:
        before = deliveries.cursor()
        conninfo, _, _ = postgres_target(store)
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [deliveries._pg.info.backend_pid])
        with pytest.raises(StoreUnavailableError, match="Event Grid's state in PostgreSQL"):
            deliveries.cursor()
        assert deliveries.cursor() == before
    finally:
        deliveries.close()


def test_each_namespace_has_an_outbox_of_its_own(store: str) -> None:
    """[ours] (docs/scale-out.md: a namespace is a fleet of its own in a shared database;
    docs/azure-side.md: the subscriptions and pending deliveries "in a schema of the
    namespace's own"): two fleets on one database never see each other's subscriptions,
    deliveries or cursor."""
    from forewarn.eventgrid.postgres import PostgresDeliveryStore
    from forewarn.eventgrid.store import Subscription

    other = _namespace_url()
    mine, theirs = PostgresDeliveryStore(store), PostgresDeliveryStore(other)
    try:
        assert mine.schema_name != theirs.schema_name
        at = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
        mine.add(Subscription("ops", "http://127.0.0.1:9/", "eventgrid", "Succeeded", "c", at, 0))
        assert mine.enqueue([(1, at, "grid-1", {"eventgrid": "{}"})], cursor=1) == 1
        assert [s.name for s in mine.subscriptions()] == ["ops"]
        assert theirs.subscriptions() == []
        assert theirs.due(at, 10) == []
        assert (mine.cursor(), theirs.cursor()) == (1, 0)
    finally:
        mine.close()
        theirs.close()
        _drop(other)

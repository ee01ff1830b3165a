"""What the soak (test_soak.py) found, each pinned by the smallest test that shows it.

A finding not yet fixed is marked ``xfail(strict=True)`` with the bug as its reason: the day
a fix lands, the test passes, strict turns that into a failure, and the mark is removed.
Both below were fixed since they were found.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from e2e_support import free_port, wait_until
from fault_tier import HEADERS, URL, Front, Witness
from tcp_proxy import TcpProxy

from forewarn.eventgrid.delivery import EventGrid
from forewarn.eventgrid.payloads import Schema
from forewarn.eventgrid.store import DeliveryStore, Subscription
from forewarn.storage.errors import StoreUnavailableError
from forewarn.testing import ForewarnPlatform

from .fleet_soak import ADDRESSES, POLL_BOUND, fleet_text


class StoreThatFailsOnce(DeliveryStore):
    """Event Grid's store in memory, whose next :meth:`enqueue` fails as PostgreSQL cut away
    fails it (StoreUnavailableError, which the delivery loop waits out) once ``failing``."""

    failing = False

    def enqueue(
        self, changes: Sequence[tuple[int, datetime, str, dict[Schema, str]]], cursor: int
    ) -> int:
        if self.failing:
            self.failing = False
            raise StoreUnavailableError("Event Grid's state in PostgreSQL: connection lost")
        return super().enqueue(changes, cursor)


def test_a_change_whose_recording_failed_is_delivered_once_the_store_works() -> None:
    """At least once (learn.microsoft.com/azure/event-grid/delivery-and-retry; docs/azure-side.md,
    "Event Grid": deliveries "wait in the store" while it fails): a store failure delays a
    change's delivery, never drops it. The soak saw states of events that were shown to VMs
    and listed by Resource Graph never reach the receiver after PostgreSQL was cut: the
    delivery loop took a batch off its queue before the store had recorded it."""
    with ForewarnPlatform(fleet=fleet_text()) as platform:
        store = StoreThatFailsOnce(None)
        subscription = Subscription(
            "soak", "http://127.0.0.1:9/", "eventgrid", "Succeeded", "code", platform.now, 0
        )
        store.add(subscription)
        grid = EventGrid(platform.service.now, lambda: 0, store, validation_base="http://x")
        platform.service.on_published(grid.on_change)
        platform.restart("soak0")  # Scheduled: one change to deliver

        async def two_rounds() -> None:
            store.failing = True
            with pytest.raises(StoreUnavailableError):
                await grid.step()  # the store fails while the change is recorded
            await grid.step()  # and works again
            await grid.settle()

        asyncio.run(two_rounds())
        (view,) = asyncio.run(grid.list())
        store.close()
    assert view.pending + view.subscription.delivered == 1, view


@pytest.mark.e2e
def test_a_vm_is_answered_while_a_write_waits_on_a_silent_postgresql(
    tmp_path: Path, soak_store: str
) -> None:
    """docs/scale-out.md: "reads never wait on the database"; a VM's poll is a read, and a
    write waiting on a database that neither answers nor hangs up must not hold it. The soak
    saw every front-end's polls time out while PostgreSQL was silent for 7 s: a control write
    waiting on the database held the event loop."""
    parts = urlsplit(soak_store)
    assert parts.hostname is not None
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text())
    front = Front(free_port(["127.0.0.1"]), free_port(["127.0.0.1"]), ADDRESSES, Witness())
    with TcpProxy((parts.hostname, parts.port or 5432)) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        store = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
        with front.serving(tmp_path, ("--store", store, "--fleet", str(fleet))):
            assert front.poll("soak0").status_code == 200
            proxy.silence()
            writer = threading.Thread(target=front.call, args=("POST", "/vms/soak1/restart"))
            try:
                writer.start()
                # the write is on its way to the database before the VM asks
                wait_until(lambda: proxy.held() > 0, what="the restart on its way to PostgreSQL")
                url = URL.format(ADDRESSES["soak0"], front.port)
                answer = httpx.get(url, headers=HEADERS, timeout=POLL_BOUND, trust_env=False)
            finally:
                proxy.resume()
                writer.join(30)
    assert answer.status_code == 200, answer.text

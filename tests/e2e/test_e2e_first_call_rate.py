"""The first-call delay through real sockets, against a client that polls slowly and one that
floods: 429 only for the one over the rate.

"You should expect a delayed response in your first call of up to two minutes"
(learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and disabling
Scheduled Events"), and "Requests are limited to 5 requests per second (on a per VM basis).
Requests exceeding this threshold will be rejected with 429 responses"
(learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Rate limiting"): the
limit is a rate, not a count of calls waiting. A metrics exporter that starts a scrape every
second with a 30 s timeout (as a Prometheus exporter of the document does, scraped often)
keeps seven or more calls waiting through an 8 s delay and never exceeds a request a
second, so every call is
answered 200 once the delay is over; a VM that fires ten calls at once is over the rate, and
the calls beyond it are refused at once, before the delay ends.

``forewarn serve`` runs as its own process on the system clock; the clients are httpx, each
call on a connection of its own, as a scraper's fresh request is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from e2e_support import (
    API_VERSION,
    SCHEDULED_EVENTS,
    ForewarnServer,
    start_forewarn,
    stopped_at_exit,
)

pytestmark = pytest.mark.e2e

#: Neither VM has asked yet, so each one's first call turns Scheduled Events on.
FLEET = """\
vms:
  - {name: exporter, address: 127.0.0.2, scheduledEventsEnabled: false}
  - {name: flooder, address: 127.0.0.3, scheduledEventsEnabled: false}
"""
DELAY = 8.0  # seconds of first-call delay
SCRAPE_EVERY = 1.0
SCRAPE_TIMEOUT = 30.0
FLOOD = 10


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ForewarnServer]:
    started = start_forewarn(
        tmp_path,
        fleet=FLEET,
        vm_hosts=("127.0.0.2", "127.0.0.3"),
        clock="system",
        extra=("--timing", f"first_call_delay={DELAY:g}s"),
    )
    with stopped_at_exit(started):
        yield started


def _get(server: ForewarnServer, host: str) -> tuple[int, float]:
    """One call on a connection of its own: its status, and when it was answered."""
    url = f"{server.base_url(host)}{SCHEDULED_EVENTS}?api-version={API_VERSION}"
    with httpx.Client(trust_env=False, timeout=SCRAPE_TIMEOUT) as client:
        status = client.get(url, headers={"Metadata": "true"}).status_code
    return status, time.monotonic()


def test_a_slow_poller_through_the_first_call_delay_is_never_refused(
    server: ForewarnServer,
) -> None:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        scrapes = []
        while time.monotonic() - started < DELAY:
            scrapes.append(pool.submit(_get, server, "127.0.0.2"))
            time.sleep(SCRAPE_EVERY)
        answers = [scrape.result(timeout=SCRAPE_TIMEOUT + 5) for scrape in scrapes]
    assert len(scrapes) >= 7
    assert [status for status, _ in answers] == [200] * len(scrapes)
    # Those made during the delay were held, not answered early: the first one waited it out.
    assert answers[0][1] - started >= DELAY - 1


def test_a_vm_over_its_rate_during_the_first_call_delay_is_refused_at_once(
    server: ForewarnServer,
) -> None:
    barrier = threading.Barrier(FLOOD)

    def flood() -> tuple[int, float]:
        barrier.wait(timeout=10)
        return _get(server, "127.0.0.3")

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=FLOOD) as pool:
        answers = list(pool.map(lambda _: flood(), range(FLOOD)))
    refused = [at for status, at in answers if status == 429]
    assert refused, "ten calls at once are over 5 a second"
    assert all(at - started < DELAY - 1 for at in refused), "refused at once, not held"
    assert sorted({status for status, _ in answers}) == [200, 429]
    answered = [at for status, at in answers if status == 200]
    assert all(at - started >= DELAY - 1 for at in answered), "the others were held"

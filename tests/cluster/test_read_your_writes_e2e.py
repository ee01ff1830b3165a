"""Three real front-end processes: what one acknowledged, the others' next answers show.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"): a write through one front-end
is answered once every live front-end has applied it, so no read below waits or retries; a
front-end killed with SIGKILL holds writes up by at most the bound until its heartbeat
expires, and the others still agree.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from forewarn.cluster.replica import LIVE_SECONDS, SPREAD_SECONDS

from .front_ends import AUTH, HEADERS, URL, VMS, FrontEnd, agreed, silence


@pytest.fixture
def fleet(shared_store: str, fleet_file: Path) -> Iterator[list[FrontEnd]]:
    front_ends = [FrontEnd(shared_store, fleet_file, ("--clock", "manual")) for _ in range(3)]
    yield front_ends
    for front_end in front_ends:
        front_end.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    """Connections kept open, as pollers keep them: a read goes out the moment it is made."""
    with httpx.Client(timeout=5) as kept:
        yield kept


def statuses(client: httpx.Client, front_end: FrontEnd) -> dict[str, str]:
    events = client.get(f"{front_end.control}/events", headers=AUTH).json()["events"]
    return {event["EventId"]: event["EventStatus"] for event in events}


def document(client: httpx.Client, front_end: FrontEnd, vm: str) -> bytes:
    return client.get(URL.format(VMS[vm], front_end.port), headers=HEADERS).content


@pytest.mark.e2e
def test_what_one_front_end_acknowledged_is_in_the_others_next_answer(
    fleet: list[FrontEnd], client: httpx.Client
) -> None:
    a, b, c = fleet
    for front_end in fleet:
        front_end.start()
        for vm in VMS:  # the connections the reads below go out on
            document(client, front_end, vm)
        statuses(client, front_end)
    for vm in VMS:
        answer = client.post(f"{a.control}/vms/{vm}/restart", headers=AUTH, json={})
        assert answer.status_code == 200, answer.text
        event_id = answer.json()["events"][0]["EventId"]
        for other in (b, c):  # at once: no sleep, no retry
            assert event_id.encode() in document(client, other, vm)
            assert statuses(client, other)[event_id] == "Scheduled"
    # the last VM's approval through C: A's control API shows the event Started at once
    body = f'{{"StartRequests":[{{"EventId":"{event_id}"}}]}}'
    approval = client.post(URL.format(VMS[vm], c.port), headers=HEADERS, content=body)
    assert approval.status_code == 200, approval.text
    assert statuses(client, a)[event_id] == "Started"
    assert statuses(client, b)[event_id] == "Started"


@pytest.mark.e2e
def test_a_killed_front_end_holds_writes_up_by_the_bound_until_it_expires(
    fleet: list[FrontEnd], client: httpx.Client, shared_store: str
) -> None:
    a, b, c = fleet
    for front_end in fleet:
        front_end.start()
    assert b.process is not None
    killed = b.process.pid
    b.kill()
    started = time.monotonic()
    assert a.post("/clock/advance", {"seconds": 60}).status_code == 200
    assert time.monotonic() - started >= SPREAD_SECONDS  # it waited the bound for B ...
    (waited,) = [line for line in a.log().splitlines() if "without" in line]
    assert f"/{killed}/" in waited  # ... and answered anyway, naming B as the one behind
    assert c.get("/clock") == a.get("/clock")  # the live one has it, at once
    silence(shared_store, f"%/{killed}/%", LIVE_SECONDS + 1)  # B's last heartbeat: too old now
    answer = c.post("/vms/WestNO_0/restart")
    assert answer.status_code == 200, answer.text
    assert "without" not in c.log()  # nobody left to wait for
    event_id = answer.json()["events"][0]["EventId"]
    assert statuses(client, a)[event_id] == "Scheduled"
    agreed([a, c])

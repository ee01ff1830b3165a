"""Three real ``forewarn serve --store postgresql://...`` processes on one namespace.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"): one fleet whatever front-end a
request reaches. SPEC 4: a campaign impacts one fault domain at a time; SPEC 2:
DocumentIncarnation never goes backwards; SPEC 1: an EventId is globally unique.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import psycopg
import pytest

from forewarn.storage import open_journal

from .front_ends import HEADERS, URL, VMS, FrontEnd, agreed, agreed_events
from .stand_in_journal import commands_of

FAULT_DOMAIN = {"WestNO_0": 0, "WestNO_1": 1, "WestNO_2": 1}


def events_of(documents: dict[str, bytes]) -> dict[str, dict[str, object]]:
    return {
        event["EventId"]: event
        for body in documents.values()
        for event in json.loads(body)["Events"]
    }


def busy_fault_domains(front_end: FrontEnd) -> set[int]:
    """The fault domains with an event under way (Started), as a front-end's control API
    lists them."""
    return {
        FAULT_DOMAIN[vm]
        for event in front_end.get("/events")["events"]
        if event["EventStatus"] == "Started"
        for vm in event["Resources"]
    }


@pytest.fixture
def fleet(shared_store: str, fleet_file: Path) -> Iterator[list[FrontEnd]]:
    front_ends: list[FrontEnd] = []
    yield front_ends
    for front_end in front_ends:
        front_end.stop()


@pytest.mark.e2e
def test_an_operation_through_one_and_an_approval_through_another_reach_all(
    fleet: list[FrontEnd], shared_store: str, fleet_file: Path
) -> None:
    fleet.extend(FrontEnd(shared_store, fleet_file, ("--clock", "manual")) for _ in range(3))
    a, b, c = fleet
    for front_end in fleet:
        front_end.start()
    assert a.post("/vms/WestNO_0/restart").status_code == 200
    (event,) = events_of(agreed(fleet)).values()
    assert event["EventStatus"] == "Scheduled"
    # WestNO_0's approval reaches C; every VM of the set is one tenant's: that is all it takes
    assert c.approve("WestNO_0", str(event["EventId"])).status_code == 200
    (started,) = agreed_events(fleet)
    assert (started["EventId"], started["EventStatus"]) == (event["EventId"], "Started")
    # the reboot's impact over (a rebooting VM's own requests wait for it), documents agree
    assert b.post("/clock/advance", {"seconds": 30}).status_code == 200
    assert events_of(agreed(fleet))[str(event["EventId"])]["EventStatus"] == "Started"

    # a campaign begun through B and moved on through A's clock: one fault domain at a time,
    # and every front-end shows the same documents at each step
    assert b.post("/campaigns", {}).status_code == 201
    seen_ids: set[str] = {str(event["EventId"])}
    for _ in range(24):
        events = agreed_events(fleet)
        seen_ids.update(str(event["EventId"]) for event in events)
        for front_end in fleet:
            assert len(busy_fault_domains(front_end)) <= 1
        # once each step's impact is over, every VM's document is the same everywhere
        assert a.post("/clock/advance", {"seconds": 30}).status_code == 200
        agreed(fleet)
        if not a.get("/campaigns")["campaigns"] and not events:
            break
        assert a.post("/clock/advance", {"seconds": 240}).status_code == 200
    else:
        pytest.fail("the campaign did not finish")
    assert len(seen_ids) >= 3  # the restart and one event per fault domain, each its own id
    for front_end in fleet:
        assert front_end.get("/campaigns")["campaigns"] == []


@pytest.mark.e2e
def test_front_ends_killed_at_random_lose_nothing_acknowledged(
    fleet: list[FrontEnd], shared_store: str, fleet_file: Path
) -> None:
    """SIGKILL front-ends (the leader among them) at random while a campaign runs on the
    real clock and VMs approve through whichever front-end is up; restart them. Every
    acknowledged approval is in the journal, no front-end ever served a lower
    DocumentIncarnation than before, and at the end all agree."""
    extra = ("--clock", "system", "--profile", "fast")
    fleet.extend(FrontEnd(shared_store, fleet_file, extra) for _ in range(3))
    for front_end in fleet:
        front_end.start()
    chance = random.Random(20)
    acknowledged: set[tuple[str, str]] = set()
    # (front-end's port, VM) -> the last incarnation, body and start it was served by
    incarnations: dict[tuple[int, str], tuple[int, bytes, int]] = {}
    campaigns = kills = rounds = 0
    # at least 10 s of it, and three kills, two campaigns and an approval, however slow the
    # machine; the bound only stops a run that cannot get there
    started, deadline = time.monotonic(), time.monotonic() + 300
    while True:
        enough = kills >= 3 and campaigns >= 2 and time.monotonic() - started > 10
        if enough and acknowledged:
            break
        assert time.monotonic() < deadline, f"{kills} kills, {campaigns} campaigns in 300 s"
        rounds += 1
        up = [front_end for front_end in fleet if front_end.alive]
        if len(up) == len(fleet) and rounds % 6 == 0:  # a victim every few rounds
            chance.choice(fleet).kill()
            kills += 1
            continue
        for front_end in fleet:
            if not front_end.alive and chance.random() < 0.5:
                front_end.start()
        up = [front_end for front_end in fleet if front_end.alive]
        if up and up[0].get("/campaigns")["campaigns"] == []:  # one after another
            assert up[0].post("/campaigns", {}).status_code == 201
            campaigns += 1
        for front_end in up:
            vm = chance.choice(list(VMS))
            try:
                body = front_end.document(vm)
            except httpx.TransportError:
                continue
            document = json.loads(body)
            key = (front_end.port, vm)
            last = incarnations.get(key, (0, b"", 0))
            assert document["DocumentIncarnation"] >= last[0], (
                f"{vm} on :{front_end.port}: {last[1]!r} from its start {last[2]}, then "
                f"{body!r} from its start {front_end.starts}"
            )
            incarnations[key] = (document["DocumentIncarnation"], body, front_end.starts)
            for event in document["Events"]:
                if event["EventStatus"] == "Scheduled" and vm in event["Resources"]:
                    answer = front_end.approve(vm, event["EventId"])
                    if answer.status_code == 200:
                        acknowledged.add((vm, event["EventId"]))
        time.sleep(0.05)
    for front_end in fleet:
        if not front_end.alive:
            front_end.start()
    assert kills >= 3
    assert campaigns >= 2
    assert acknowledged, "no approval went through"
    with open_journal(shared_store) as journal:
        approvals = {
            (command["vm"], event_id)
            for command in commands_of([record for _, record in journal.records()])
            if command["op"] == "approve"
            for event_id in command["event_ids"]
        }
    assert acknowledged <= approvals
    # the campaign runs to its end on the leader's ticks, whoever the leader is by then
    for _ in range(200):
        if all(front_end.get("/campaigns")["campaigns"] == [] for front_end in fleet):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the campaign did not finish after the kills")
    agreed(fleet)
    for front_end in fleet:
        for vm, body in front_end.documents().items():
            last = incarnations.get((front_end.port, vm), (0, b"", 0))
            assert json.loads(body)["DocumentIncarnation"] >= last[0], (vm, last, body)


@pytest.mark.e2e
def test_front_ends_ride_out_postgresql_dropping_every_connection(
    fleet: list[FrontEnd], shared_store: str, fleet_file: Path
) -> None:
    """What a PostgreSQL restart does to the front-ends (every session ended, here by
    ``pg_terminate_backend`` rather than restarting a server others share): VMs are answered
    throughout from the last applied state; then the followers reconnect and catch up, and
    writes go through again."""
    fleet.extend(FrontEnd(shared_store, fleet_file, ("--clock", "manual")) for _ in range(3))
    a, b, _ = fleet
    for front_end in fleet:
        front_end.start()
    assert a.post("/vms/WestNO_0/restart").status_code == 200
    before = agreed(fleet)
    namespace = shared_store.rpartition("namespace=")[2]
    with psycopg.connect(shared_store.partition("?")[0], autocommit=True) as conn:
        ended = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            [f"forewarn {namespace}"[:63]],
        ).fetchone()
    assert ended is not None
    assert ended[0] >= 3  # each front-end's writer at least (and its follower's)
    assert [front_end.documents() for front_end in fleet] == [before] * 3
    deadline = time.monotonic() + 20
    while True:  # the first write may meet a dropped connection and answer 503
        answer = b.post("/vms/WestNO_1/restart")
        if answer.status_code == 200:
            break
        assert answer.status_code == 503, answer.text
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.2)
    after = agreed(fleet, timeout=20)  # A and C followed B's write after reconnecting
    assert len(events_of(after)) == 2


@pytest.mark.e2e
def test_a_front_end_on_another_clock_kind_is_refused_naming_both(
    shared_store: str, fleet_file: Path
) -> None:
    """[ours] (docs/scale-out.md, "What every front-end needs": the same clock kind). Issue
    text: one front-end on ``--clock manual``, another on the same namespace without
    ``--clock``: both started, and the second's VMs hung after an approval. The second is
    refused at start, in one line naming both clocks, as another profile is; the first goes
    on serving."""
    first = FrontEnd(shared_store, fleet_file, ("--clock", "manual"))
    first.start()
    try:
        second = FrontEnd(shared_store, fleet_file, ())
        refused = subprocess.run(
            [sys.executable, "-m", "forewarn", "serve", "--store", shared_store,
             "--fleet", str(fleet_file), "--bind", f"127.0.0.1:{second.port}",
             "--control", f"127.0.0.1:{second.control_port}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert refused.returncode == 1, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        shown = shared_store.split("@")[-1]
        assert line == (
            f"Error: {shown} is served on a manual clock, not system: start every front-end "
            "of its fleet with --clock manual, or use another namespace "
            "(--store ...?namespace=NAME)"
        )
        assert first.get("/clock")["kind"] == "ManualClock"
    finally:
        first.stop()


@pytest.mark.e2e
def test_front_ends_on_the_system_clock_answer_with_the_time_of_the_answer(
    fleet: list[FrontEnd], shared_store: str, fleet_file: Path
) -> None:
    """docs/spec.md: "`Date` is the platform's time, the same clock NotBefore is read
    against"; for a front-end, its clock's between records. An answer's Date is "the date
    and time at which the message was originated" (RFC
    9110, section 6.6.1), as Azure's IMDS answers carry it; clients read NotBefore against it.
    A front-end's platform moves only by the journal's records, which come when something
    falls due: with none written, its answers (and the clock its control API shows) still
    follow the real clock, repeated polls on a kept connection included."""
    fleet.extend(FrontEnd(shared_store, fleet_file, ()) for _ in range(2))
    for front_end in fleet:
        front_end.start()
    url = URL.format(VMS["WestNO_0"], fleet[1].port)
    with httpx.Client(headers=HEADERS, timeout=5) as client:
        dates: list[float] = []
        for _ in range(2):  # the first request is journaled: the second is the first repeat
            answer = client.get(url)
            assert answer.status_code == 200, answer.text
        began = time.time()
        while len(dates) < 2 or time.time() - began < 3.5:
            answer = client.get(url)  # kept alive: the repeated poll's short path
            assert answer.status_code == 200, answer.text
            shown = parsedate_to_datetime(answer.headers["Date"]).timestamp()
            assert abs(shown - time.time()) < 3.0, (answer.headers["Date"], time.time())
            if not dates or shown != dates[-1]:
                dates.append(shown)
            time.sleep(0.2)
    assert dates[-1] - dates[0] >= 2.0, dates  # it went on with the real clock
    for front_end in fleet:
        shown = datetime.fromisoformat(front_end.get("/clock")["now"]).timestamp()
        assert abs(shown - time.time()) < 3.0, (front_end.get("/clock"), time.time())

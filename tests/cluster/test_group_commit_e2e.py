"""Group commit in ``forewarn serve``: VMs' approvals arriving together share a transaction.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"). A front-end answers on one
event loop: the approvals it reads in one turn of the loop are journaled in one transaction
once that turn's callbacks have run, and each VM is answered once it committed. Approvals
are made to arrive together by holding the namespace's lock from another connection while
the front-end writes the first: its transaction waits on PostgreSQL meanwhile (off the event
loop), and the next two, read while it waits, wait for its turn together and share the next
transaction. The grouping is read from PostgreSQL's transaction ids. A request pipelined
behind an approval is answered after it, in order.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from forewarn.storage.postgres import PostgresJournal

from .front_ends import VMS, FrontEnd, namespace_rows
from .stand_in_journal import commands_of

PATH = "/metadata/scheduledevents?api-version=2020-07-01"


@pytest.fixture
def front(shared_store: str, fleet_file: Path) -> Iterator[FrontEnd]:
    front_end = FrontEnd(shared_store, fleet_file, ("--clock", "manual"))
    front_end.start()
    yield front_end
    front_end.stop()


def connect(front: FrontEnd, vm: str) -> socket.socket:
    """A connection of ``vm``'s, its first request (which turns Scheduled Events on) answered,
    so that the front-end is reading it."""
    sock = socket.create_connection((VMS[vm], front.port), timeout=10)
    sock.sendall(f"GET {PATH} HTTP/1.1\r\nHost: x\r\nMetadata: true\r\n\r\n".encode())
    assert answer(sock).startswith(b"HTTP/1.1 200")
    return sock


def approval(event_id: str) -> bytes:
    body = f'{{"StartRequests":[{{"EventId":"{event_id}"}}]}}'.encode()
    head = f"POST {PATH} HTTP/1.1\r\nHost: x\r\nMetadata: true\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


def answer(sock: socket.socket) -> bytes:
    """One response: its head, and its body by Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the front-end closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return data


def waiting_for_the_lock(store: str) -> bool:
    url = urlsplit(store)
    (namespace,) = parse_qs(url.query)["namespace"]
    with psycopg.connect(url._replace(query="").geturl(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' "
            "AND application_name = %s",
            [f"forewarn {namespace}"[:63]],
        ).fetchone()
    return bool(row and row[0])


def approvals(store: str) -> list[str]:
    """The transaction id of each approval in the journal, in journal order (a group
    record's each under the record's)."""
    rows = namespace_rows(
        store,
        "SELECT xmin::text, body::text FROM public.forewarn_records WHERE namespace = %s "
        "ORDER BY sequence",
    )
    return [
        str(xid)
        for xid, body in rows
        for command in commands_of([json.loads(body)])
        if command["op"] == "approve"
    ]


@pytest.mark.e2e
def test_approvals_read_in_one_turn_are_committed_in_one_transaction(
    front: FrontEnd, shared_store: str
) -> None:
    for vm in VMS:
        assert front.post(f"/vms/{vm}/restart").status_code == 200
    events = {
        resource: str(event["EventId"])
        for event in front.get("/events")["events"]
        for resource in event["Resources"]
    }
    sockets = {vm: connect(front, vm) for vm in VMS}
    first, *others = VMS
    url, namespace = shared_store.split("?namespace=")
    holder = PostgresJournal(url, namespace=namespace)
    try:
        with holder.exclusive() as transaction:
            transaction.records(after=0)  # the lock is held once this answers
            # an id it is not shown, and pipelined behind it its own: answered in order
            unknown = "00000000-0000-4000-8000-000000000000"
            sockets[first].sendall(approval(unknown) + approval(events[first]))
            deadline = time.monotonic() + 10
            while not waiting_for_the_lock(shared_store):  # the front-end's write waits too
                assert time.monotonic() < deadline, "the first approval never reached the lock"
                time.sleep(0.01)
            for vm in others:
                sockets[vm].sendall(approval(events[vm]))
    finally:
        holder.close()
    assert answer(sockets[first]).startswith(b"HTTP/1.1 400")
    for vm in VMS:
        assert answer(sockets[vm]).startswith(b"HTTP/1.1 200"), vm
    for sock in sockets.values():
        sock.close()
    transactions = approvals(shared_store)
    assert len(transactions) == 3
    assert transactions[1] == transactions[2]  # read in one turn after the lock was let go
    started = [event["EventStatus"] for event in front.get("/events")["events"]]
    assert started == ["Started"] * 3

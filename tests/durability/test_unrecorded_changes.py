"""A change the journal cannot record is not made: nobody is shown it, and it answers 503.

The rule (docs/serve.md, "State that survives restarts"; docs/control.md): a command is visible to
nobody (VM, control API, dashboard, hooks, logs) until its journal record is durable; a
failed append changes nothing and answers 503, reads go on, and writes are taken again once
the store works. The VM-facing answer is IMDS's own 503, SPEC 1: "503 `Internal service
unavailable. Retry later`" (learn.microsoft.com ... load-balancer/troubleshoot-load-balancer-
imds, "Error codes"; the IMDS overview's "Errors and debugging" names no 503, only "500
Service Error: Retry after some time").

In-process, with the SQLite journal's append made to fail as a full disk makes it fail
(``tests/durability/test_full_disk.py`` runs the same on a real full disk, through a real
``forewarn serve``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from forewarn.commands import Restart, ScheduleEvent
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.events import EventStatus
from forewarn.server.control import status_of
from forewarn.server.imds import SCHEDULED_EVENTS_PATH, ImdsEndpoint, ImdsRequest, ImdsResponse
from forewarn.server.runner import ServeSettings
from forewarn.server.state import open_service
from forewarn.service import ScheduledEventsService
from forewarn.storage import SqliteJournal
from forewarn.storage.errors import StoreUnavailableError, UnstorableValueError
from forewarn.writer import QUIET_FACTOR, QUIET_SECONDS, NotJournaledError

FLEET = """
vms:
  - {name: vmA, address: 127.0.0.2}
  - {name: vmB, address: 127.0.0.3}
  - {name: vmC, address: 127.0.0.4}
  - {name: quiet, address: 127.0.0.5, scheduledEventsEnabled: false}
"""
ADDRESSES = {"vmA": "127.0.0.2", "vmB": "127.0.0.3", "vmC": "127.0.0.4", "quiet": "127.0.0.5"}
#: IMDS's text for a 503 (SPEC 1).
UNAVAILABLE = {"error": "Internal service unavailable. Retry later"}
DISK_FULL = "cannot use SQLite journal: database or disk is full"


class Stopwatch:
    """The writer's monotonic clock (seconds), moved only by the test: the quiet period after
    a refusal is measured on it, never on the machine's own clock."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


class Disk:
    """Whether the journal's disk is full, how often the journal was asked to write, and how
    long reading it back takes on the writer's stopwatch."""

    def __init__(self) -> None:
        self.full = False
        self.unreadable = False
        self.appends = 0
        self.stopwatch = Stopwatch()
        self.read_seconds = 0.0


@pytest.fixture
def disk() -> Disk:
    return Disk()


@pytest.fixture
def settings(tmp_path: Path) -> ServeSettings:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    return ServeSettings(
        fleet=fleet,
        clock="manual",
        data_dir=tmp_path / "data",
        seed=7,
        timing_overrides=(("first_call_delay", timedelta(0)),),
    )


@pytest.fixture
def service(
    settings: ServeSettings, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ScheduledEventsService]:
    opened = open_service(settings)
    journal = opened.journal
    assert isinstance(journal, SqliteJournal)
    extend, records = journal._extend, journal.records

    def appending(texts: list[str], expected: int | None = None) -> int:
        """Every write of records goes through here, whichever append is called."""
        disk.appends += 1
        if disk.full:
            raise StoreUnavailableError(DISK_FULL)
        return extend(texts, expected)

    def reading(after: int = 0) -> Any:
        disk.stopwatch.seconds += disk.read_seconds
        if disk.unreadable:
            raise StoreUnavailableError("cannot use SQLite journal: disk I/O error")
        return records(after)

    monkeypatch.setattr(journal, "_extend", appending)
    monkeypatch.setattr(journal, "records", reading)
    assert opened._writer is not None
    monkeypatch.setattr(opened._writer, "_monotonic", disk.stopwatch)
    yield opened
    journal.close()


def later(disk: Disk) -> None:
    """The quiet period after a refusal passes (forewarn.writer)."""
    disk.stopwatch.seconds += 10 * QUIET_SECONDS


def shown(service: ScheduledEventsService) -> dict[str, bytes]:
    """What every VM is shown, byte for byte, and the control API's listing of events."""
    documents = {name: service.document_bytes(name, CURRENT_VERSION) for name in ADDRESSES}
    listing = repr([(v.event, sorted(v.audience), sorted(v.approvals)) for v in service.events()])
    return {**documents, "events": listing.encode()}


def request(method: str, vm: str, body: bytes = b"") -> ImdsRequest:
    return ImdsRequest(
        method=method,
        path=SCHEDULED_EVENTS_PATH,
        query=f"api-version={CURRENT_VERSION.name}",
        headers={"metadata": "true"},
        body=body,
        local_address=ADDRESSES[vm],
        peer_address="127.0.0.1",
    )


def approve(endpoint: ImdsEndpoint, vm: str, event_id: str) -> ImdsResponse:
    body = orjson.dumps({"StartRequests": [{"EventId": event_id}]})
    return endpoint.handle(request("POST", vm, body))


def test_an_operation_the_journal_refuses_is_not_made_and_answers_503(
    service: ScheduledEventsService,
    disk: Disk,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue text: three restarts refused with 503 on a full disk, yet the events listed
    them and vmB's document showed incarnation 4. Now nothing of them is shown anywhere,
    nothing is logged as done, and once the disk has room the next restart is made."""
    (first,) = service.execute(Restart("vmA"))
    before = shown(service)
    disk.full = True
    with caplog.at_level(logging.INFO, logger="forewarn.operations"):
        caplog.clear()  # vmA's restart may have been logged (as another test left the level)
        for _ in range(3):
            with pytest.raises(NotJournaledError, match="database or disk is full") as refused:
                service.execute(Restart("vmB"))
            assert status_of(refused.value) == 503
            assert shown(service) == before
    assert [r.getMessage() for r in caplog.records if r.name == "forewarn.operations"] == []
    disk.full = False
    later(disk)
    (made,) = service.execute(Restart("vmC"))
    ids = [first.event_id, made.event_id]
    assert len(set(ids)) == 2
    assert {view.event.event_id for view in service.events()} == set(ids)
    assert service.document("vmB").events == ()
    assert service.document("vmB").incarnation == 1


def test_writes_right_after_a_refusal_are_refused_without_trying_then_tried_again(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """A full disk met by clients retrying: one try (and one rebuild) per quiet period, not
    one per request; reads go on meanwhile."""
    disk.full = True
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    tried = disk.appends
    with pytest.raises(NotJournaledError, match="a moment ago"):
        service.execute(Restart("vmB"))
    assert disk.appends == tried
    assert service.document("vmB").events == ()  # reads go on
    disk.full = False
    with pytest.raises(NotJournaledError, match="a moment ago"):  # not tried yet
        service.execute(Restart("vmB"))
    later(disk)
    (event,) = service.execute(Restart("vmB"))
    assert disk.appends == tried + 1
    assert service.document("vmB").events[0].event_id == event.event_id


def test_the_quiet_period_after_a_refusal_lasts_a_second(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """docs/control.md, "Every mutation is one command": "For a second after such a refusal
    (longer when undoing it took long) changes are refused at once without trying the
    store ... after that the next one is tried." Undoing took no time here, so the period
    is QUIET_SECONDS exactly: refused without trying until its last instant, tried at its
    end."""
    assert QUIET_SECONDS == 1.0
    disk.full = True
    refused_at = disk.stopwatch.seconds
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    tried = disk.appends
    disk.full = False
    disk.stopwatch.seconds = refused_at + QUIET_SECONDS - 0.001
    with pytest.raises(NotJournaledError, match="a moment ago"):
        service.execute(Restart("vmB"))
    assert disk.appends == tried
    disk.stopwatch.seconds = refused_at + QUIET_SECONDS
    service.execute(Restart("vmB"))
    assert disk.appends == tried + 1


def test_a_slow_undoing_lengthens_the_quiet_period_tenfold(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """docs/control.md, "Every mutation is one command": the quiet period is "longer when
    undoing it took long": QUIET_FACTOR times what the rebuild took when that is longer than
    QUIET_SECONDS (forewarn.writer), so rebuilding a long journal takes a tenth of the
    server's time at most. Reading the journal back takes half a second here: the period
    ends five seconds after the rebuild ended, neither at one second nor at half a second."""
    assert QUIET_FACTOR == 10.0
    disk.full = True
    disk.read_seconds = 0.5
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    rebuilt_at = disk.stopwatch.seconds
    tried = disk.appends
    disk.full = False
    disk.read_seconds = 0.0
    for moment in (QUIET_SECONDS, 0.5, 5.0 - 0.001):
        disk.stopwatch.seconds = rebuilt_at + moment
        with pytest.raises(NotJournaledError, match="a moment ago"):
            service.execute(Restart("vmB"))
    assert disk.appends == tried
    disk.stopwatch.seconds = rebuilt_at + 5.0
    service.execute(Restart("vmB"))
    assert disk.appends == tried + 1


def test_a_vm_approval_the_journal_refuses_answers_503_and_starts_nothing(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """Issue text: "a VM approval answers 500 yet the event goes to Started". The approval
    is refused with IMDS's 503 and the event stays Scheduled; the client's retry, once
    the disk has room, starts it."""
    (event,) = service.execute(Restart("vmA"))
    endpoint = ImdsEndpoint(service)
    before = shown(service)
    disk.full = True
    refused = approve(endpoint, "vmA", event.event_id)
    assert (refused.status, orjson.loads(refused.body)) == (503, UNAVAILABLE)
    assert shown(service) == before
    assert service.event(event.event_id).event.status is EventStatus.SCHEDULED
    disk.full = False
    later(disk)
    assert approve(endpoint, "vmA", event.event_id).status == 200
    assert service.event(event.event_id).event.status is EventStatus.STARTED


def test_a_first_request_the_journal_refuses_answers_503_and_turns_nothing_on(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """SPEC 7: a VM's first request turns Scheduled Events on, a change journaled like any
    other. Refused, it changes nothing (no enablement, no first-call delay started) and the
    VM gets IMDS's 503; its retry once the disk has room turns it on. Right after the
    refusal, the retry is refused without a write being tried."""
    endpoint = ImdsEndpoint(service)
    disk.full = True
    for _ in range(2):
        refused = endpoint.handle(request("GET", "quiet"))
        assert (refused.status, orjson.loads(refused.body)) == (503, UNAVAILABLE)
        assert not service.vm_state("quiet").receiving
    assert disk.appends == 1
    assert endpoint.handle(request("GET", "vmA")).status == 200  # the others are answered
    disk.full = False
    later(disk)
    assert endpoint.handle(request("GET", "quiet")).status == 200
    assert service.vm_state("quiet").receiving


def test_a_clock_move_the_journal_refuses_is_not_made(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """A manual clock's move is journaled (replay needs it): refused, the clock stays where
    it was and nothing it would have made due happens; nor does a later write made at the
    old time carry it."""
    (event,) = service.execute(Restart("vmA"))
    now = service.now()
    disk.full = True
    with pytest.raises(NotJournaledError):
        service.advance_clock(timedelta(hours=1))
    assert service.now() == now
    assert service.event(event.event_id).event.status is EventStatus.SCHEDULED
    disk.full = False
    later(disk)
    (other,) = service.execute(Restart("vmB"))
    assert service.now() == now
    assert service.event(other.event_id).event.not_before == event.not_before


def test_event_ids_drawn_by_a_refused_change_are_never_shown_twice(
    service: ScheduledEventsService,
    disk: Disk,
    settings: ServeSettings,
) -> None:
    """Issue text: after the restart, vmC's acknowledged event was gone and vmC was shown
    an id another VM had been shown for a different event. The id a refused change drew was
    shown to nobody, so the next change draws it again; every id ever shown names one event,
    and a restart shows the same ones."""
    seen: dict[str, tuple[str, ...]] = {}

    def look() -> None:
        for name in ADDRESSES:
            for event in service.document(name).events:
                resources = tuple(r.name for r in event.resources)
                assert seen.setdefault(event.event_id, resources) == resources

    service.execute(Restart("vmA"))
    look()
    disk.full = True
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    look()
    disk.full = False
    later(disk)
    service.execute(Restart("vmC"))
    service.execute(Restart("vmB"))
    look()
    before = shown(service)
    assert service.journal is not None
    service.journal.close()
    again = open_service(settings)
    assert shown(again) == before
    look()
    assert again.journal is not None
    again.journal.close()


def test_answers_kept_from_before_a_refusal_are_not_repeated_after_it(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """The socket server repeats a poll's answer while the platform's count of changes reads
    what it read then (Arrival.repeats_under). The platform rebuilt after a refusal counts on
    from the old one's, so an answer kept before never passes for the rebuilt one's."""
    first = service.request_from(ADDRESSES["vmA"], "127.0.0.1", CURRENT_VERSION)
    assert first is not None
    assert first.repeats_under is not None
    disk.full = True
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    assert service.request_again("vmA", first.repeats_under) is None
    again = service.request_from(ADDRESSES["vmA"], "127.0.0.1", CURRENT_VERSION)
    assert again is not None
    assert again.repeats_under is not None
    assert again.repeats_under > first.repeats_under
    assert again.document is not None
    assert first.document is not None
    assert again.document.body == first.document.body


def test_a_journal_that_cannot_be_read_back_refuses_everything_until_it_can(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """A refused write undone by rebuilding from the journal needs the journal readable. If
    it is not (an I/O error rather than a full disk), the platform may hold the change, so
    nothing is read from it: VMs and the control API get 503 until a rebuild succeeds (tried
    again after the quiet period); the time is still told, as every answer's Date needs it."""
    (event,) = service.execute(Restart("vmA"))
    before = shown(service)
    told = service.now()
    endpoint = ImdsEndpoint(service)
    disk.full = disk.unreadable = True
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    for read in (service.events, lambda: service.document("vmA"), service.clock_status):
        with pytest.raises(StoreUnavailableError, match="cannot read its journal back") as no:
            read()
        assert status_of(no.value) == 503
    refused = endpoint.handle(request("GET", "vmA"))
    assert (refused.status, orjson.loads(refused.body)) == (503, UNAVAILABLE)
    refused = approve(endpoint, "vmA", event.event_id)
    assert (refused.status, orjson.loads(refused.body)) == (503, UNAVAILABLE)
    assert service.now() == told  # the manual clock's reading, unmoved
    disk.full = disk.unreadable = False
    with pytest.raises(StoreUnavailableError):  # not tried again within the quiet period
        service.events()
    later(disk)
    assert shown(service) == before


def test_a_value_the_journal_would_not_keep_is_refused_before_anything_changes(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """A description the journal cannot store exactly (a lone surrogate, which no UTF-8
    text holds) is refused with 422 at the control API, before the event exists."""
    before = shown(service)
    with pytest.raises(UnstorableValueError) as refused:
        service.execute(ScheduleEvent("Reboot", ("vmA",), description="\ud800"))
    assert status_of(refused.value) == 422
    assert shown(service) == before
    assert disk.appends == 0


def test_a_repeated_poll_that_would_re_enable_is_refused_and_resets_nothing(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """SPEC 2 [seen]: a VM back after 24 h without requests starts its DocumentIncarnation
    afresh. The poll that does it, on the path a kept connection's repeated poll takes
    (ImdsEndpoint.respond_again), is a change too: refused with 503 when it cannot be
    recorded, the incarnation kept and the VM idle still; accepted once it can."""
    endpoint = ImdsEndpoint(service)
    service.execute(Restart("vmA"))
    poll = request("GET", "vmA")
    answer = endpoint.respond(poll)
    assert answer.vm is not None
    assert answer.repeats_under is not None
    service.advance_clock(timedelta(hours=25))  # the event came and went meanwhile
    shown = service.document("vmA").incarnation
    assert shown > 1
    disk.full = True
    assert endpoint.respond_again(poll, answer.response, answer.vm, answer.repeats_under) is None
    refused = endpoint.respond(poll).response
    assert (refused.status, orjson.loads(refused.body)) == (503, UNAVAILABLE)
    assert service.document("vmA").incarnation == shown
    # the platform rebuilt to undo it knows who asked when, as the one it replaced did:
    # vmB, silent as long, is idle still (a restart of forewarn would count it as asking)
    assert not service.vm_state("vmA").receiving
    assert not service.vm_state("vmB").receiving
    disk.full = False
    later(disk)
    assert endpoint.respond(poll).response.status == 200
    assert service.document("vmA").incarnation == 1


def test_readiness_says_refusing_exactly_for_the_quiet_period(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """docs/control.md, "Health": ``/readyz`` is unready with "the store refused a change a
    moment ago" while "a change was answered 503 in the last seconds ... at least 1 with
    SQLite; changes are refused meanwhile". Readiness reads it without ending the period:
    ready again at the period's last instant's end, without any change tried."""
    assert service.write_refused() is None
    disk.full = True
    refused_at = disk.stopwatch.seconds
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    disk.full = False
    for moment in (0.0, QUIET_SECONDS - 0.001):
        disk.stopwatch.seconds = refused_at + moment
        assert service.write_refused() == "the store refused a change a moment ago"
    disk.stopwatch.seconds = refused_at + QUIET_SECONDS
    assert service.write_refused() is None
    disk.stopwatch.seconds = refused_at + 10 * QUIET_SECONDS
    assert service.write_refused() is None


def test_readiness_stays_refusing_while_the_journal_cannot_be_read_back(
    service: ScheduledEventsService, disk: Disk
) -> None:
    """docs/control.md, "Every mutation is one command": a journal that cannot even be read
    back leaves every call answering 503 "until it is": unready past the quiet period too,
    until a read brings the platform back; that rebuild starts a quiet period of its own
    (forewarn.writer), after which it is ready."""
    disk.full = disk.unreadable = True
    with pytest.raises(NotJournaledError):
        service.execute(Restart("vmB"))
    later(disk)
    assert service.write_refused() == "the store refused a change a moment ago"
    disk.full = disk.unreadable = False
    service.events()  # tried again after the quiet period: read back
    later(disk)
    assert service.write_refused() is None


def test_a_journal_that_cannot_be_read_back_says_why_in_the_answer_and_the_log(
    service: ScheduledEventsService, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/control.md, "Health": the store's own error goes to the server's log. The
    answer names the write's failure; the log line names it and the read's, for the first
    rebuild and for each one tried again."""
    disk.full = disk.unreadable = True
    with caplog.at_level(logging.WARNING, logger="forewarn.store"):
        with pytest.raises(NotJournaledError):
            service.execute(Restart("vmB"))
        later(disk)
        with pytest.raises(StoreUnavailableError) as no:
            service.events()
    assert str(no.value) == (
        "forewarn cannot read its journal back after a change it could not record "
        f"({DISK_FULL}); it answers again once it can"
    )
    unreadable = (
        f"the journal cannot be read back after a change it refused ({DISK_FULL}): "
        "cannot use SQLite journal: disk I/O error"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "forewarn.store"] == [
        f"the journal refused a change, which is undone: {DISK_FULL}",
        unreadable,
        unreadable,
    ]


class WordlessError(Exception):
    """A failure whose text says nothing: its kind is named instead."""


def test_a_failure_without_words_is_named_by_its_kind(
    service: ScheduledEventsService,
    disk: Disk,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/control.md: a refused change answers 503 "with the store's reason"; a reason
    that is only blanks would say nothing, so the error's kind is its reason."""
    assert service.journal is not None

    def refuse(*_: object) -> None:
        raise WordlessError(" \n ")

    monkeypatch.setattr(service.journal, "append_if", refuse)
    monkeypatch.setattr(service.journal, "records", refuse)
    with (
        caplog.at_level(logging.WARNING, logger="forewarn.store"),
        pytest.raises(NotJournaledError) as refused,
    ):
        service.execute(Restart("vmB"))
    assert str(refused.value) == (
        "the change was not made, as the journal could not record it: WordlessError"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "forewarn.store"] == [
        "the journal refused a change, which is undone: WordlessError",
        "the journal cannot be read back after a change it refused (WordlessError): WordlessError",
    ]

"""DocumentIncarnation as the VM reads it (SPEC 2).

learn.microsoft.com/fr-fr/azure/virtual-machines/windows/scheduled-events, "Propriétés d'événement":
"Document Incarnation: Entier qui augmente lorsque le tableau d'événements change. Les documents
avec la même incarnation contiennent les mêmes informations d'événement, et l'incarnation sera
incrémentée lorsqu'un événement change."
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": "The
DocumentIncarnation is changing every time there's new information in Events."
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from forewarn.domain.errors import DomainError
from forewarn.domain.events import EventSource, EventStatus, EventType

if TYPE_CHECKING:
    from endpoint.conftest import Imds

UNKNOWN_ID = "5DD55B64-45AD-49D3-BBC9-F57D4EA97BD7"


def incarnation(imds: Imds, vm: str, version: str = "2020-07-01") -> int:
    value = imds.document(vm, version)["DocumentIncarnation"]
    assert isinstance(value, int)
    return value


def test_the_first_document_is_incarnation_1_with_no_events(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": the
    example starts with ``{"DocumentIncarnation": 1, "Events": []}``."""
    imds.add_vm("vm0")
    for version in ("2017-03-01", "2020-07-01"):
        assert imds.get("vm0", version).body == b'{"DocumentIncarnation":1,"Events":[]}'


def test_each_change_of_the_events_moves_it_by_one(pair: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": 1
    (empty) -> 2 (Scheduled) -> 3 (Started) -> 4 (empty again); a cancellation is a change too
    ("Event scheduling": the event "will be removed from the Events array")."""
    seen = [incarnation(pair, "WestNO_1")]
    event = pair.schedule(EventType.REBOOT, "WestNO_0")
    seen.append(incarnation(pair, "WestNO_1"))
    pair.approve("WestNO_1", event.event_id)
    seen.append(incarnation(pair, "WestNO_1"))
    pair.advance(timedelta(minutes=10))
    seen.append(incarnation(pair, "WestNO_1"))
    cancelled = pair.schedule(EventType.REDEPLOY, "WestNO_1")
    seen.append(incarnation(pair, "WestNO_0"))
    pair.cancel(cancelled.event_id)
    seen.append(incarnation(pair, "WestNO_0"))
    assert seen == [1, 2, 3, 4, 5, 6]
    assert pair.document("WestNO_0")["Events"] == []


def test_nothing_else_moves_it(pair: Imds) -> None:
    """Only a change of Events moves it: not reading again, not another api-version, not a
    refused or repeated approval, not time passing with nothing due, not the end of an
    impact, not another availability set's events (SPEC 2 [doc] [seen]; SPEC 3 [ours]: a
    refused approval changes nothing)."""
    event = pair.schedule(EventType.REBOOT, "WestNO_0", source=EventSource.USER)
    expected = incarnation(pair, "WestNO_1")
    body = pair.get("WestNO_1").body
    for _ in range(3):
        assert pair.get("WestNO_1").body == body
    for version in ("2017-03-01", "2017-08-01", "2019-04-01"):
        assert incarnation(pair, "WestNO_1", version) == expected
    assert pair.approve("WestNO_1", UNKNOWN_ID).status == 400
    assert pair.post("WestNO_1", b"not json").status == 400
    assert pair.get("WestNO_1", headers={}).status == 400
    pair.advance(timedelta(minutes=14, seconds=59))
    assert incarnation(pair, "WestNO_1") == expected
    pair.add_vm("Other_0", availability_set="Other")
    pair.schedule(EventType.FREEZE, "Other_0")
    assert incarnation(pair, "WestNO_1") == expected
    assert pair.approve("WestNO_1", event.event_id).status == 200
    started = incarnation(pair, "WestNO_1")
    assert started == expected + 1
    assert pair.approve("WestNO_1", event.event_id).status == 200
    pair.advance(timedelta(seconds=7))  # WestNO_0's reboot is over: it answers again
    assert incarnation(pair, "WestNO_0") == incarnation(pair, "WestNO_1") == started


# -- the property: over any sequence of platform and VM actions ------------------------------

OBSERVERS = ("a", "b", "c")
#: a and b share an availability set and see each other's events; c is alone.
RESOURCE_SETS = (("a",), ("b",), ("a", "b"), ("b", "a"), ("c",))
AUDIENCE = {"a": {"a", "b"}, "b": {"a", "b"}, "c": {"c"}}
TYPES = (EventType.FREEZE, EventType.REBOOT, EventType.REDEPLOY)


@dataclass
class Observer:
    """What one VM has read so far."""

    incarnation: int = 0
    events: bytes = b""
    fresh: bool = True  # the last read happened right before the latest action
    by_incarnation: dict[int, bytes] = field(default_factory=dict)


@dataclass
class History:
    observers: dict[str, Observer] = field(
        default_factory=lambda: {name: Observer() for name in OBSERVERS}
    )
    status: dict[str, str] = field(default_factory=dict)
    identity: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def read(self, imds: Imds, expected: dict[str, int | None]) -> None:
        """Read every VM and check it against all it read before.

        ``expected`` holds, per VM, by how much the latest action must have moved its
        incarnation, or None when the action may have caused any number of changes.
        """
        for name in OBSERVERS:
            response = imds.get(name)
            seen = self.observers[name]
            if response.status == 0:  # rebooting or frozen: no answer, so nothing to check
                seen.fresh = False
                continue
            assert response.status == 200, response
            document: dict[str, Any] = orjson.loads(response.body)
            now, events = document["DocumentIncarnation"], orjson.dumps(document["Events"])
            assert now >= seen.incarnation, "DocumentIncarnation went backwards"
            assert seen.by_incarnation.setdefault(now, events) == events, (
                "one incarnation, two different Events arrays"
            )
            if events != seen.events and seen.incarnation:
                assert now > seen.incarnation, "Events changed, DocumentIncarnation did not"
            delta = expected[name]
            if seen.fresh and seen.incarnation and delta is not None:
                assert now - seen.incarnation == delta, (name, now, seen.incarnation, delta)
            for event in document["Events"]:
                self._check_event(event)
            seen.incarnation, seen.events, seen.fresh = now, events, True

    def _check_event(self, event: dict[str, Any]) -> None:
        """EventId is stable: same type and Resources for life; never Started -> Scheduled."""
        event_id = event["EventId"]
        identity = (event["EventType"], tuple(event["Resources"]))
        assert self.identity.setdefault(event_id, identity) == identity
        if self.status.get(event_id) == "Started":
            assert event["EventStatus"] == "Started", "an event went back to Scheduled"
        self.status[event_id] = event["EventStatus"]


def moved(audience: set[str], by: int) -> dict[str, int | None]:
    return {name: by if name in audience else 0 for name in OBSERVERS}


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_incarnation_follows_the_events_over_any_history(
    make_imds: type[Imds], data: st.DataObject
) -> None:
    """SPEC 2 [doc] [seen]: DocumentIncarnation increases whenever this VM's Events array
    changes, by exactly one per change here (each action below changes it at most once), never
    otherwise, never goes backwards, and one incarnation always means one Events array;
    EventIds are stable and a Started event never returns to Scheduled (SPEC 2 [doc])."""
    imds = make_imds()
    imds.add_vm("a", availability_set="s")
    imds.add_vm("b", availability_set="s")
    imds.add_vm("c")
    history = History()
    history.read(imds, moved(set(), 0))
    ids: list[str] = []
    for _ in range(data.draw(st.integers(min_value=1, max_value=25), label="steps")):
        action = data.draw(
            st.sampled_from(["schedule", "approve", "approve-unknown", "cancel", "advance"])
        )
        expected: dict[str, int | None]
        if action == "schedule":
            resources = data.draw(st.sampled_from(RESOURCE_SETS))
            event = imds.schedule(
                data.draw(st.sampled_from(TYPES)),
                *resources,
                duration_seconds=data.draw(st.sampled_from([-1, 0, 5])),
                notice=timedelta(minutes=15, seconds=data.draw(st.integers(0, 900))),
            )
            ids.append(event.event_id)
            expected = moved(AUDIENCE[resources[0]], 1)
        elif action == "approve" and ids:
            event_id = data.draw(st.sampled_from(ids))
            approver = data.draw(st.sampled_from(OBSERVERS))
            live = {view.event.event_id: view for view in imds.platform.events()}
            view = live.get(event_id)
            response = imds.approve(approver, event_id)
            visible = view is not None and approver in view.audience
            if response.status == 0:  # the approver is down and cannot be heard
                expected = moved(set(), 0)
            elif not visible:
                assert response.status == 400
                expected = moved(set(), 0)
            else:
                assert view is not None
                assert response.status == 200
                starts = view.event.status is EventStatus.SCHEDULED
                expected = moved(set(view.audience), 1 if starts else 0)
        elif action == "cancel" and ids:
            event_id = data.draw(st.sampled_from(ids))
            live = {view.event.event_id: view for view in imds.platform.events()}
            try:
                imds.cancel(event_id)
            except DomainError:  # gone already, or Started: nothing may change
                expected = moved(set(), 0)
            else:
                expected = moved(set(live[event_id].audience), 1)
        elif action == "advance":
            seconds = data.draw(st.integers(min_value=0, max_value=1500))
            due = imds.platform.next_deadline()
            quiet = due is None or due > imds.clock.now() + timedelta(seconds=seconds)
            imds.advance(timedelta(seconds=seconds))
            expected = moved(set(), 0) if quiet else dict.fromkeys(OBSERVERS)
        else:
            response = imds.approve(data.draw(st.sampled_from(OBSERVERS)), UNKNOWN_ID)
            assert response.status in (0, 400)
            expected = moved(set(), 0)
        history.read(imds, expected)


# -- through an api-version that hides some event types ---------------------------------------

#: Each a version's view: 2017-08-01 shows neither Preempt nor Terminate, 2017-11-01 shows
#: Preempt, 2019-01-01 on show both (the release notes:
#: learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
#: Availability").
VIEWS = ("2017-08-01", "2017-11-01", "2020-07-01")


def test_a_change_a_version_hides_moves_neither_its_incarnation_nor_its_etag(pair: Imds) -> None:
    """The incarnation "increases when the events array changes. Documents with the same
    incarnation contain the same event information"
    (learn.microsoft.com/fr-fr/azure/virtual-machines/windows/scheduled-events, "Event Properties"),
    "is changing every time there's new information in Events"
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses") and
    "provides an easy way to inspect if the Events payload has changed" (terminate page, SPEC 1.4):
    what a version hides is no new information in its Events, so its incarnation stays, a
    conditional GET answers 304, and the next change it shows brings it to the VM's incarnation ("It
    may jump by more than one", SPEC 2)."""
    pair.schedule(EventType.FREEZE, "WestNO_0", notice=timedelta(days=1))
    assert [incarnation(pair, "WestNO_1", v) for v in VIEWS] == [2, 2, 2]
    bodies = {v: pair.get("WestNO_1", v).body for v in VIEWS}
    pair.schedule(EventType.TERMINATE, "WestNO_0", notice=timedelta(days=1))
    assert [incarnation(pair, "WestNO_1", v) for v in VIEWS] == [2, 2, 3]
    for version in ("2017-03-01", "2017-08-01", "2017-11-01"):
        assert incarnation(pair, "WestNO_1", version) == 2
    for version in VIEWS[:2]:
        assert pair.get("WestNO_1", version).body == bodies[version], "the same answer"
        conditional = pair.request(
            "GET",
            "WestNO_1",
            query=f"api-version={version}",
            headers={"Metadata": "true", "If-None-Match": '"2"'},
        )
        assert (conditional.status, conditional.etag) == (304, b'"2"')
    preempt = pair.schedule(EventType.PREEMPT, "WestNO_0", notice=timedelta(days=1))
    assert [incarnation(pair, "WestNO_1", v) for v in VIEWS] == [2, 4, 4]
    pair.cancel(preempt.event_id)
    assert [incarnation(pair, "WestNO_1", v) for v in VIEWS] == [2, 5, 5]
    freeze = next(e for e in pair.platform.events() if e.event.event_type is EventType.FREEZE)
    pair.cancel(freeze.event.event_id)
    assert [incarnation(pair, "WestNO_1", v) for v in VIEWS] == [6, 6, 6], "all shown: the VM's"
    assert pair.document("WestNO_1", "2017-08-01") == {"DocumentIncarnation": 6, "Events": []}


ALL_TYPES = tuple(EventType)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_each_version_s_incarnation_moves_exactly_when_its_events_do(
    make_imds: type[Imds], data: st.DataObject
) -> None:
    """The rule above over any history of every event type, read through three versions
    after every action: for each version, the incarnation never goes backwards, one
    incarnation is one Events array, and it moves if and only if that version's Events
    changed (SPEC 2; learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example
    responses")."""
    imds = make_imds()
    imds.add_vm("a", availability_set="s")
    imds.add_vm("b", availability_set="s")  # the reader: every event impacts a, never b
    last: dict[str, tuple[int, bytes]] = {}
    by_incarnation: dict[tuple[str, int], bytes] = {}
    ids: list[str] = []

    def read() -> None:
        for version in VIEWS:
            document = imds.document("b", version)
            now, events = document["DocumentIncarnation"], orjson.dumps(document["Events"])
            assert by_incarnation.setdefault((version, now), events) == events, version
            if version in last:
                before, seen = last[version]
                assert now >= before, (version, "went backwards")
                assert (now != before) == (events != seen), (version, before, now)
            last[version] = (now, events)

    read()
    for _ in range(data.draw(st.integers(min_value=1, max_value=20), label="steps")):
        action = data.draw(st.sampled_from(["schedule", "cancel", "advance"]))
        if action == "schedule" and "a" in {vm.name for vm in imds.platform.vms()}:
            event = imds.schedule(
                data.draw(st.sampled_from(ALL_TYPES)),
                "a",
                notice=timedelta(minutes=15, seconds=data.draw(st.integers(0, 900))),
            )
            ids.append(event.event_id)
        elif action == "cancel" and ids:
            with contextlib.suppress(DomainError):  # gone already, or Started
                imds.cancel(data.draw(st.sampled_from(ids)))
        else:
            imds.advance(timedelta(seconds=data.draw(st.integers(0, 1500))))
        read()

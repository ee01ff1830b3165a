"""GET /metadata/scheduledevents: what each api-version shows, and how (SPEC 1 and 2).

Everything goes through ``ImdsEndpoint.handle`` so the bytes checked are the bytes a VM gets.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from forewarn import vm_requests
from forewarn.domain import descriptions
from forewarn.domain.api_versions import SCHEDULED_EVENTS_VERSIONS, find_version
from forewarn.domain.documents import Document
from forewarn.domain.events import Event, EventSource, EventStatus, EventType, Resource
from forewarn.service import EncodedDocument

if TYPE_CHECKING:
    from endpoint.conftest import Imds

ALL_VERSIONS = [
    "2017-03-01",
    "2017-08-01",
    "2017-11-01",
    "2019-01-01",
    "2019-04-01",
    "2019-08-01",
    "2020-07-01",
]
BASE_KEYS = ["EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"]
BASE_TYPES = ["Freeze", "Reboot", "Redeploy"]

#: learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
#: Availability", release notes per version: 2017-03-01 "Initial release"; 2017-08-01 "Removed
#: prepended underscore from resource names for IaaS VMs"; 2017-11-01 "Added support for Spot VM
#: eviction EventType 'Preempt'"; 2019-01-01 "Added support for virtual machine scale sets EventType
#: 'Terminate'"; 2019-04-01 "Added support for Event Description"; 2019-08-01 "Added support for
#: Event Source"; 2020-07-01 "Added support for Event Duration". The 2017-03-01 field set is the
#: preview's (docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017),
#: "Query for events"). version -> (event keys in order, event types shown, IaaS names prefixed with
#: "_")
SHOWN: dict[str, tuple[list[str], list[str], bool]] = {
    "2017-03-01": (BASE_KEYS, BASE_TYPES, True),
    "2017-08-01": (BASE_KEYS, BASE_TYPES, False),
    "2017-11-01": (BASE_KEYS, [*BASE_TYPES, "Preempt"], False),
    "2019-01-01": (BASE_KEYS, [*BASE_TYPES, "Preempt", "Terminate"], False),
    "2019-04-01": ([*BASE_KEYS, "Description"], [*BASE_TYPES, "Preempt", "Terminate"], False),
    "2019-08-01": (
        [*BASE_KEYS, "Description", "EventSource"],
        [*BASE_TYPES, "Preempt", "Terminate"],
        False,
    ),
    "2020-07-01": (
        [*BASE_KEYS, "Description", "EventSource", "DurationInSeconds"],
        [*BASE_TYPES, "Preempt", "Terminate"],
        False,
    ),
}

GUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")


def one_of_each_type(imds: Imds) -> dict[str, str]:
    """Five VMs of one availability set, one Scheduled event of each type; type -> EventId."""
    for index in range(5):
        imds.add_vm(f"web_{index}", availability_set="web")
    ids = {}
    for index, event_type in enumerate(EventType):
        ids[event_type.value] = imds.schedule(event_type, f"web_{index}").event_id
    return ids


def keys_in_order(body: bytes) -> list[list[str]]:
    """The key order of the document and of each event, as written on the wire."""
    seen: list[list[str]] = []

    def record(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen.append([key for key, _ in pairs])
        return dict(pairs)

    json.loads(body, object_pairs_hook=record)
    return seen


def test_the_versions_table_is_the_documented_one() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Version and region
    availability": "Versions are mandatory; the current version is 2020-07-01." The list is the
    release-notes table."""
    assert [version.name for version in SCHEDULED_EVENTS_VERSIONS] == ALL_VERSIONS


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_each_version_shows_its_fields_and_only_its_event_types(imds: Imds, version: str) -> None:
    """An event whose type a version does not know is not shown to that version at all (SPEC 2,
    "What each api-version shows" [doc: release notes])."""
    ids = one_of_each_type(imds)
    keys, types, underscore = SHOWN[version]
    document = imds.document("web_0", version)
    assert [event["EventType"] for event in document["Events"]] == types
    for event in document["Events"]:
        assert list(event) == keys
        assert event["EventId"] == ids[event["EventType"]]
        index = list(ids).index(event["EventType"])
        assert event["Resources"] == [("_" if underscore else "") + f"web_{index}"]


def test_an_unknown_type_alone_leaves_an_empty_array(imds: Imds) -> None:
    """SPEC 2 [doc: release notes]: Terminate arrived with 2019-01-01 and Preempt with
    2017-11-01; older clients see an empty Events array, not an event they cannot parse."""
    imds.add_vm("ss_0", vm_scale_set_name="ss")
    imds.schedule(EventType.TERMINATE, "ss_0", source=EventSource.USER)
    assert imds.document("ss_0", "2017-11-01")["Events"] == []
    assert [e["EventType"] for e in imds.document("ss_0", "2019-01-01")["Events"]] == ["Terminate"]
    imds.add_vm("spot", availability_set=None)
    imds.schedule(EventType.PREEMPT, "spot")
    assert imds.document("spot", "2017-08-01")["Events"] == []
    assert len(imds.document("spot", "2017-11-01")["Events"]) == 1


def test_2017_03_01_prefixes_iaas_names_and_later_versions_do_not(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability", 2017-08-01: "Removed prepended underscore from resource names for IaaS VMs"."""
    imds.add_vm("WestNO_0", availability_set="WestNO")
    imds.add_vm("WestNO_1", availability_set="WestNO")
    imds.schedule(EventType.FREEZE, "WestNO_0", "WestNO_1")
    old = imds.document("WestNO_0", "2017-03-01")["Events"][0]["Resources"]
    assert old == ["_WestNO_0", "_WestNO_1"]
    for version in ALL_VERSIONS[1:]:
        resources = imds.document("WestNO_0", version)["Events"][0]["Resources"]
        assert resources == ["WestNO_0", "WestNO_1"], version


def test_classic_role_instances_keep_their_names_in_2017_03_01(imds: Imds) -> None:
    """The underscore was prepended "for IaaS VMs" only
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability"); cloud-service role instances are shown as the docs' example Resources
    ["FrontEnd_IN_0", "BackEnd_IN_0"]
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties")."""
    imds.add_vm("FrontEnd_IN_0", cloud_service="svc", iaas=False)
    imds.add_vm("BackEnd_IN_0", cloud_service="svc", iaas=False)
    imds.schedule(EventType.REBOOT, "FrontEnd_IN_0", "BackEnd_IN_0")
    for version in ("2017-03-01", "2017-08-01", "2020-07-01"):
        event = imds.document("BackEnd_IN_0", version)["Events"][0]
        assert event["Resources"] == ["FrontEnd_IN_0", "BackEnd_IN_0"], version


def test_key_order_is_the_captured_one(imds: Imds) -> None:
    """SPEC 2 [seen]: DocumentIncarnation, Events; in an event EventId, EventStatus, EventType,
    ResourceType, Resources, NotBefore, Description, EventSource, DurationInSeconds, as in
    learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses"."""
    one_of_each_type(imds)
    body = imds.get("web_0", "2020-07-01").body
    orders = keys_in_order(body)
    assert orders[-1] == ["DocumentIncarnation", "Events"]
    assert orders[:-1] == [SHOWN["2020-07-01"][0]] * 5


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_documents_are_compact_json(imds: Imds, version: str) -> None:
    """SPEC 1 [seen]: compact JSON, no spaces or newlines between tokens."""
    one_of_each_type(imds)
    imds.add_vm("lone")
    body = imds.get("web_1", version).body
    compact = json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False).encode()
    assert body == compact
    assert imds.get("lone", version).body == b'{"DocumentIncarnation":1,"Events":[]}'


def test_responses_are_json_in_utf_8(imds: Imds) -> None:
    """SPEC 1 [doc] [seen]: ``Content-Type: application/json; charset=utf-8``, for documents
    and for error bodies alike."""
    imds.add_vm("vm0")
    ok = imds.get("vm0")
    assert (ok.status, ok.content_type) == (200, b"application/json; charset=utf-8")
    bad = imds.get("vm0", headers={})
    assert (bad.status, bad.content_type) == (400, b"application/json; charset=utf-8")


def test_not_before_is_rfc_1123_gmt_while_scheduled(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties",
    NotBefore: "Mon, 19 Sep 2016 18:29:47 GMT"; the Freeze minimum notice is 15 minutes ("Event
    Scheduling"). The docs' example: "NotBefore":  "Mon, 11 Apr 2022 22:26:58 GMT"."""
    imds.add_vm("vm0")
    imds.schedule(EventType.FREEZE, "vm0")
    assert imds.document("vm0")["Events"][0]["NotBefore"] == "Mon, 11 Apr 2022 22:26:58 GMT"
    imds.schedule(EventType.REDEPLOY, "vm0", notice=timedelta(days=7, hours=2))
    assert imds.document("vm0")["Events"][1]["NotBefore"] == "Tue, 19 Apr 2022 00:11:58 GMT"


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_not_before_is_empty_once_started(imds: Imds, version: str) -> None:
    """learn.microsoft.com/fr-fr/azure/virtual-machines/windows/scheduled-events, "Propriétés
    d'événement", NotBefore: "Est vide si l'événement a déjà démarré";
    learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
    "EventStatus":  "Started", ... "NotBefore":  ""."""
    imds.add_vm("a", availability_set="s")
    imds.add_vm("b", availability_set="s")
    event = imds.schedule(EventType.REBOOT, "a")
    assert imds.approve("b", event.event_id).status == 200
    shown = imds.document("b", version)["Events"][0]
    assert (shown["EventStatus"], shown["NotBefore"]) == ("Started", "")


def test_event_ids_are_upper_case_guids_and_stable(imds: Imds) -> None:
    """SPEC 2 [doc] [seen]: "EventId: upper-case GUID, globally unique, stable for the life of
    the event" (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example
    responses": "C7061BAC-AFDC-4513-B24B-AA5F13A16123" in both the Scheduled and the Started
    document)."""
    imds.add_vm("a", availability_set="s")
    imds.add_vm("b", availability_set="s")
    events = [imds.schedule(EventType.REDEPLOY, "a") for _ in range(50)]
    ids = [event.event_id for event in events]
    assert all(GUID.match(event_id) for event_id in ids)
    assert len(set(ids)) == len(ids)
    shown = [e["EventId"] for e in imds.document("a")["Events"]]
    assert shown == ids
    assert [e["EventId"] for e in imds.document("b", "2017-03-01")["Events"]] == ids
    assert imds.approve("b", ids[0]).status == 200
    after = imds.document("b")["Events"]
    assert [e["EventId"] for e in after] == ids
    assert after[0]["EventStatus"] == "Started"


def test_event_ids_follow_the_seed(imds: Imds, make_imds: type[Imds]) -> None:
    """SPEC 2 [ours] with docs/serve.md, "`forewarn serve` options": seeded EventIds, so a run replays exactly."""
    twin, other = make_imds(), make_imds(seed=1)
    for platform in (imds, twin, other):
        platform.add_vm("vm0")
        platform.schedule(EventType.REBOOT, "vm0")
    assert imds.get("vm0").body == twin.get("vm0").body
    assert (
        imds.document("vm0")["Events"][0]["EventId"]
        != (other.document("vm0")["Events"][0]["EventId"])
    )


def test_description_source_and_duration_are_shown_as_given(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event properties":
    Description "Host server is undergoing maintenance."; EventSource "Platform" / "User";
    DurationInSeconds "9: The interruption caused by the event will last for 9 seconds", "0: The
    event won't interrupt the VM", "-1: The default value used if the impact duration is either
    unknown or not applicable". An empty Description is shown as "" (SPEC 2 [seen])."""
    imds.add_vm("vm0")
    imds.schedule(EventType.REBOOT, "vm0", description=descriptions.HOST_MAINTENANCE)
    imds.schedule(
        EventType.FREEZE,
        "vm0",
        description=descriptions.LIVE_MIGRATION,
        duration_seconds=9,
        source=EventSource.PLATFORM,
    )
    imds.schedule(EventType.REDEPLOY, "vm0", source=EventSource.USER, duration_seconds=0)
    shown = [
        (e["Description"], e["EventSource"], e["DurationInSeconds"], e["ResourceType"])
        for e in imds.document("vm0")["Events"]
    ]
    assert shown == [
        ("Host server is undergoing maintenance.", "Platform", -1, "VirtualMachine"),
        (
            "Virtual machine is being paused because of a memory-preserving Live Migration "
            "operation.",
            "Platform",
            9,
            "VirtualMachine",
        ),
        ("", "User", 0, "VirtualMachine"),
    ]


def test_every_vm_of_the_set_sees_the_same_resources_in_the_same_order(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "elect
    a leader ... as simple as the first machine in the Resources field" only works if every VM reads
    the same list; "Scope": events for an availability set are delivered to all its VMs."""
    for name in ("db_2", "db_0", "db_1", "db_3"):
        imds.add_vm(name, availability_set="db")
    imds.schedule(EventType.REBOOT, "db_2", "db_0", "db_1")
    seen = {name: imds.document(name)["Events"][0]["Resources"] for name in imds.addresses}
    assert set(map(tuple, seen.values())) == {("db_2", "db_0", "db_1")}


def test_finished_and_cancelled_events_simply_disappear(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties",
    EventStatus: "No Completed or similar status is ever provided. The event is no longer returned
    when the event is finished."; "Event Scheduling": cancelled by Azure, "the event will be removed
    from the Events array"."""
    imds.add_vm("vm0")
    finished = imds.schedule(EventType.FREEZE, "vm0", duration_seconds=5)
    cancelled = imds.schedule(EventType.REBOOT, "vm0")
    imds.cancel(cancelled.event_id)
    events = imds.document("vm0")["Events"]
    assert [e["EventId"] for e in events] == [finished.event_id]
    imds.advance(timedelta(minutes=15, seconds=5))  # NotBefore, then the 5 s freeze
    assert imds.document("vm0")["Events"][0]["EventStatus"] == "Started"
    imds.advance(timedelta(minutes=10))
    assert imds.document("vm0")["Events"] == []
    for version in ALL_VERSIONS:
        assert b"Completed" not in imds.get("vm0", version).body


def test_vms_shown_the_same_document_share_its_bytes(imds: Imds) -> None:
    """Every VM of a fleet starts with the same empty document: it is encoded once, not once
    per VM, and an event for one VM re-encodes that VM's document alone."""
    for name in ("vm0", "vm1", "vm2"):
        imds.add_vm(name)
    before = {name: imds.get(name).body for name in ("vm0", "vm1", "vm2")}
    assert before["vm0"] is before["vm1"] is before["vm2"]
    imds.schedule(EventType.REBOOT, "vm0")
    assert b'"Reboot"' in imds.get("vm0").body
    assert imds.get("vm1").body is before["vm1"]
    assert imds.get("vm2").body is before["vm2"]


def test_members_of_a_set_shown_the_same_event_share_its_bytes_at_the_same_incarnation(
    imds: Imds,
) -> None:
    """A set's event is shown to every member
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics": "All the VMs
    in an availability set"): members whose documents are equal share one encoding; a member at
    another incarnation, though shown the very same events, is not given theirs."""
    for name in ("vm0", "vm1"):
        imds.add_vm(name, availability_set="west")
    called_off = imds.schedule(EventType.FREEZE, "vm0")
    imds.cancel(called_off.event_id)  # vm0 and vm1 at incarnation 3, showing nothing
    imds.add_vm("vm2", availability_set="west")  # at incarnation 1
    event = imds.schedule(EventType.REBOOT, "vm1")
    documents = {name: imds.document(name) for name in ("vm0", "vm1", "vm2")}
    assert imds.get("vm0").body is imds.get("vm1").body
    assert documents["vm0"] == documents["vm1"]
    assert documents["vm0"]["DocumentIncarnation"] == 4
    assert documents["vm2"]["DocumentIncarnation"] == 2
    assert documents["vm2"]["Events"] == documents["vm0"]["Events"]
    assert [e["EventId"] for e in documents["vm2"]["Events"]] == [event.event_id]


def test_encodings_kept_for_sharing_are_bounded_however_many_documents_pass() -> None:
    """A campaign shows each VM a document of its own: the table of shared encodings keeps at
    most its bound, however many pass through it, and still gives equal documents one body."""
    version = find_version("2020-07-01")
    assert version is not None
    bound = vm_requests._SHARED_ENCODINGS  # the request path's own table: nothing else reaches it
    events = [
        Event(
            f"{n:08X}-0000-4000-8000-000000000000",
            EventType.REBOOT,
            EventStatus.SCHEDULED,
            (Resource(f"vm{n}"),),
            None,
            "",
            EventSource.PLATFORM,
            -1,
        )
        for n in range(bound + 10)
    ]
    for event in events:
        EncodedDocument.of(Document(2, (event,)), version)
        assert len(vm_requests._shared) <= bound
    first, second = Document(2, (events[0],)), Document(2, (events[0],))
    assert EncodedDocument.of(first, version).body is EncodedDocument.of(second, version).body

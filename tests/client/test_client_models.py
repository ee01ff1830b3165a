"""The client's models, read from documented examples and from forewarn's own wire output."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from forewarn.client import (
    ComputeMetadata,
    EventSource,
    EventStatus,
    EventType,
    MalformedResponseError,
    ScheduledEvent,
    parse_compute,
    parse_document,
    parse_not_before,
)
from forewarn.domain import events as domain
from forewarn.domain.api_versions import SCHEDULED_EVENTS_VERSIONS
from forewarn.domain.vms import Vm
from forewarn.testing import ForewarnPlatform
from forewarn.wire.documents import encode_document
from forewarn.wire.instance import compute_fields

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)

# learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses", the
# second of the four documents.
DOCS_FREEZE_SCHEDULED = """
{
    "DocumentIncarnation":  2,
    "Events":  [
                   {
                       "EventId":  "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
                       "EventStatus":  "Scheduled",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  [
                                         "WestNO_0",
                                         "WestNO_1"
                                     ],
                       "NotBefore":  "Mon, 11 Apr 2022 22:26:58 GMT",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  5
                   }
               ]
}
"""


def test_docs_example_document_reads_field_by_field() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": the
    Freeze two live-migrated VMs saw, read field by field."""
    document = parse_document(json.loads(DOCS_FREEZE_SCHEDULED), "2020-07-01")
    assert document.incarnation == 2
    (event,) = document.events
    assert event.event_id == "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
    assert event.status is EventStatus.SCHEDULED
    assert event.event_type is EventType.FREEZE
    assert event.resource_type == "VirtualMachine"
    assert event.resources == ("WestNO_0", "WestNO_1")
    assert event.not_before == datetime(2022, 4, 11, 22, 26, 58, tzinfo=UTC)
    assert event.description == (
        "Virtual machine is being paused because of a memory-preserving Live Migration operation."
    )
    assert event.source is EventSource.PLATFORM
    assert event.duration_seconds == 5
    assert event.is_scheduled
    assert not event.is_started
    assert event.impacts("WestNO_1")
    assert not event.impacts("WestNO_2")
    assert document.event("c7061bac-afdc-4513-b24b-aa5f13a16123") == event
    assert document.impacting("WestNO_0") == (event,)


def test_started_event_has_no_not_before() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
    once Started the same event shows ``"NotBefore":  ""``; SPEC 2: empty string once Started."""
    payload = json.loads(DOCS_FREEZE_SCHEDULED)
    payload["DocumentIncarnation"] = 3
    payload["Events"][0].update(EventStatus="Started", NotBefore="")
    (event,) = parse_document(payload).events
    assert event.is_started
    assert event.not_before is None


def test_rfc1123_and_preview_iso_not_before() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    NotBefore "Mon, 19 Sep 2016 18:29:47 GMT";
    docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "Event
    Properties": "2016-09-19T18:29:47Z"."""
    expected = datetime(2016, 9, 19, 18, 29, 47, tzinfo=UTC)
    assert parse_not_before("Mon, 19 Sep 2016 18:29:47 GMT") == expected
    assert parse_not_before("2016-09-19T18:29:47Z") == expected
    assert parse_not_before("") is None
    # Unreadable text reads as None ([ours]); the text itself stays in ``raw``.
    assert parse_not_before("soon") is None


def _platform_with_vm() -> ForewarnPlatform:
    return ForewarnPlatform(vms=[Vm(name="vm0", vm_id="id-vm0")], seed=3, start=START)


@pytest.mark.parametrize("version", SCHEDULED_EVENTS_VERSIONS, ids=lambda v: v.name)
def test_every_api_version_reads_with_missing_fields_as_none(version: Any) -> None:
    """SPEC 2, "What each api-version shows" (the release notes of
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability"): Description from 2019-04-01, EventSource from 2019-08-01, DurationInSeconds from
    2020-07-01; 2017-03-01 prefixes IaaS names with ``_``. Fields a version does not send read as
    None."""
    platform = _platform_with_vm()
    created = platform.schedule(
        domain.EventType.REBOOT,
        "vm0",
        source=domain.EventSource.USER,
        description="Virtual machine is going to be restarted as requested by authorized user.",
        duration_seconds=-1,
    )
    body = encode_document(platform.document("vm0"), version)
    document = parse_document(json.loads(body), version.name)
    (event,) = document.events
    assert event.event_id == created.event_id
    assert event.event_type is EventType.REBOOT
    assert event.not_before == START + timedelta(minutes=15)
    fields_added = {"2019-04-01": 1, "2019-08-01": 2, "2020-07-01": 3}
    shown = fields_added.get(version.name, 0)
    assert (event.description is not None) == (shown >= 1)
    assert (event.source is not None) == (shown >= 2)
    assert (event.duration_seconds is not None) == (shown >= 3)
    if version.name == "2017-03-01":
        assert event.resources == ("_vm0",)
    else:
        assert event.resources == ("vm0",)
    assert event.impacts("vm0"), "the _ prefix of 2017-03-01 still names vm0"


def test_underscore_names_only_match_under_2017_03_01() -> None:
    """The ``_`` prefix is a 2017-03-01 trait (2017-08-01: "Removed prepended underscore from
    resource names for IaaS VMs"); later versions compare names as they are."""
    payload = {"DocumentIncarnation": 1, "Events": [_event(Resources=["_vm0"])]}
    assert parse_document(payload, "2017-03-01").events[0].impacts("vm0")
    assert not parse_document(payload, "2017-08-01").events[0].impacts("vm0")


def _event(**fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "EventId": "602D9444-D2CD-49C7-8624-8643E7171297",
        "EventStatus": "Scheduled",
        "EventType": "Reboot",
        "ResourceType": "VirtualMachine",
        "Resources": ["vm0"],
        "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
    }
    event.update(fields)
    return event


def test_unknown_type_status_and_source_are_kept_as_strings() -> None:
    """SPEC 2 lists today's values; a value the client does not know is kept as its
    string rather than refused, so a newer service never breaks an older client [ours]."""
    payload = {
        "DocumentIncarnation": 9,
        "Events": [_event(EventType="Hibernate", EventStatus="Paused", EventSource="Operator")],
    }
    (event,) = parse_document(payload).events
    assert event.event_type == "Hibernate"
    assert not isinstance(event.event_type, EventType)
    assert event.status == "Paused"
    assert not event.is_scheduled
    assert not event.is_started
    assert event.source == "Operator"


def test_known_values_compare_equal_to_their_strings() -> None:
    (event,) = parse_document({"DocumentIncarnation": 1, "Events": [_event()]}).events
    assert event.event_type == "Reboot"
    assert event.status == "Scheduled"


def test_incarnation_and_duration_given_as_strings() -> None:
    """docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), C#
    sample: ``public string DocumentIncarnation``;
    learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, Python sample:
    ``int(event["DurationInSeconds"])``. Numeric strings read as integers."""
    payload = {"DocumentIncarnation": "5", "Events": [_event(DurationInSeconds="9")]}
    document = parse_document(payload)
    assert document.incarnation == 5
    assert document.events[0].duration_seconds == 9


def test_empty_events_means_nothing_scheduled() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Query for events": "An
    empty array means that currently no events are scheduled"; the docs' example starts at
    incarnation 1 with no events."""
    document = parse_document({"DocumentIncarnation": 1, "Events": []})
    assert document.incarnation == 1
    assert document.events == ()


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ([], "the body is not a JSON object"),
        ({"Events": []}, "no DocumentIncarnation"),
        ({"DocumentIncarnation": True, "Events": []}, "DocumentIncarnation is a boolean"),
        ({"DocumentIncarnation": "two", "Events": []}, "DocumentIncarnation is not an integer"),
        ({"DocumentIncarnation": 1}, "no Events array"),
        ({"DocumentIncarnation": 1, "Events": ["x"]}, "an event is not a JSON object"),
        ({"DocumentIncarnation": 1, "Events": [_event(EventId="")]}, "an event has no EventId"),
        (
            {"DocumentIncarnation": 1, "Events": [_event(Resources="vm0")]},
            "is not a list of names",
        ),
        ({"DocumentIncarnation": 1, "Events": [_event(EventType=None)]}, "EventType"),
        ({"DocumentIncarnation": 1, "Events": [_event(NotBefore=5)]}, "NotBefore"),
    ],
)
def test_what_is_not_a_document_is_refused(payload: Any, reason: str) -> None:
    """SPEC 2 gives the document's shape; a body without it is a
    MalformedResponseError that says what is missing [ours]."""
    with pytest.raises(MalformedResponseError, match=reason):
        parse_document(payload)


def test_equality_ignores_raw_and_version() -> None:
    """Two polls showing the same event compare equal, which :func:`diff_documents` relies on."""
    a = parse_document({"DocumentIncarnation": 1, "Events": [_event(Extra=1)]}, "2020-07-01")
    b = parse_document({"DocumentIncarnation": 1, "Events": [_event()]}, "2019-01-01")
    assert a == b
    assert a.events[0].raw["Extra"] == 1
    assert hash(a.events[0]) == hash(b.events[0])
    assert ScheduledEvent("X", EventType.FREEZE, EventStatus.SCHEDULED, (), None).raw == {}


def test_compute_metadata_from_forewarn_instance_fields() -> None:
    """SPEC 8: handlers find their own name in Resources; the name comes from the
    instance metadata's ``compute`` section, which forewarn serves (wire/instance.py)."""
    vm = Vm(
        name="WestNO_0",
        vm_id="3f1b",
        zone="2",
        platform_fault_domain=1,
        platform_update_domain=4,
        tags=(("role", "web"), ("tier", "1")),
    )
    compute = parse_compute(json.loads(json.dumps(compute_fields(vm))))
    assert isinstance(compute, ComputeMetadata)
    assert compute.name == "WestNO_0"
    assert compute.vm_id == "3f1b"
    assert compute.platform_fault_domain == 1
    assert compute.platform_update_domain == 4
    assert compute.zone == "2"
    assert dict(compute.tags) == {"role": "web", "tier": "1"}
    assert compute.resource_id.endswith("/virtualMachines/WestNO_0")


def test_compute_tags_from_the_older_string_form() -> None:
    """Older instance-metadata versions send only ``tags`` as ``name:value;...`` [seen]."""
    compute = parse_compute({"compute": {"name": "a", "tags": "role:web;owner:ops"}})
    assert dict(compute.tags) == {"role": "web", "owner": "ops"}
    assert compute.platform_fault_domain is None
    with pytest.raises(MalformedResponseError):
        parse_compute(["not", "an", "object"])

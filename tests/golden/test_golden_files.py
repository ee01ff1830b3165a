"""The wire, byte for byte: one document per api-version and one file per kind of response.

A change to field order, a date format, a message text or a status shows up here as a diff
of a file a reviewer can read. Files are only ever written when asked for with
``FOREWARN_REGENERATE_GOLDEN=1`` (see README.md next to this file); otherwise a missing or
different file fails the test.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from forewarn.commands import ScheduleEvent
from forewarn.config.fleet import Fleet
from forewarn.domain import descriptions
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.vms import Priority, Vm
from forewarn.server.imds import ImdsEndpoint, ImdsRequest, ImdsResponse, response_headers
from forewarn.testing import ForewarnPlatform

HERE = Path(__file__).resolve().parent
DOCUMENTS = HERE / "documents"
RESPONSES = HERE / "responses"
REGENERATE_VARIABLE = "FOREWARN_REGENERATE_GOLDEN"

#: A Monday; every time in the files follows from it.
START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
SEED = 1123
VERSIONS = (
    "2017-03-01",
    "2017-08-01",
    "2017-11-01",
    "2019-01-01",
    "2019-04-01",
    "2019-08-01",
    "2020-07-01",
)
SCHEDULED_EVENTS = "/metadata/scheduledevents"


def regenerate_requested(environ: Mapping[str, str]) -> bool:
    """Only an explicit ``1`` rewrites files; anything else compares."""
    return environ.get(REGENERATE_VARIABLE) == "1"


def check_golden(path: Path, actual: bytes, *, regenerate: bool) -> None:
    """Compare ``actual`` with the file at ``path``, or (re)write it when asked to."""
    if regenerate:
        if not path.exists() or path.read_bytes() != actual:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(actual)
        return
    if not path.exists():
        pytest.fail(
            f"golden file {path} is missing; create it with "
            f"{REGENERATE_VARIABLE}=1 .venv/bin/pytest tests/golden and review the diff"
        )
    expected = path.read_bytes()
    if actual != expected:
        diff = "\n".join(
            difflib.unified_diff(
                expected.decode("utf-8", "replace").splitlines(),
                actual.decode("utf-8", "replace").splitlines(),
                "golden",
                "actual",
                lineterm="",
            )
        )
        pytest.fail(f"{path.name} differs from the response:\n{diff}\n{expected!r}\n{actual!r}")


#: What changes on every response, masked so the files keep the headers' order and values.
MASKED_REQUEST_ID = b"<x-ms-request-id>"
MASKED_DATE = b"<Date>"


def response_file(response: ImdsResponse) -> bytes:
    """A response as a golden file: the status, the headers in order as every transport
    sends them (request id and Date masked; SPEC 1 "Response headers seen on the real
    service, in this order"), a blank line, then the body."""
    lines = [b"%d" % response.status]
    for name, value in response_headers(response, MASKED_REQUEST_ID, MASKED_DATE):
        lines.append(name + b": " + value)
    return b"\n".join(lines) + b"\n\n" + response.body


# -- the fixed platform ------------------------------------------------------------------------


class Fixture:
    """A four-instance scale set holding one event of each type, built the same way every run.

    web_1 reads: it is impacted only by Scheduled events, so it is up, and as a member of the
    placement group it sees every event of the group (SPEC 5).
    """

    def __init__(self) -> None:
        self.ticks = 0.0
        self.step = 1.0
        harness = ForewarnPlatform(
            fleet=Fleet(()), seed=SEED, start=START, monotonic=self.monotonic
        )
        self.clock = harness.clock
        self.service = harness.service
        self.platform = self.service._platform  # arranged directly: VMs added after start
        self.endpoint: ImdsEndpoint = harness.endpoint
        self.addresses: dict[str, str] = {}

    def monotonic(self) -> float:
        self.ticks += self.step
        return self.ticks

    def add_vm(self, name: str, **fields: Any) -> None:
        address = f"127.0.0.{len(self.addresses) + 2}"
        vm_id = f"00000000-0000-4000-8000-{len(self.addresses) + 1:012d}"
        self.platform.add_vm(Vm(name=name, vm_id=vm_id, address=address, **fields))
        self.addresses[name] = address

    def schedule(self, command: ScheduleEvent, after: timedelta) -> str:
        self.service.advance_clock(after)
        (event,) = self.service.execute(command)
        return event.event_id

    def request(
        self,
        vm: str = "web_1",
        *,
        method: str = "GET",
        path: str = SCHEDULED_EVENTS,
        query: str = "api-version=2020-07-01",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        address: str | None = None,
    ) -> ImdsResponse:
        return self.endpoint.handle(
            ImdsRequest(
                method=method,
                path=path,
                query=query,
                headers=dict({"metadata": "true"} if headers is None else headers),
                body=body,
                local_address=address or self.addresses[vm],
                peer_address="127.0.0.1",
            )
        )


def scale_set_fixture() -> Fixture:
    fixture = Fixture()
    for index in range(4):
        fixture.add_vm(
            f"web_{index}",
            vm_scale_set_name="web",
            platform_fault_domain=index % 2,
            platform_update_domain=index,
            host=f"node-{index % 2}",
            priority=Priority.SPOT if index == 3 else Priority.REGULAR,
        )
    platform, user = EventSource.PLATFORM.value, EventSource.USER.value
    fixture.schedule(
        ScheduleEvent(
            EventType.FREEZE.value,
            ("web_0", "web_1"),
            source=platform,
            description=descriptions.LIVE_MIGRATION,
            duration_seconds=5,
        ),
        timedelta(0),
    )
    fixture.schedule(
        ScheduleEvent(
            EventType.REBOOT.value,
            ("web_2",),
            source=platform,
            description=descriptions.VM_FAILURE,
            started=True,
        ),
        timedelta(minutes=2, seconds=3),
    )
    fixture.schedule(
        ScheduleEvent(
            EventType.REDEPLOY.value,
            ("web_1",),
            source=user,
            description=descriptions.USER_REDEPLOY,
        ),
        timedelta(minutes=1, seconds=1),
    )
    fixture.schedule(
        ScheduleEvent(EventType.TERMINATE.value, ("web_0",), source=user, notice_seconds=600),
        timedelta(seconds=59),
    )
    fixture.schedule(
        ScheduleEvent(EventType.PREEMPT.value, ("web_3",), source=platform, notice_seconds=30),
        timedelta(seconds=9),
    )
    return fixture


def cloud_service_fixture() -> Fixture:
    """Classic role instances, whose names 2017-03-01 did not prefix with ``_``."""
    fixture = Fixture()
    for name in ("FrontEnd_IN_0", "BackEnd_IN_0"):
        fixture.add_vm(name, cloud_service="shop", iaas=False, host="node-0")
    fixture.schedule(
        ScheduleEvent(
            EventType.REBOOT.value,
            ("FrontEnd_IN_0", "BackEnd_IN_0"),
            description=descriptions.HOST_MAINTENANCE,
        ),
        timedelta(0),
    )
    return fixture


# -- the cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One request to the scale-set fixture; ``burst`` requests first exhaust the rate limit."""

    method: str = "GET"
    path: str = SCHEDULED_EVENTS
    query: str = "api-version=2020-07-01"
    headers: dict[str, str] | None = None
    body: bytes = b""
    address: str | None = None
    burst: int = 0
    approve: tuple[str, ...] = field(default=())


def start_requests(*event_ids: str) -> bytes:
    return orjson.dumps({"StartRequests": [{"EventId": event_id} for event_id in event_ids]})


RESPONSE_CASES: dict[str, Case] = {
    "document": Case(),
    "not-modified": Case(headers={"metadata": "true", "if-none-match": '"6"'}),
    "approved": Case(method="POST", approve=("Freeze",)),
    "instance": Case(path="/metadata/instance", query="api-version=2021-02-01"),
    "instance-leaf-text": Case(
        path="/metadata/instance/compute/name", query="api-version=2021-02-01&format=text"
    ),
    "versions": Case(path="/metadata/versions", query=""),
    "error-missing-metadata-header": Case(headers={}),
    "error-missing-api-version": Case(query=""),
    "error-latest-api-version": Case(query="api-version=latest"),
    "error-x-forwarded-for": Case(headers={"metadata": "true", "x-forwarded-for": "10.1.0.4"}),
    "error-duplicate-parameter": Case(query="api-version=2020-07-01&api-version=2020-07-01"),
    "error-parameter-key-too-long": Case(query="api-version=2020-07-01&" + "k" * 65 + "=1"),
    "error-parameter-value-too-long": Case(query="api-version=2020-07-01&x=" + "v" * 257),
    "error-query-not-utf-8": Case(query="api-version=2020-07-01&x=%ff"),
    "error-unknown-path": Case(path="/metadata/scheduledevents/next"),
    "error-method-not-allowed": Case(method="DELETE"),
    "error-too-many-requests": Case(burst=5),
    "error-unknown-caller": Case(address="127.0.0.250"),
    "error-body-too-large": Case(method="POST", body=b" " * (16 * 1024 + 1)),
    "error-body-not-json": Case(method="POST", body=b"StartRequests=F020BA2E"),
    "error-body-not-object": Case(method="POST", body=b"[]"),
    "error-no-start-requests": Case(method="POST", body=b'{"StartRequests":[]}'),
    "error-event-id-not-a-string": Case(method="POST", body=b'{"StartRequests":[{"EventId":1}]}'),
    "error-too-many-start-requests": Case(
        method="POST", body=start_requests(*(f"{n:08X}" for n in range(101)))
    ),
    "error-document-incarnation-type": Case(
        method="POST", body=b'{"DocumentIncarnation":[2],"StartRequests":[{"EventId":"X"}]}'
    ),
    "error-unknown-event-id": Case(
        method="POST", body=start_requests("F020BA2E-3BC0-4C40-A10B-86575A9EABD5")
    ),
    "error-instance-api-version": Case(path="/metadata/instance", query="api-version=2020-07-01"),
    "error-instance-format": Case(
        path="/metadata/instance", query="api-version=2021-02-01&format=text"
    ),
    "error-instance-not-found": Case(
        path="/metadata/instance/compute/secret", query="api-version=2021-02-01"
    ),
}


def respond(case: Case) -> ImdsResponse:
    fixture = scale_set_fixture()
    body = case.body
    if case.approve:
        ids = {
            view.event.event_type.value: view.event.event_id for view in fixture.service.events()
        }
        body = start_requests(*(ids[event_type] for event_type in case.approve))
    if case.burst:
        fixture.step = 0.0
        for _ in range(case.burst):
            assert fixture.request().status == 200
    return fixture.request(
        method=case.method,
        path=case.path,
        query=case.query,
        headers=case.headers,
        body=body,
        address=case.address,
    )


def document_cases() -> dict[str, tuple[Fixture, str, str]]:
    scale_set, cloud_service = scale_set_fixture(), cloud_service_fixture()
    cases = {version: (scale_set, "web_1", version) for version in VERSIONS}
    cases["2017-03-01-cloud-service"] = (cloud_service, "BackEnd_IN_0", "2017-03-01")
    cases["2020-07-01-cloud-service"] = (cloud_service, "BackEnd_IN_0", "2020-07-01")
    return cases


DOCUMENT_CASES = document_cases()


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(DOCUMENT_CASES))
def test_document(name: str) -> None:
    """SPEC 2, "What each api-version shows" [doc: release notes] [seen], key order [seen],
    RFC 1123 NotBefore and "" once Started [doc], as one file per api-version."""
    fixture, vm, version = DOCUMENT_CASES[name]
    response = fixture.request(vm, query=f"api-version={version}")
    assert response.status == 200
    check_golden(
        DOCUMENTS / f"{name}.json",
        response.body,
        regenerate=regenerate_requested(os.environ),
    )


@pytest.mark.parametrize("name", list(RESPONSE_CASES))
def test_response(name: str) -> None:
    """SPEC 1 (statuses, ``{"error": ...}`` bodies, ``newest-versions``, Content-Type) and
    SPEC 3 (200 with an empty body), one file per kind of answer."""
    response = respond(RESPONSE_CASES[name])
    check_golden(
        RESPONSES / f"{name}.http",
        response_file(response),
        regenerate=regenerate_requested(os.environ),
    )


def test_the_fixture_is_what_the_files_claim() -> None:
    """The files only mean something if the fixture holds what they are said to show: one
    event of each type, one of them Started, seen by the reader."""
    fixture = scale_set_fixture()
    events = [view.event for view in fixture.service.events()]
    assert sorted(event.event_type.value for event in events) == sorted(t.value for t in EventType)
    assert [event.status.value for event in events].count("Started") == 1
    assert all("web_1" in view.audience for view in fixture.service.events())


def test_no_stale_files() -> None:
    """Every file in the folders belongs to a case, so a renamed case leaves nothing behind."""
    on_disk = {path.name for path in DOCUMENTS.glob("*")} | {
        path.name for path in RESPONSES.glob("*")
    }
    expected = {f"{name}.json" for name in DOCUMENT_CASES} | {
        f"{name}.http" for name in RESPONSE_CASES
    }
    assert on_disk <= expected, sorted(on_disk - expected)


def test_a_difference_fails_and_writes_nothing(tmp_path: Path) -> None:
    """Without the variable the files are never touched: a missing file and a different file
    both fail the test."""
    assert not regenerate_requested({})
    assert not regenerate_requested({REGENERATE_VARIABLE: "0"})
    assert not regenerate_requested({REGENERATE_VARIABLE: "true"})
    assert regenerate_requested({REGENERATE_VARIABLE: "1"})
    missing = tmp_path / "missing.json"
    with pytest.raises(pytest.fail.Exception, match="missing"):
        check_golden(missing, b"{}", regenerate=False)
    assert not missing.exists()
    different = tmp_path / "different.json"
    different.write_bytes(b'{"DocumentIncarnation":1,"Events":[]}')
    with pytest.raises(pytest.fail.Exception, match="differs"):
        check_golden(different, b'{"DocumentIncarnation":2,"Events":[]}', regenerate=False)
    assert different.read_bytes() == b'{"DocumentIncarnation":1,"Events":[]}'
    check_golden(different, b'{"DocumentIncarnation":2,"Events":[]}', regenerate=True)
    assert different.read_bytes() == b'{"DocumentIncarnation":2,"Events":[]}'

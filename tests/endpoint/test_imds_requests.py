"""What the endpoint accepts and refuses before it looks at events (SPEC 1)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import orjson
import pytest

from forewarn.domain.events import EventType
from forewarn.server.imds import ImdsRequest, split_target

if TYPE_CHECKING:
    from endpoint.conftest import Imds

NEWEST = b'"newest-versions":["2020-07-01","2019-08-01","2019-04-01"]}'
#: learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Versioning": "When you
#: don't specify a version, you get an error with a list of the newest supported versions".
MISSING_API_VERSION = (
    b'{"error":"Bad request. api-version was not specified in the request. '
    b'For more information refer to aka.ms/azureimds",' + NEWEST
)
#: SPEC 1 [doc]: "an invalid one says 'api-version is invalid'".
INVALID_API_VERSION = (
    b'{"error":"Bad request. api-version is invalid. '
    b'For more information refer to aka.ms/azureimds",' + NEWEST
)
MISSING_HEADER = b'{"error":"Bad request. Required metadata header not specified"}'
VERSIONS = ["2017-03-01", "2017-08-01", "2017-11-01", "2019-01-01", "2019-04-01"]
VERSIONS += ["2019-08-01", "2020-07-01"]


@pytest.fixture
def vm0(imds: Imds) -> Imds:
    imds.add_vm("vm0")
    return imds


# -- the Metadata header -------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Metadata": "false"}, {"Metadata": ""}, {"Metadata": "yes"}, {"Metadata-Flavor": "true"}],
    ids=["absent", "false", "empty", "yes", "other-name"],
)
def test_get_without_metadata_true_is_400(vm0: Imds, version: str, headers: dict[str, str]) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Headers": "The
    Metadata:true header is required for all scheduled events requests. Failure to include the
    header in the request results in a "Bad Request" response"; the text is the IMDS one (SPEC 1
    [doc: IMDS overview]). The 2017-03-01 preview asked for it on GET too
    (docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "Using
    Headers")."""
    response = vm0.get("vm0", version, headers=headers)
    assert (response.status, response.body) == (400, MISSING_HEADER)


@pytest.mark.parametrize("value", ["true", "True", "TRUE", "tRuE"])
@pytest.mark.parametrize("name", ["Metadata", "metadata", "METADATA"])
def test_the_header_is_matched_without_regard_to_case(vm0: Imds, name: str, value: str) -> None:
    """SPEC 1 [doc: IMDS overview]: header names are case-insensitive in HTTP, and the value
    ``true`` is matched case-insensitively (PowerShell's samples send ``"true"``, .NET clients
    ``True``)."""
    assert vm0.get("vm0", headers={name: value}).status == 200


# -- X-Forwarded-For and the query string --------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/metadata/scheduledevents"),
        ("POST", "/metadata/scheduledevents"),
        ("GET", "/metadata/instance/compute"),
        ("GET", "/metadata/versions"),
    ],
)
def test_a_forwarded_request_is_400(vm0: Imds, method: str, path: str) -> None:
    """SPEC 1 [doc: IMDS overview]: "A request carrying X-Forwarded-For is rejected (400)";
    IMDS is for the VM itself, never through a proxy."""
    response = vm0.request(
        method,
        "vm0",
        path=path,
        query="api-version=2020-07-01",
        headers={"Metadata": "true", "X-Forwarded-For": "10.0.0.4"},
        body=b'{"StartRequests":[{"EventId":"X"}]}',
    )
    assert response.status == 400
    assert vm0.error_of(response) == (
        "Bad request. Requests with an X-Forwarded-For header are not allowed"
    )


@pytest.mark.parametrize(
    "query",
    [
        "api-version=2020-07-01&api-version=2020-07-01",
        "api-version=2020-07-01&api-version=2019-08-01",
        "api-version=2020-07-01&x=1&x=2",
        "api-version=2020-07-01&api%2Dversion=2020-07-01",
    ],
    ids=["same", "different", "other-parameter", "percent-encoded"],
)
def test_a_repeated_query_parameter_is_400(vm0: Imds, query: str) -> None:
    """SPEC 1 [doc: IMDS overview]: "Duplicate query parameter names are rejected (400)"."""
    response = vm0.request("GET", "vm0", query=query)
    assert response.status == 400
    assert vm0.error_of(response) == "Bad request. Query parameter names must not repeat"


@pytest.mark.parametrize("query", ["", "api-version=", "api-version", "apiversion=2020-07-01"])
def test_a_missing_api_version_is_400_saying_it_was_not_specified(vm0: Imds, query: str) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Versioning": "When you
    don't specify a version, you get an error with a list of the newest supported versions" and the
    example body "Bad request. api-version was not specified in the request. ..."."""
    for method in ("GET", "POST"):
        response = vm0.request(method, "vm0", query=query)
        assert (response.status, response.body) == (400, MISSING_API_VERSION), method


@pytest.mark.parametrize(
    "query",
    [
        "api-version=latest",
        "api-version={latest}",
        "api-version=%7Blatest%7D",
        "api-version=2021-02-01",
        "api-version=2020-07-15",
        "api-version=2016-09-01",
        "api-version=2020-07-01%20",
        "api-version=2020-7-1",
    ],
)
def test_an_unknown_api_version_is_400_with_the_newest_versions(vm0: Imds, query: str) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability": "Versions are mandatory"; "Previous preview releases of Scheduled Events
    supported {latest} as the api-version. This format is no longer supported". The body lists
    forewarn's three newest Scheduled Events versions, newest first (SPEC 1 [doc: IMDS overview] and
    [ours]); general IMDS versions such as 2021-02-01 are not Scheduled Events versions (SPEC 1
    [doc] [seen])."""
    for method in ("GET", "POST"):
        response = vm0.request(method, "vm0", query=query)
        assert (response.status, response.body) == (400, INVALID_API_VERSION), method


@pytest.mark.parametrize("version", VERSIONS)
def test_every_documented_version_is_served(vm0: Imds, version: str) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability": the seven versions of the release-notes table."""
    assert vm0.get("vm0", version).body == b'{"DocumentIncarnation":1,"Events":[]}'


def test_parameter_key_and_value_lengths_are_bounded(vm0: Imds) -> None:
    """SPEC 1 [doc: IMDS family]: "Request limits: bounded body, header and parameter lengths,
    rejected with 400", with the IMDS messages' wording."""
    limits = vm0.endpoint.limits
    base = "api-version=2020-07-01"
    longest_key = "k" * limits.max_parameter_key
    longest_value = "v" * limits.max_parameter_value
    assert vm0.request("GET", "vm0", query=f"{base}&{longest_key}=1").status == 200
    assert vm0.request("GET", "vm0", query=f"{base}&x={longest_value}").status == 200
    key = vm0.request("GET", "vm0", query=f"{base}&{longest_key}k=1")
    assert key.status == 400
    assert vm0.error_of(key) == (
        f"Parameter key length is larger than MaxParameterKeyLength: {limits.max_parameter_key}"
    )
    value = vm0.request("GET", "vm0", query=f"{base}&x={longest_value}v")
    assert value.status == 400
    assert vm0.error_of(value) == (
        "Parameter value length is larger than MaxParameterValueLength: "
        f"{limits.max_parameter_value}"
    )
    encoded = vm0.request("GET", "vm0", query=f"{base}&x=" + "%41" * limits.max_parameter_value)
    assert encoded.status == 200  # the limit is on the decoded value


def test_a_query_that_is_not_utf_8_is_400(vm0: Imds) -> None:
    """SPEC 1 [doc: IMDS family]: malformed input is a 400, never a crash."""
    response = vm0.request("GET", "vm0", query="api-version=2020-07-01&x=%ff")
    assert response.status == 400
    assert vm0.error_of(response) == "Bad request. The query string is not valid"


# -- paths and methods ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/metadata",
        "/metadata/",
        "/metadata/scheduledevents/",
        "/metadata/scheduledevents/x",
        "/metadata/scheduled",
        "/metadata/instancex",
        "/metadata/identity/oauth2/token",
        "/latest/meta-data/",
    ],
)
def test_an_unknown_path_is_404(vm0: Imds, path: str) -> None:
    """SPEC 1 [doc: IMDS overview]: 404 for an unknown path, worded as IMDS words it."""
    for headers in ({"Metadata": "true"}, {}):
        response = vm0.request("GET", "vm0", path=path, headers=headers)
        assert response.status == 404
        assert vm0.error_of(response) == f'API isn\'t found: Path = "{path}", Method = "GET"'


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE"])
def test_methods_other_than_get_and_post_are_405(vm0: Imds, method: str) -> None:
    """SPEC 1 [doc: IMDS overview]: "405 unsupported method (only GET and POST here)"."""
    path = "/metadata/scheduledevents"
    response = vm0.request(method, "vm0", path=path)
    assert response.status == 405
    assert vm0.error_of(response) == (
        f'Http method isn\'t allowed: Path = "{path}", Method = "{method}"'
    )


@pytest.mark.parametrize("path", ["/metadata/instance", "/metadata/versions"])
def test_the_instance_and_versions_endpoints_are_read_only(vm0: Imds, path: str) -> None:
    """SPEC 1 [doc: IMDS overview]: 405 for a method a path does not support."""
    response = vm0.request("POST", "vm0", path=path, body=b"{}")
    assert response.status == 405


def test_a_request_at_an_address_no_vm_answers_is_400(vm0: Imds) -> None:
    """docs/serve.md, "Several VMs": callers are told apart "by the address a request arrives at"; an
    address that belongs to no VM gets a 400 that says so (SPEC 1 [ours])."""
    vm0.add_vm("vm1")
    response = vm0.request("GET", "vm0", address="127.0.0.99")
    assert response.status == 400
    assert vm0.error_of(response) == "Bad request. No virtual machine answers at 127.0.0.99"


# -- the rate limit ------------------------------------------------------------------------


def test_more_than_5_requests_per_second_is_429(vm0: Imds) -> None:
    """SPEC 1 [doc: IMDS overview]: "429 over the rate limit of 5 requests per second per VM".
    The limiter's clock is injected and stands still here."""
    vm0.monotonic.step = 0.0
    assert [vm0.get("vm0").status for _ in range(5)] == [200] * 5
    throttled = vm0.get("vm0")
    assert (throttled.status, throttled.body) == (429, b'{"error":"Too many requests"}')
    assert throttled.content_type == b"application/json; charset=utf-8"
    assert vm0.get("vm0").status == 429


def test_the_limit_is_per_vm(vm0: Imds) -> None:
    """SPEC 1 [doc: IMDS overview]: "per VM": one VM's burst does not throttle its neighbour."""
    vm0.add_vm("vm1")
    vm0.monotonic.step = 0.0
    for _ in range(5):
        vm0.get("vm0")
    assert vm0.get("vm0").status == 429
    assert [vm0.get("vm1").status for _ in range(5)] == [200] * 5


def test_the_budget_refills_as_time_passes(vm0: Imds) -> None:
    """SPEC 1 [doc: IMDS overview]: 5 per second, so one more request every 0.2 s and a full
    burst again after a quiet second."""
    vm0.monotonic.step = 0.0
    for _ in range(5):
        vm0.get("vm0")
    assert vm0.get("vm0").status == 429
    vm0.monotonic.advance(0.21)
    assert [vm0.get("vm0").status for _ in range(2)] == [200, 429]
    vm0.monotonic.advance(1.0)
    assert [vm0.get("vm0").status for _ in range(6)] == [200] * 5 + [429]


def test_errors_count_against_the_limit_and_a_throttled_post_approves_nothing(
    vm0: Imds,
) -> None:
    """SPEC 1: the limit counts requests, good or bad; a 429 is answered before anything is
    read, so it changes no state (SPEC 3 [ours]: refusals change nothing)."""
    event = vm0.schedule(EventType.REBOOT, "vm0")
    vm0.monotonic.step = 0.0
    for _ in range(5):
        assert vm0.get("vm0", headers={}).status == 400
    before = vm0.monotonic.now
    response = vm0.post("vm0", {"StartRequests": [{"EventId": event.event_id}]})
    assert response.status == 429
    vm0.monotonic.now = before + 1.0
    assert vm0.document("vm0")["Events"][0]["EventStatus"] == "Scheduled"


def test_polling_once_a_second_is_never_throttled(vm0: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency": "we
    recommend that you poll the service once per second"; with an approval now and then, a
    well-behaved client never sees 429."""
    vm0.monotonic.step = 0.0
    statuses = set()
    for second in range(600):
        statuses.add(vm0.get("vm0").status)
        if second % 60 == 0:
            event = vm0.schedule(EventType.FREEZE, "vm0", duration_seconds=0)
            statuses.add(vm0.approve("vm0", event.event_id).status)
        vm0.monotonic.advance(1.0)
        vm0.advance(timedelta(seconds=1))
    assert statuses == {200}


def test_bodies_are_never_larger_than_they_need_to_be(vm0: Imds) -> None:
    """SPEC 1 [doc] [seen]: error bodies are exactly ``{"error": "<message>"}``, compact."""
    response = vm0.get("vm0", headers={})
    assert orjson.loads(response.body) == {
        "error": "Bad request. Required metadata header not specified"
    }
    assert response.body == MISSING_HEADER


def test_a_blank_parameter_still_counts_as_given_twice(imds: Imds) -> None:
    """SPEC 1: a repeated query parameter is refused, also when one of them is blank."""
    imds.add_vm("vm")
    response = imds.request("GET", "vm", query="api-version=2020-07-01&api-version=")
    assert response.status == 400
    assert imds.error_of(response) == "Bad request. Query parameter names must not repeat"


def test_only_the_first_question_mark_starts_the_query() -> None:
    """RFC 3986 3.4: the query is everything after the first "?", later ones included."""
    assert split_target("/metadata/scheduledevents?api-version=2020-07-01?x=1") == (
        "/metadata/scheduledevents",
        "api-version=2020-07-01?x=1",
    )
    assert split_target("/metadata/scheduled%65vents") == ("/metadata/scheduledevents", "")


def test_a_vm_is_told_by_the_address_it_calls_from_when_the_one_it_calls_is_shared(
    imds: Imds,
) -> None:
    """A VM is found by the address its request arrives at, then by the one it comes from
    (``forewarn serve --bind`` on one address, VMs calling from their own)."""
    imds.add_vm("a")
    imds.add_vm("b")
    response = imds.endpoint.handle(
        ImdsRequest(
            method="GET",
            path="/metadata/instance/compute/name",
            query="api-version=2021-02-01&format=text",
            headers={"metadata": "true"},
            body=b"",
            local_address="127.0.0.200",
            peer_address=imds.addresses["b"],
        )
    )
    assert (response.status, response.body) == (200, b"b")


def test_every_answer_carries_its_vm_and_the_platform_time(make_imds: type[Imds]) -> None:
    """What a transport gets beside each response (``Answer``): the calling VM once the
    request got as far as finding it, for the dashboard's timeline, and the platform time it
    was answered at, for the Date header (SPEC 1: NotBefore is compared against it)."""
    imds = make_imds(rate_limit=1.0)
    vm = imds.add_vm("vm0")
    imds.advance(timedelta(seconds=90))
    event = imds.schedule(EventType.REBOOT, "vm0")
    imds.monotonic.step = 0.0  # moved a second after each request: none is over the rate

    def answered(method: str, path: str, query: str, body: bytes = b"") -> tuple[int, object]:
        request = ImdsRequest(
            method, path, query, {"metadata": "true"}, body, imds.addresses["vm0"], "127.0.0.1"
        )
        response, calling, at, _ = imds.endpoint.respond(request)
        assert at == imds.service.now(), (method, path, query)
        imds.monotonic.advance(1.0)
        return response.status, calling

    current = "api-version=2020-07-01"
    approval = orjson.dumps({"StartRequests": [{"EventId": event.event_id}]})
    assert [
        answered("GET", "/metadata/scheduledevents", current),
        answered("GET", "/metadata/scheduledevents", "api-version=1999-01-01"),
        answered("GET", "/metadata/versions", ""),
        answered("GET", "/metadata/instance", "api-version=2021-02-01"),
        answered("GET", "/metadata/nothing", current),
        answered("PUT", "/metadata/scheduledevents", current),
    ] == [(200, vm), (400, vm), (200, vm), (200, vm), (404, None), (405, None)]
    assert answered("GET", "/metadata/scheduledevents", current) == (200, vm)
    imds.monotonic.now -= 1.0  # the same instant again: over the rate of one a second
    assert answered("GET", "/metadata/scheduledevents", current) == (429, vm)
    assert answered("POST", "/metadata/scheduledevents", current, approval) == (200, vm)
    assert answered("GET", "/metadata/scheduledevents", current) == (0, vm), "rebooting"

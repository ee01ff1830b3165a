"""The words of the Maintenance provider's refusals, whole: what ARM answers a request it will
not serve, in its error envelope (``{"error": {"code", "message", "details"}}``, the
"ErrorResponse" every management-plane REST specification references).

Sources: the Microsoft REST API guidelines (github.com/microsoft/api-guidelines,
azure/Guidelines.md, "versioning-api-version-missing": "return HTTP 400 with error code
\"MissingApiVersionParameter\" and message \"The api-version query parameter (?api-version=)
is required for all requests\""); ARM's answer to an api-version a resource type does not
have (code ``InvalidApiVersionParameter``, naming the version given and the supported ones);
the Maintenance REST specification's ``ScheduledEventsIdList`` body (``{"value":
[EventIds]}``) for ``acknowledge_list`` (github.com/Azure/azure-rest-api-specs,
specification/maintenance, ``ScheduledEvents_AcknowledgeList.json``). How much of what a
client sent is echoed back is ours: bounded, so a refusal is never larger than a line.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from azure_support import FLEET, START, SUBSCRIPTION
from e2e_support import start_forewarn

from forewarn.cluster.replica import ReplicaError
from forewarn.domain.events import EventStatus
from forewarn.server.azure._arm import arm_code
from forewarn.server.control import MAX_CONTROL_BODY
from forewarn.testing import ForewarnPlatform, MakePlatform

ONE = (
    f"/subscriptions/{SUBSCRIPTION}/resourcegroups/ops-rg/providers/microsoft.compute/"
    "virtualMachines/db0/providers/microsoft.maintenance/scheduledevents/"
    "00000000-0000-0000-0000-000000000000/acknowledge"
)
LIST = (
    f"/subscriptions/{SUBSCRIPTION}/resourcegroups/ops-rg/providers/Microsoft.Compute/"
    "virtualMachineScaleSets/web/providers/Microsoft.Maintenance/scheduledevents"
    "?api-version=2025-10-01-preview"
)
SUPPORTED = "'2023-10-01-preview,2025-10-01-preview,2026-02-01-preview'"


@pytest.fixture
def platform(make_forewarn_platform: MakePlatform) -> ForewarnPlatform:
    return make_forewarn_platform(fleet=FLEET, start=START, seed=9)


def test_a_missing_api_version_is_refused_in_the_guidelines_words(
    platform: ForewarnPlatform,
) -> None:
    with platform.control_client() as http:
        answer = http.post(ONE)
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "code": "MissingApiVersionParameter",
            "message": "The api-version query parameter (?api-version=) is required for all "
            "requests.",
        }
    }


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("?api-version=2020-01-01", "2020-01-01"),
        # Given twice: the last one named, as the one a reader of the query would keep.
        ("?api-version=2023-10-01-preview&api-version=2025-10-01-preview", "2025-10-01-preview"),
        # Echoed back cut at 32 characters [ours].
        ("?api-version=" + "9" * 40, "9" * 32),
    ],
)
def test_an_unsupported_api_version_is_named_with_the_supported_ones(
    platform: ForewarnPlatform, query: str, named: str
) -> None:
    with platform.control_client() as http:
        answer = http.post(ONE + query)
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "code": "InvalidApiVersionParameter",
            "message": f"The api-version '{named}' is invalid. The supported versions are "
            f"{SUPPORTED}.",
        }
    }


def test_the_list_names_only_the_versions_that_have_it(platform: ForewarnPlatform) -> None:
    """``acknowledge_list`` came with 2025-10-01-preview: the refusal lists the two that have
    it, sorted, comma-separated."""
    with platform.control_client() as http:
        answer = http.post(
            LIST.replace("2025-10-01-preview", "2023-10-01-preview"), json={"value": ["x"]}
        )
    assert answer.json()["error"]["message"] == (
        "The api-version '2023-10-01-preview' is invalid. The supported versions are "
        "'2025-10-01-preview,2026-02-01-preview'."
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # No body at all is read as JSON null: not an object, said of the body.
        (b"", "body: Input should be an object"),
        (b"[1]", "body: Input should be an object"),
        (b"{", "body: Invalid JSON: EOF while parsing an object at line 1 column 1"),
        (b'{"value": []}', "value: List should have at least 1 item after validation, not 0"),
        # A place inside the body is its dotted path.
        (b'{"value": ["ok", 1]}', "value.1: Input should be a valid string"),
    ],
)
def test_a_malformed_list_says_where_and_why(
    platform: ForewarnPlatform, body: bytes, message: str
) -> None:
    platform.restart("web_0")
    with platform.control_client() as http:
        answer = http.post(LIST, content=body)
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "code": "InvalidRequestContent",
            "message": f"The request content is invalid: {message}",
        }
    }
    assert platform.document("web_0").events[0].status is EventStatus.SCHEDULED


def test_a_long_path_is_echoed_cut_at_256_characters(platform: ForewarnPlatform) -> None:
    """[ours] The path of a request no route serves is named, cut at 256 characters."""
    path = f"/subscriptions/{SUBSCRIPTION}/" + "a" * 300
    with platform.control_client() as http:
        answer = http.post(path + "?api-version=2023-10-01-preview")
    assert answer.status_code == 404
    assert answer.json() == {
        "error": {
            "code": "InvalidResourceType",
            "message": f"The resource type could not be found for the request path '{path[:256]}'.",
        }
    }


QUERY = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"


def test_a_store_being_rebuilt_is_refused_in_arms_envelope_on_its_routes(
    platform: ForewarnPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A front-end rebuilding its state refuses with 503 (docs/scale-out.md); on an ARM route
    it says so in ARM's envelope, code ``ServiceUnavailable`` (the ErrorResponse the
    management SDKs parse into ``HttpResponseError.error``), on the control API in its own."""

    def rebuilding(*args: object) -> object:
        raise ReplicaError("this front-end is rebuilding its state from the journal; retry")

    monkeypatch.setattr(platform.service, "published", rebuilding)
    monkeypatch.setattr(platform.service, "events", rebuilding)
    with platform.control_client() as http:
        graph = http.post(QUERY, json={"query": "maintenanceresources"})
        control = http.get("/api/v1/events")
    message = "this front-end is rebuilding its state from the journal; retry"
    assert (graph.status_code, graph.json()) == (
        503,
        {"error": {"code": "ServiceUnavailable", "message": message}},
    )
    assert (control.status_code, control.json()) == (503, {"error": message})


def test_a_body_past_the_bound_and_a_wrong_method_are_refused_in_arms_envelope(
    platform: ForewarnPlatform,
) -> None:
    with platform.control_client() as http:
        large = http.post(QUERY, content=b"x" * (MAX_CONTROL_BODY + 1))
        wrong = http.get(QUERY)
        listing = http.post(LIST, content=b"x" * (MAX_CONTROL_BODY + 1))
    bound = f"the body is larger than {MAX_CONTROL_BODY} bytes"
    assert (large.status_code, large.json()) == (
        413,
        {"error": {"code": "RequestEntityTooLarge", "message": bound}},
    )
    assert listing.json() == large.json()
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "MethodNotAllowed"
    assert wrong.headers["allow"] == "POST"


@pytest.mark.e2e
def test_a_call_without_the_token_is_refused_in_arms_envelope_by_a_real_serve(
    tmp_path: Path,
) -> None:
    """ARM refuses a call without a valid bearer token with 401, code ``AuthenticationFailed``
    (the ErrorResponse the management SDKs read); ``forewarn serve`` takes its control token
    as the ARM routes' bearer credential (README "Security"), and its guard refuses there in
    ARM's envelope, on the control API's own routes in its own shape."""
    server = start_forewarn(tmp_path)
    try:
        control = f"http://{server.control_address}"
        graph = httpx.post(f"{control}{QUERY}", json={"query": "maintenanceresources"})
        acknowledge = httpx.post(f"{control}{ONE}?api-version=2023-10-01-preview")
        own = httpx.get(f"{control}/api/v1/events")
    finally:
        server.stop()
    for refused in (graph, acknowledge):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "AuthenticationFailed"
        assert "needs its token" in refused.json()["error"]["message"]
    assert own.status_code == 401
    assert "needs its token" in own.json()["detail"]


def test_a_status_dotnet_does_not_name_gets_arms_generic_code() -> None:
    """ARM's generic error codes are .NET's names for the statuses (``ServiceUnavailable``);
    a status .NET names no failure for is ``Error`` [ours], never a name of our own making."""
    assert arm_code(503) == "ServiceUnavailable"
    assert arm_code(299) == "Error"

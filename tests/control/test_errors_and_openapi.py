"""Errors every route shares, body limits, and the OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forewarn.server.control import MAX_CONTROL_BODY

from .control_support import ok, refused

#: Every route the control API must offer, as (method, path).
ROUTES = {
    ("GET", "/api/v1/vms"),
    ("GET", "/api/v1/vms/{name}"),
    ("GET", "/api/v1/vms/{name}/document"),
    ("GET", "/api/v1/vms/{name}/activity"),
    ("GET", "/api/v1/flows"),
    ("POST", "/api/v1/scenarios"),
    ("POST", "/api/v1/vms/{name}/restart"),
    ("POST", "/api/v1/vms/{name}/redeploy"),
    ("POST", "/api/v1/vms/{name}/simulate-eviction"),
    ("POST", "/api/v1/vms/{name}/freeze-instead"),
    ("POST", "/api/v1/vms/{name}/impact-again"),
    ("POST", "/api/v1/vms/{name}/approve"),
    ("POST", "/api/v1/scale-sets/{name}/delete-instances"),
    ("POST", "/api/v1/scale-sets/{name}/simulate-eviction"),
    ("POST", "/api/v1/scale-sets/{name}/os-image-upgrade"),
    ("POST", "/api/v1/vms/{name}/set-scheduled-events-policy"),
    ("POST", "/api/v1/scale-sets/{name}/set-scheduled-events-policy"),
    ("POST", "/api/v1/availability-sets/{name}/set-scheduled-events-policy"),
    ("GET", "/api/v1/hosts"),
    ("GET", "/api/v1/operations"),
    ("POST", "/api/v1/hosts/{name}/live-migrate"),
    ("POST", "/api/v1/hosts/{name}/update"),
    ("POST", "/api/v1/hosts/{name}/maintain"),
    ("POST", "/api/v1/hosts/{name}/predict-failure"),
    ("POST", "/api/v1/hosts/{name}/fail"),
    ("GET", "/api/v1/campaigns"),
    ("POST", "/api/v1/campaigns"),
    ("GET", "/api/v1/events"),
    ("POST", "/api/v1/events"),
    ("GET", "/api/v1/events/{event_id}"),
    ("DELETE", "/api/v1/events/{event_id}"),
    ("GET", "/api/v1/clock"),
    ("POST", "/api/v1/clock/advance"),
    ("POST", "/api/v1/clock/set"),
    ("GET", "/api/v1/faults"),
    ("POST", "/api/v1/faults"),
    ("DELETE", "/api/v1/faults"),
    ("DELETE", "/api/v1/faults/{fault_id}"),
    ("GET", "/api/v1/eventgrid/subscriptions"),
    ("POST", "/api/v1/eventgrid/subscriptions"),
    ("DELETE", "/api/v1/eventgrid/subscriptions/{name}"),
    ("POST", "/api/v1/eventgrid/subscriptions/{name}/faults"),
}


def test_openapi_lists_every_route_with_its_models(http: httpx.Client) -> None:
    """SPEC 1 [ours]: the control API is described by /openapi.json."""
    document = ok(http.get("/openapi.json"))
    listed = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert listed == ROUTES | {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/livez")}
    # Readiness for probes (docs/control.md, "Health"): ready, or not and why.
    assert set(document["paths"]["/healthz"]["get"]["responses"]) == {"200", "503"}
    for method, path in ROUTES:  # each is served: any answer but "no route" or 405
        target = path.replace("{name}", "ghost").replace("{event_id}", "ghost")
        response = http.request(method, target, json={} if method == "POST" else None)
        assert response.status_code != 405, (method, path)
        assert "no route" not in response.json().get("error", ""), (method, path)
    with_body = {path for method, path in ROUTES if method == "POST"} - {
        f"/api/v1/{kind}/{{name}}/{operation}"
        for kind, operation in [
            ("vms", "restart"),
            ("vms", "redeploy"),
            ("vms", "simulate-eviction"),
            ("vms", "freeze-instead"),
            ("vms", "impact-again"),
            ("hosts", "live-migrate"),
            ("hosts", "update"),
            ("hosts", "maintain"),
            ("hosts", "predict-failure"),
        ]
    }
    for method, path in ROUTES:
        operation = document["paths"][path][method.lower()]
        assert ("requestBody" in operation) == (method == "POST" and path in with_body), path
        for status in ("400", "404", "409", "413", "422"):  # each answered as ErrorOut
            content = operation["responses"][status]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/ErrorOut"}, (path, status)
    schemas = document["components"]["schemas"]
    assert schemas["ErrorOut"]["required"] == ["error"]
    assert schemas["ErrorOut"]["properties"]["error"]["type"] == "string"
    # FastAPI's own shape of a 422 is not what the control API answers: not described.
    assert "HTTPValidationError" not in schemas
    assert {"EventOut", "VmOut", "CreateEventRequest", "ErrorOut", "ClockOut"} <= set(schemas)
    assert {"FaultIn", "FaultOut", "FaultsOut"} <= set(schemas)


def test_no_page_that_needs_the_internet(http: httpx.Client) -> None:
    """Swagger UI at /docs loaded its assets from a CDN and was blank offline; the description
    is /openapi.json, for any OpenAPI viewer."""
    assert http.get("/docs").status_code == 404
    assert http.get("/openapi.json").status_code == 200


def test_unknown_routes_and_methods(http: httpx.Client) -> None:
    """SPEC 1 [doc: IMDS family]: unknown path 404, other methods 405, JSON errors."""
    refused(http.get("/api/v1/nothing"), 404, "no route GET /api/v1/nothing")
    refused(http.put("/api/v1/vms"), 405, "PUT is not allowed on /api/v1/vms")
    refused(http.delete("/api/v1/clock"), 405)


def test_malformed_json_is_400_and_changes_nothing(http: httpx.Client) -> None:
    """SPEC 1 [doc]: a malformed payload is 400."""
    for body in (b"{", b"{'type': 'Reboot'}", b'{"type": "Reboot",}'):
        refused(
            http.post("/api/v1/events", content=body, headers={"content-type": "application/json"}),
            400,
            "not valid JSON",
        )
    refused(http.post("/api/v1/events", json=["Reboot"]), 422, "invalid request")
    assert ok(http.get("/api/v1/events")) == {"events": []}


def test_bodies_are_bounded(http: httpx.Client) -> None:
    """SPEC 1 [doc: IMDS family]: request limits. A declared or streamed body over
    the limit is refused with 413 before it is parsed."""
    big = json.dumps(
        {"type": "Reboot", "resources": ["app0"], "description": "x" * MAX_CONTROL_BODY}
    )
    refused(http.post("/api/v1/events", content=big.encode()), 413, "larger than")

    def chunks() -> Iterator[bytes]:
        for _ in range(3):
            yield b" " * (MAX_CONTROL_BODY // 2)

    refused(http.post("/api/v1/events", content=chunks()), 413)
    assert ok(http.get("/api/v1/events")) == {"events": []}


POST_PATHS = [path for method, path in sorted(ROUTES) if method == "POST"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(POST_PATHS),
    name=st.sampled_from(["app0", "WestNO_0", "web", "h1", "ghost", "%2F", "a" * 200]),
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
            st.sampled_from(["type", "resources", "seconds", "now", "eventIds", "instanceIds",
                             "vms", "eventType", "autoscale", "noticeSeconds", "x"]),
            inner, max_size=4),
        max_leaves=8,
    ),
)  # fmt: skip
def test_no_input_gives_a_500(http: httpx.Client, path: str, name: str, body: object) -> None:
    """SPEC 1 [ours]: bad input is refused with a 4xx and {"error": ...}, never a
    500; a few valid bodies slip through and succeed, which is fine."""
    target = path.replace("{name}", name)
    response = http.post(
        target, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    assert response.status_code < 500, (target, body, response.text)
    if response.status_code >= 400:
        assert list(response.json()) == ["error"]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_non_json_content_types_are_refused(http: httpx.Client, content_type: str | None) -> None:
    """SPEC 1 [ours]: the control API takes JSON bodies; others are 422 or 400."""
    headers = {"content-type": content_type} if content_type else {}
    response = http.post("/api/v1/clock/advance", content=b"seconds=5", headers=headers)
    assert response.status_code in (400, 422), response.text
    assert list(response.json()) == ["error"]


def test_the_dashboard_and_its_timeline_are_served(http: httpx.Client) -> None:
    """docs/dashboard.md: the page at / and each VM's timeline (empty in-process, where
    no VM-facing endpoint records anything)."""
    page = http.get("/")
    assert page.status_code == 200
    assert "/dashboard/app.js" in page.text
    assert http.get("/dashboard/app.js").headers["content-type"].startswith("text/javascript")
    assert http.get("/dashboard/nothing.js").status_code == 404
    vm = ok(http.get("/api/v1/vms"))["vms"][0]["name"]
    assert ok(http.get(f"/api/v1/vms/{vm}/activity")) == {"vm": vm, "entries": []}
    assert http.get("/api/v1/vms/ghost/activity").status_code == 404


def test_a_scenario_from_the_dashboard_needs_a_served_api(http: httpx.Client) -> None:
    """In-process nothing serves the control API for a scenario run to call: 409, said so."""
    refused = http.post("/api/v1/scenarios", json={"scenario": "steps: [{advance: 1m}]"})
    assert refused.status_code == 409
    assert "forewarn serve" in refused.text

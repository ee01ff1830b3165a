"""``GET /api/v1/operations``: the registry, as a dashboard reads it to build its actions."""

from __future__ import annotations

import httpx

from forewarn.registry import OPERATIONS

from .control_support import ok


def test_every_registered_operation_is_listed_with_its_route_and_parameters(
    http: httpx.Client,
) -> None:
    listed = ok(http.get("/api/v1/operations"))["operations"]
    assert [(o["target"], o["name"]) for o in listed] == [
        (operation.target.kind, operation.name) for operation in OPERATIONS
    ]
    delete = next(o for o in listed if o["name"] == "delete-instances")
    assert delete == {
        "name": "delete-instances",
        "target": "scale-set",
        "method": "POST",
        "path": "/api/v1/scale-sets/{name}/delete-instances",
        "summary": "Delete instances: Terminate events when the set has terminate notification on.",
        "cli": "forewarn vmss delete-instances",
        "parameters": [
            {
                "name": "instanceIds",
                "type": "array of instance ids",
                "required": True,
                "help": "Instance ids, as az takes them: 0 1 2.",
                "choices": [],
            },
            {
                "name": "autoscale",
                "type": "boolean",
                "required": False,
                "help": "Scale-in by autoscale: EventSource Platform.",
                "choices": [],
            },
        ],
    }
    fail = next(o for o in listed if o["name"] == "fail")
    (model,) = fail["parameters"]
    assert (model["name"], model["type"], model["required"]) == ("as", "string", False)
    assert model["choices"] == ["reboot", "redeploy"]  # the default first


def test_each_listed_operation_is_a_route_taking_exactly_its_parameters(
    http: httpx.Client,
) -> None:
    """What the listing says is what the route accepts: a dashboard form built from it works."""
    paths = ok(http.get("/openapi.json"))["paths"]
    schemas = ok(http.get("/openapi.json"))["components"]["schemas"]
    for operation in ok(http.get("/api/v1/operations"))["operations"]:
        route = paths[operation["path"]]["post"]
        names = [parameter["name"] for parameter in operation["parameters"]]
        if not names:
            assert "requestBody" not in route, operation["path"]
            continue
        ref = route["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        body = schemas[ref.rsplit("/", 1)[-1]]
        assert list(body["properties"]) == names, operation["path"]
        required = [p["name"] for p in operation["parameters"] if p["required"]]
        assert body.get("required", []) == required, operation["path"]

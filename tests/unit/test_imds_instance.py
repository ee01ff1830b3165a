"""``/metadata/instance`` and ``/metadata/versions``: what handlers ask to learn who they are.

SPEC.md has no section of its own for these; the rules pinned here are the IMDS family's
ones that SPEC 1 applies to every request (header, X-Forwarded-For, api-version errors with
``newest-versions``), plus the slice :mod:`forewarn.wire.instance` documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import pytest

from forewarn.wire.instance import INSTANCE_API_VERSIONS

if TYPE_CHECKING:
    from unit.conftest import Imds

INSTANCE = "/metadata/instance"


@pytest.fixture
def web(imds: Imds) -> Imds:
    imds.add_vm(
        "web_3",
        vm_scale_set_name="web",
        location="northeurope",
        zone="2",
        platform_fault_domain=1,
        platform_update_domain=4,
        tags=(("role", "front"), ("env", "test")),
        resource_group="shop",
        subscription_id="8d10da13-8125-4ba9-a717-bf7490507b3d",
    )
    return imds


def instance(imds: Imds, path: str = INSTANCE, query: str = "api-version=2021-02-01") -> Any:
    response = imds.request("GET", "web_3", path=path, query=query)
    assert response.status == 200, response
    assert response.content_type == b"application/json; charset=utf-8"
    return orjson.loads(response.body)


def test_compute_names_the_vm_as_events_name_it(web: Imds) -> None:
    """scheduled-events-linux.txt, "Python sample": handlers check ``if this_host in
    resources``; the compute name is the name Resources uses, scale-set instances
    ``{scaleSetName}_{instanceId}`` (SPEC 2), and numbers are strings as in IMDS."""
    compute = instance(web)["compute"]
    assert compute["name"] == "web_3"
    assert compute["vmScaleSetName"] == "web"
    assert compute["resourceId"] == (
        "/subscriptions/8d10da13-8125-4ba9-a717-bf7490507b3d/resourceGroups/shop/providers"
        "/Microsoft.Compute/virtualMachineScaleSets/web/virtualMachines/3"
    )
    assert (compute["platformFaultDomain"], compute["platformUpdateDomain"]) == ("1", "4")
    assert (compute["location"], compute["zone"]) == ("northeurope", "2")
    assert compute["tags"] == "role:front;env:test"
    assert compute["tagsList"] == [
        {"name": "role", "value": "front"},
        {"name": "env", "value": "test"},
    ]
    assert compute["vmId"] == web.platform.vm("web_3").vm_id
    assert list(compute) == sorted(compute)
    assert instance(web)["network"] == {"interface": []}


def test_a_sub_path_selects_part_of_the_document(web: Imds) -> None:
    """IMDS serves any node of the tree under /metadata/instance/...; a node that does not
    exist is a 404 like any unknown path (SPEC 1)."""
    assert instance(web, f"{INSTANCE}/compute")["name"] == "web_3"
    assert instance(web, f"{INSTANCE}/compute/name") == "web_3"
    missing = web.request(
        "GET", "web_3", path=f"{INSTANCE}/compute/nothing", query="api-version=2021-02-01"
    )
    assert missing.status == 404


def test_a_leaf_as_text_is_the_bare_value(web: Imds) -> None:
    """The IMDS samples read single values with ``format=text`` (e.g. ``compute/name``), a
    bare value in text/plain, no JSON quoting."""
    for leaf, value in (("name", b"web_3"), ("platformFaultDomain", b"1"), ("zone", b"2")):
        response = web.request(
            "GET",
            "web_3",
            path=f"{INSTANCE}/compute/{leaf}",
            query="api-version=2021-02-01&format=text",
        )
        assert (response.status, response.body) == (200, value)
        assert response.content_type == b"text/plain; charset=utf-8"


def test_an_unknown_format_is_400(web: Imds) -> None:
    """IMDS formats are ``json`` and ``text``; anything else is a bad request (SPEC 1)."""
    response = web.request(
        "GET", "web_3", path=f"{INSTANCE}/compute/name", query="api-version=2021-02-01&format=xml"
    )
    assert response.status == 400


def test_instance_metadata_has_its_own_api_versions(web: Imds) -> None:
    """SPEC 1 [doc] [seen]: the general IMDS versions are separate from the Scheduled Events
    ones: 2021-02-01 is an instance version and not a Scheduled Events one, and the newest
    three listed on error are the instance endpoint's own."""
    assert instance(web, query="api-version=2021-02-01")["compute"]["name"] == "web_3"
    assert web.get("web_3", "2021-02-01").status == 400
    for query in ("", "api-version=latest", "api-version=2019-01-01", "api-version=2020-07-01"):
        response = web.request("GET", "web_3", path=INSTANCE, query=query)
        assert response.status == 400, query
        body = orjson.loads(response.body)
        assert body["error"].startswith("Bad request. api-version is invalid")
        assert body["newest-versions"] == sorted(INSTANCE_API_VERSIONS, reverse=True)[:3]


def test_every_listed_instance_version_is_served(web: Imds) -> None:
    for version in INSTANCE_API_VERSIONS:
        assert instance(web, query=f"api-version={version}")["compute"]["name"] == "web_3"


def test_versions_lists_the_instance_versions_oldest_first(web: Imds) -> None:
    """``GET /metadata/versions`` answers ``{"apiVersions": [...]}`` without an api-version."""
    response = web.request("GET", "web_3", path="/metadata/versions", query="")
    assert response.status == 200
    versions = orjson.loads(response.body)["apiVersions"]
    assert versions == sorted(versions) == list(INSTANCE_API_VERSIONS)
    assert "2017-04-02" in versions
    assert len(set(versions)) == len(versions)


@pytest.mark.parametrize("path", [INSTANCE, f"{INSTANCE}/compute/name", "/metadata/versions"])
def test_the_metadata_header_is_required_here_too(web: Imds, path: str) -> None:
    """SPEC 1 [doc: IMDS overview]: "Header Metadata: true is required on every request"."""
    response = web.request("GET", "web_3", path=path, query="api-version=2021-02-01", headers={})
    assert response.status == 400
    assert web.error_of(response) == "Bad request. Required metadata header not specified"

"""``/metadata/instance`` and ``/metadata/versions``: what handlers ask to learn who they are.

SPEC 9 holds what handlers read there; the rules pinned here are the IMDS family's
ones that SPEC 1 applies to every request (header, X-Forwarded-For, api-version errors with
``newest-versions``), plus the slice :mod:`forewarn.wire.instance` documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import pytest

from forewarn.domain.vms import ImageReference, Priority
from forewarn.wire.instance import INSTANCE_API_VERSIONS

if TYPE_CHECKING:
    from endpoint.conftest import Imds

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
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Python sample": handlers
    check ``if this_host in resources``; the compute name is the name Resources uses, scale-set
    instances ``{scaleSetName}_{instanceId}`` (SPEC 2), and numbers are strings as in IMDS."""
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
    (interface,) = instance(web)["network"]["interface"]
    assert interface["ipv4"]["ipAddress"][0]["privateIpAddress"] == web.addresses["web_3"]


def test_a_sub_path_selects_part_of_the_document(web: Imds) -> None:
    """IMDS serves any node of the tree under /metadata/instance/...; a node that does not
    exist is a 404 like any unknown path (SPEC 1)."""
    assert instance(web, f"{INSTANCE}/compute")["name"] == "web_3"
    assert instance(web, f"{INSTANCE}/compute/tagsList") == [
        {"name": "role", "value": "front"},
        {"name": "env", "value": "test"},
    ]
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


def test_a_leaf_in_json_is_refused(web: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Instance metadata":
    "When filtering to a leaf node, format=json doesn't work. For these queries format=text needs to
    be explicitly specified since the default format is json"; the errors table: 400 for "missing
    parameter format=json when querying a leaf node"."""
    for query in ("api-version=2021-02-01", "api-version=2021-02-01&format=json"):
        refused = web.request("GET", "web_3", path=f"{INSTANCE}/compute/name", query=query)
        assert refused.status == 400, query


@pytest.mark.parametrize(
    ("version", "has", "lacks"),
    [
        (
            "2017-03-01",
            {"name", "vmId", "offer", "platformFaultDomain"},
            {"subscriptionId", "zone"},
        ),
        ("2017-08-01", {"subscriptionId", "tags", "placementGroupId"}, {"zone", "vmScaleSetName"}),
        ("2017-12-01", {"zone", "vmScaleSetName"}, {"azEnvironment", "resourceId"}),
        ("2019-06-01", {"storageProfile", "resourceId"}, {"tagsList", "priority"}),
        ("2020-07-15", {"osProfile", "securityProfile"}, {"priority", "evictionPolicy"}),
        ("2020-12-01", {"priority", "evictionPolicy"}, {"userData"}),
        ("2021-02-01", {"userData"}, set()),
    ],
)
def test_each_api_version_shows_the_fields_it_introduced(
    web: Imds, version: str, has: set[str], lacks: set[str]
) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Instance metadata",
    the compute table's "Version introduced" column; 2017-03-01 callers get the first set (SPEC
    9)."""
    compute = instance(web, query=f"api-version={version}")["compute"]
    assert has <= set(compute), has - set(compute)
    assert not lacks & set(compute), lacks & set(compute)


def test_nested_fields_follow_their_own_version(web: Imds) -> None:
    """The same table: osProfile 2020-07-15 but disablePasswordAuthentication 2020-10-01;
    securityProfile 2020-06-01 but encryptionAtHost 2021-11-01, securityType 2021-12-13."""
    early = instance(web, query="api-version=2020-09-01")["compute"]
    assert early["osProfile"] == {"adminUsername": "azureuser", "computerName": "web000003"}
    assert early["securityProfile"] == {"secureBootEnabled": "false", "virtualTpmEnabled": "false"}
    late = instance(web, query="api-version=2021-12-13")["compute"]
    assert late["osProfile"]["disablePasswordAuthentication"] == "true"
    assert set(late["securityProfile"]) == {
        "secureBootEnabled",
        "virtualTpmEnabled",
        "encryptionAtHost",
        "securityType",
    }


def test_spot_priority_and_eviction_policy(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/spot-vms and the compute table: handlers read
    ``priority`` to know they may be evicted; a regular VM says Regular with no eviction policy."""
    imds.add_vm("spot", priority=Priority.SPOT)
    imds.add_vm("regular")
    spot = instance_of(imds, "spot")
    regular = instance_of(imds, "regular")
    assert (spot["priority"], spot["evictionPolicy"]) == ("Spot", "Deallocate")
    assert (regular["priority"], regular["evictionPolicy"]) == ("Regular", "")
    assert regular["placementGroupId"] == ""
    assert "virtualMachineScaleSet" not in regular


def test_scale_set_identity_in_both_orchestration_modes(imds: Imds) -> None:
    """The compute table: ``virtualMachineScaleSet.id`` is the Flexible set the VM belongs
    to, "isn't available for Virtual Machine Scale Sets created with uniform orchestration";
    ``placementGroupId`` is a Uniform set's placement group."""
    imds.add_vm("web_0", vm_scale_set_name="web", placement_group="0")
    imds.add_vm("web_1", vm_scale_set_name="web", placement_group="0")
    imds.add_vm("flex_a1b2c3d4", vm_scale_set_name="flex", flexible=True)
    uniform, sibling = instance_of(imds, "web_0"), instance_of(imds, "web_1")
    flexible = instance_of(imds, "flex_a1b2c3d4")
    assert uniform["placementGroupId"] == sibling["placementGroupId"] != ""
    assert "virtualMachineScaleSet" not in uniform
    assert flexible["virtualMachineScaleSet"]["id"].endswith(
        "/Microsoft.Compute/virtualMachineScaleSets/flex"
    )
    assert flexible["resourceId"].endswith("/Microsoft.Compute/virtualMachines/flex_a1b2c3d4")
    assert flexible["osProfile"]["computerName"] == "flex_a1b2c3d4"
    assert (flexible["vmScaleSetName"], flexible["placementGroupId"]) == ("flex", "")


def test_the_image_comes_from_the_fleet_or_the_os_default(imds: Imds) -> None:
    imds.add_vm("ubuntu")
    imds.add_vm("win", os_type="Windows")
    imds.add_vm("custom", image=ImageReference("me", "my-offer", "my-sku", "1.2.3"))
    assert instance_of(imds, "ubuntu")["publisher"] == "canonical"
    assert instance_of(imds, "win")["offer"] == "WindowsServer"
    custom = instance_of(imds, "custom")
    assert (custom["publisher"], custom["offer"], custom["sku"], custom["version"]) == (
        "me",
        "my-offer",
        "my-sku",
        "1.2.3",
    )
    assert custom["storageProfile"]["imageReference"]["sku"] == "my-sku"


def instance_of(imds: Imds, vm: str) -> Any:
    response = imds.request("GET", vm, path=INSTANCE, query="api-version=2023-07-01")
    assert response.status == 200, response
    return orjson.loads(response.body)["compute"]

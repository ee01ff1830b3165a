"""Input limits at their edges: the limit itself passes, one more is refused (SPEC 1: "bounded
body, header and parameter lengths, rejected with 400"; texts from
learn.microsoft.com/azure/load-balancer/troubleshoot-load-balancer-imds, "Error codes")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from forewarn.server.imds import Limits
from forewarn.wire.approvals import MAX_EVENT_ID_LENGTH

if TYPE_CHECKING:
    from endpoint.conftest import Imds

LIMITS = Limits()


@pytest.fixture
def vm0(imds: Imds) -> Imds:
    imds.add_vm("vm0")
    return imds


def test_an_event_id_at_the_length_limit_is_looked_up_and_one_longer_is_malformed(
    vm0: Imds,
) -> None:
    longest = "A" * MAX_EVENT_ID_LENGTH
    at_limit = vm0.approve("vm0", longest)
    assert at_limit.status == 400
    assert vm0.error_of(at_limit) == f"Bad request. unknown event id(s): {longest}"
    too_long = vm0.approve("vm0", longest + "A")
    assert too_long.status == 400
    assert vm0.error_of(too_long) == "Bad request. each StartRequest must carry an EventId string"


def test_a_parameter_key_at_the_limit_passes_and_one_longer_is_refused(vm0: Imds) -> None:
    """ "Parameter key length is larger than MaxParameterKeyLength: …"."""
    key = LIMITS.max_parameter_key
    passes = vm0.request("GET", "vm0", query=f"api-version=2020-07-01&{'k' * key}=1")
    assert passes.status == 200
    refused = vm0.request("GET", "vm0", query=f"api-version=2020-07-01&{'k' * (key + 1)}=1")
    assert refused.status == 400
    assert vm0.error_of(refused) == (
        f"Parameter key length is larger than MaxParameterKeyLength: {key}"
    )


def test_a_parameter_value_at_the_limit_passes_and_one_longer_is_refused(vm0: Imds) -> None:
    """ "Parameter value length is larger than MaxParameterValueLength: …"."""
    value = LIMITS.max_parameter_value
    passes = vm0.request("GET", "vm0", query=f"api-version=2020-07-01&x={'v' * value}")
    assert passes.status == 200
    refused = vm0.request("GET", "vm0", query=f"api-version=2020-07-01&x={'v' * (value + 1)}")
    assert refused.status == 400
    assert vm0.error_of(refused) == (
        f"Parameter value length is larger than MaxParameterValueLength: {value}"
    )


def test_a_body_at_the_limit_is_read_and_one_byte_more_is_refused(vm0: Imds) -> None:
    """ "Request body is larger than MaxBodyLength: …"."""
    limit = LIMITS.max_body
    start = b'{"StartRequests":[]}'
    at_limit = vm0.post("vm0", start + b" " * (limit - len(start)))
    assert at_limit.status == 400
    assert "MaxBodyLength" not in vm0.error_of(at_limit)  # read, then found to approve nothing
    refused = vm0.post("vm0", start + b" " * (limit - len(start) + 1))
    assert vm0.error_of(refused) == f"Request body is larger than MaxBodyLength: {limit}"

"""Assertions shared by the control API tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

#: learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": the
#: Freeze scheduled at this moment shows NotBefore "Mon, 11 Apr 2022 22:26:58 GMT", 15 minutes
#: later.
START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
TENANT = "11111111-1111-1111-1111-111111111111"

FLEET = f"""
defaults: {{subscriptionId: "{TENANT}"}}
availabilitySets:
  - {{name: west, faultDomains: 2, updateDomains: 5}}
vms:
  - {{name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, updateDomain: 0, host: h1}}
  - {{name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 0, updateDomain: 0, host: h1}}
  - {{name: app0, address: 127.0.0.4, host: host-app}}
  - {{name: spot0, address: 127.0.0.5, host: host-spot, priority: Spot}}
scaleSets:
  - name: web
    capacity: 2
    addressStart: 127.0.1.1
    hosts: [host-web, host-web-1]       # one host per fault domain
    platformFaultDomainCount: 2
    terminateNotification: {{enabled: true, notBeforeTimeout: PT7M}}
    osImageNotification: true
  - {{name: plain, capacity: 2, addressStart: 127.0.2.1, hosts: [host-plain], platformFaultDomainCount: 1}}
  - {{name: batch, capacity: 2, addressStart: 127.0.3.1, hosts: [host-batch], platformFaultDomainCount: 1, priority: Spot}}
"""


def ok(response: httpx.Response, status: int = 200) -> Any:
    """The JSON of a response that must have ``status``."""
    assert response.status_code == status, (response.status_code, response.text)
    return response.json() if response.content else None


def refused(response: httpx.Response, status: int, fragment: str = "") -> str:
    """The error message of a response that must be refused with ``status``."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert list(body) == ["error"], body
    message: str = body["error"]
    assert fragment in message, message
    return message

"""A fleet whose VMs publish their events to Event Grid and Resource Graph, shared by the
tests of the doors beyond IMDS."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from azure.core.credentials import AccessToken

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SUBSCRIPTION = "11111111-1111-1111-1111-111111111111"

PUBLISHING = """
    scheduledEventsPolicy:
      scheduledEventsAdditionalPublishingTargets:
        eventGridAndResourceGraph: {enable: true, scheduledEventsApiVersion: "2020-07-01"}
"""

FLEET = f"""
defaults: {{subscriptionId: {SUBSCRIPTION}, resourceGroup: Ops-RG, location: eastus,
           tenantId: 72f988bf-86f1-41af-91ab-2d7cd011db47}}
availabilitySets:
  - name: back
{PUBLISHING}
vms:
  - {{name: db0, address: 127.0.60.1, availabilitySet: back, host: h1}}
  - {{name: db1, address: 127.0.60.2, availabilitySet: back, host: h2}}
  - name: solo
    address: 127.0.60.3
    host: h3
    zone: "2"
    scheduledEventsPolicy:
      userInitiatedReboot: {{automaticallyApprove: true}}
      scheduledEventsAdditionalPublishingTargets:
        eventGridAndResourceGraph: {{enable: true}}
  - {{name: quiet, address: 127.0.60.4, host: h4}}
scaleSets:
  - name: web
    capacity: 2
    addressStart: 127.0.61.1
{PUBLISHING}
"""


class StaticToken:
    """A ``TokenCredential`` handing out forewarn's control token: what an ARM client needs
    where it would take ``DefaultAzureCredential()`` on Azure."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)

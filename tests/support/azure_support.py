"""A fleet whose VMs publish their events to Event Grid and Resource Graph, shared by the
tests of the doors beyond IMDS."""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import trustme
from azure.core.credentials import AccessToken
from e2e_support import ForewarnServer, free_port, start_forewarn, stopped_at_exit, wait_for

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


#: Where the fleet's VMs answer (FLEET's addresses).
VM_HOSTS = ("127.0.60.1", "127.0.60.2", "127.0.60.3", "127.0.60.4", "127.0.61.1", "127.0.61.2")


@contextlib.contextmanager
def serving_over_tls(workdir: Path) -> Iterator[tuple[ForewarnServer, str, Path]]:
    """``forewarn serve`` with FLEET and its control API also over TLS, as the Azure SDKs
    need it (a certificate from a local authority): the server, the HTTPS base URL and the
    authority's file to trust. Stopped, and its exit checked, when the block ends."""
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    cert = workdir / "server.pem"
    certificate.private_key_and_cert_chain_pem.write_to_path(str(cert))
    ca = workdir / "ca.pem"
    authority.cert_pem.write_to_path(str(ca))
    port = free_port(["127.0.0.1"])
    server = start_forewarn(
        workdir,
        fleet=FLEET,
        vm_hosts=VM_HOSTS,
        extra=("--control-tls", f"127.0.0.1:{port}", "--tls-cert", str(cert)),
    )
    base = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context(cafile=str(ca))
    with stopped_at_exit(server):
        wait_for(
            lambda: httpx.get(base + "/", verify=context).status_code in (200, 401),
            what="the control API over TLS",
            server=server.process,
        )
        yield server, base, ca

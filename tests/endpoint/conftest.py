"""One simulated platform behind the VM-facing endpoint, driven without sockets or sleeping.

The platform is a :class:`forewarn.testing.ForewarnPlatform` (seeded EventIds, a manual clock)
with a rate-limit clock the test moves, so every answer is a pure function of what the test
did. :class:`Imds` adds what the endpoint's own tests need on top: VMs added one by one with
any field, and requests handed to :attr:`ForewarnPlatform.endpoint` exactly as a transport
would, odd headers and all.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from forewarn.commands import CancelEvent, ScheduleEvent
from forewarn.config.fleet import Fleet
from forewarn.domain.events import Event, EventSource, EventType
from forewarn.domain.vms import Vm
from forewarn.server.imds import ImdsEndpoint, ImdsRequest, ImdsResponse
from forewarn.testing import ForewarnPlatform

#: A Monday. Plus the 15 minutes of Freeze notice it is the NotBefore of the documentation's
#: live-migration example, "Mon, 11 Apr 2022 22:26:58 GMT".
START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
SEED = 20220411
CURRENT = "2020-07-01"
SCHEDULED_EVENTS = "/metadata/scheduledevents"
METADATA = {"metadata": "true"}


class SteppingMonotonic:
    """The rate limiter's clock: moves ``step`` seconds per reading, or when told.

    The default step of one second keeps every test far below 5 requests per second, which
    is what a well-behaved poller does (SPEC 8); rate-limit tests set ``step`` to 0.
    """

    def __init__(self, step: float = 1.0) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Imds:
    """The endpoint plus handles on what is behind it; requests are addressed by VM name."""

    def __init__(
        self,
        *,
        seed: int = SEED,
        rate_limit: float = 5.0,
        start: datetime = START,
        impact: Mapping[str, str] | None = None,
    ) -> None:
        self.start = start
        self.monotonic = SteppingMonotonic()
        self.harness = ForewarnPlatform(
            fleet=Fleet(()),
            seed=seed,
            start=start,
            rate_limit=rate_limit,
            impact=impact,
            monotonic=self.monotonic,
        )
        self.clock = self.harness.clock
        self.service = self.harness.service
        self.platform = self.service._platform  # arranged directly: VMs added after start
        self.endpoint: ImdsEndpoint = self.harness.endpoint
        self.addresses: dict[str, str] = {}
        self._next_address = 2

    # -- the fleet -------------------------------------------------------------------------

    def add_vm(self, name: str, *, receiving: bool = True, **fields: Any) -> Vm:
        """A VM answering on its own loopback address, as a fleet file gives each VM;
        ``receiving`` False starts it with Scheduled Events off (never asked)."""
        if "address" not in fields:
            fields["address"] = f"127.0.0.{self._next_address}"
            self._next_address += 1
        fields.setdefault("host", f"host-{name}")
        vm_id = f"00000000-0000-4000-8000-{len(self.addresses) + 1:012d}"
        vm = Vm(name=name, vm_id=vm_id, **fields)
        self.platform.add_vm(vm, receiving=receiving)
        self.addresses[name] = fields["address"]
        return vm

    # -- platform side ---------------------------------------------------------------------

    def schedule(
        self,
        event_type: EventType,
        *resources: str,
        source: EventSource = EventSource.PLATFORM,
        description: str = "",
        duration_seconds: int = -1,
        notice: timedelta | None = None,
        started: bool = False,
    ) -> Event:
        """Create an event through the same command the control API uses."""
        (event,) = self.service.execute(
            ScheduleEvent(
                event_type=event_type.value,
                resources=resources,
                source=source.value,
                description=description,
                duration_seconds=duration_seconds,
                notice_seconds=None if notice is None else notice.total_seconds(),
                started=started,
            )
        )
        return event

    def cancel(self, event_id: str) -> None:
        self.service.execute(CancelEvent(event_id))

    def advance(self, delta: timedelta) -> None:
        self.service.advance_clock(delta)

    # -- VM side ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        vm: str,
        *,
        path: str = SCHEDULED_EVENTS,
        query: str = f"api-version={CURRENT}",
        headers: Mapping[str, str] = METADATA,
        body: bytes = b"",
        address: str | None = None,
    ) -> ImdsResponse:
        """What the transport hands the endpoint: header names lower-cased, raw query.

        The request arrives at ``vm``'s own address, or at ``address`` when given.
        """
        if address is None:
            address = self.addresses[vm]
        return self.endpoint.handle(
            ImdsRequest(
                method=method,
                path=path,
                query=query,
                headers={name.lower(): value for name, value in headers.items()},
                body=body,
                local_address=address,
                peer_address="127.0.0.1",
            )
        )

    def get(
        self, vm: str, version: str = CURRENT, *, headers: Mapping[str, str] = METADATA
    ) -> ImdsResponse:
        return self.request("GET", vm, query=f"api-version={version}", headers=headers)

    def document(self, vm: str, version: str = CURRENT) -> dict[str, Any]:
        response = self.get(vm, version)
        assert response.status == 200, response
        document: dict[str, Any] = orjson.loads(response.body)
        return document

    def post(
        self,
        vm: str,
        body: bytes | Mapping[str, Any],
        version: str = CURRENT,
        *,
        headers: Mapping[str, str] = METADATA,
    ) -> ImdsResponse:
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        return self.request("POST", vm, query=f"api-version={version}", headers=headers, body=raw)

    def approve(self, vm: str, *event_ids: str) -> ImdsResponse:
        return self.post(vm, {"StartRequests": [{"EventId": event_id} for event_id in event_ids]})

    @staticmethod
    def error_of(response: ImdsResponse) -> str:
        """The message of an ``{"error": "..."}`` body."""
        body: dict[str, Any] = orjson.loads(response.body)
        message = body["error"]
        assert isinstance(message, str)
        return message


@pytest.fixture(scope="session")
def make_imds() -> type[Imds]:
    """For tests that need fresh, independent platforms (another seed, a property's example).

    The class itself, which holds no state, so property tests may share it between examples.
    """
    return Imds


@pytest.fixture
def imds() -> Imds:
    return Imds()


@pytest.fixture
def pair(imds: Imds) -> Imds:
    """Two VMs of one availability set, the shape of the documentation's example."""
    imds.add_vm("WestNO_0", availability_set="WestNO", platform_fault_domain=0, host="h1")
    imds.add_vm("WestNO_1", availability_set="WestNO", platform_fault_domain=0, host="h1")
    return imds

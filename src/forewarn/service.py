"""The use cases, between the adapters and the domain.

Every call first brings the platform up to the clock, so a state change (an approval, a
NotBefore that passed) is visible in the very next response with no background polling.
Encoded documents are cached per VM and api-version and rebuilt only when the VM's document
object changed, which the domain guarantees happens only when its events changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from forewarn.domain.api_versions import ApiVersion
from forewarn.domain.clock import Clock, ManualClock
from forewarn.domain.documents import Document
from forewarn.domain.errors import InvalidOperationError
from forewarn.domain.events import DURATION_UNKNOWN, Event, EventSource, EventType
from forewarn.domain.platform import EventView, Platform
from forewarn.domain.vms import Vm
from forewarn.wire.documents import encode_document

ChangeListener = Callable[[], None]


class ScheduledEventsService:
    """One platform on one clock, and the operations adapters may perform on it."""

    def __init__(self, platform: Platform, clock: Clock) -> None:
        self.platform = platform
        self.clock = clock
        self._encoded: dict[tuple[str, str], tuple[Document, bytes]] = {}

    def catch_up(self) -> datetime:
        now = self.clock.now()
        self.platform.advance_to(now)
        return now

    # -- the VM-facing endpoint ------------------------------------------------------------

    def resolve_vm(self, local_address: str, peer_address: str) -> Vm | None:
        """The calling VM: by the address the request arrived at, then the one it came from.

        A fleet of one VM answers on any address, which is the zero-configuration default.
        """
        platform = self.platform
        vm = platform.vm_at(local_address) or platform.vm_at(peer_address)
        if vm is None:
            vms = platform.vms()
            if len(vms) == 1 and vms[0].address is None:
                return vms[0]
        return vm

    def document_bytes(self, vm_name: str, version: ApiVersion) -> bytes:
        self.catch_up()
        document = self.platform.document(vm_name)
        key = (vm_name, version.name)
        cached = self._encoded.get(key)
        if cached is not None and cached[0] is document:
            return cached[1]
        body = encode_document(document, version)
        self._encoded[key] = (document, body)
        return body

    def document(self, vm_name: str) -> Document:
        self.catch_up()
        return self.platform.document(vm_name)

    def approve(self, vm_name: str, event_ids: Iterable[str]) -> None:
        self.catch_up()
        self.platform.approve(vm_name, event_ids)

    # -- the control plane -----------------------------------------------------------------

    def schedule(
        self,
        event_type: EventType,
        impacted: Sequence[str],
        *,
        source: EventSource,
        description: str = "",
        duration_seconds: int = DURATION_UNKNOWN,
        notice: timedelta | None = None,
        already_started: bool = False,
    ) -> Event:
        self.catch_up()
        return self.platform.schedule(
            event_type,
            impacted,
            source=source,
            description=description,
            duration_seconds=duration_seconds,
            notice=notice,
            already_started=already_started,
        )

    def cancel(self, event_id: str) -> Event:
        self.catch_up()
        return self.platform.cancel(event_id)

    def events(self) -> tuple[EventView, ...]:
        self.catch_up()
        return self.platform.events()

    def vms(self) -> tuple[Vm, ...]:
        return self.platform.vms()

    def advance_clock(self, delta: timedelta) -> datetime:
        """Move a manual clock; other clocks follow real time and refuse."""
        if not isinstance(self.clock, ManualClock):
            raise InvalidOperationError("only a manual clock can be advanced")
        self.clock.advance(delta)
        return self.catch_up()

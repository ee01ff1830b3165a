"""One trial's running platform as its drive sees it, and what a trial is.

:class:`Stage` wraps a fresh :class:`~forewarn.testing.ForewarnPlatform`: a ticker thread
moves its manual clock with real time (the handler's timers are real), every state the
trial's events reach is marked on the trial's timeline, and every wait is bounded by a
timeout and by the handler's being alive. :data:`FLEETS` are the fleets trials run on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from forewarn.domain.events import Event, EventSource, EventType
from forewarn.domain.impact import ImpactChange
from forewarn.errors import ForewarnError
from forewarn.faults import ActiveFault
from forewarn.testing import ForewarnPlatform
from forewarn.verify.grading import Grade, Observation, is_events_request
from forewarn.verify.handler import run_check
from forewarn.verify.model import StateChange, TrialInfo
from forewarn.verify.timing import TICK, RunTiming

# -- the fleets trials run on --------------------------------------------------------------

#: Each trial's fleet, by name; the handler's VM comes first and answers at its address.
FLEETS: dict[str, tuple[str, str]] = {
    "single": ("vm0", "vms:\n  - {name: vm0, address: 127.0.0.2, host: host-vm0}\n"),
    "fresh": (
        "vm0",
        "vms:\n  - {name: vm0, address: 127.0.0.2, host: host-vm0, "
        "scheduledEventsEnabled: false}\n",
    ),
    "aset": (
        "vm0",
        "availabilitySets:\n  - {name: web, faultDomains: 2}\n"
        "vms:\n"
        "  - {name: vm0, address: 127.0.0.2, availabilitySet: web, host: host-vm0}\n"
        "  - {name: vm1, address: 127.0.0.3, availabilitySet: web, host: host-vm1}\n",
    ),
    "shared": (
        "vm0",
        "vms:\n  - {name: vm0, address: 127.0.0.2, host: shared-host}\n"
        "  - {name: tenant2, address: 127.0.0.3, host: shared-host, "
        "subscriptionId: 22222222-2222-2222-2222-222222222222}\n",
    ),
    "spot": (
        "vm0",
        "vms:\n  - {name: vm0, address: 127.0.0.2, host: host-vm0, priority: Spot}\n",
    ),
    "vmss": (
        "web_0",
        "scaleSets:\n  - name: web\n    capacity: 2\n    addressStart: 127.0.0.2\n"
        "    terminateNotification: {enabled: true}\n",
    ),
}


class HandlerGone(ForewarnError):  # noqa: N818 - a signal inside a trial, never shown
    """The handler exited while a trial waited for it."""


class Stage:
    """One trial's running platform, as its drive sees it: the platform, the clock ticking
    with real time, marks on the timeline, the handler's liveness and waits bounded by it."""

    def __init__(
        self,
        platform: ForewarnPlatform,
        vm: str,
        timing: RunTiming,
        alive: Callable[[], bool],
        checks: Mapping[str, str],
    ) -> None:
        self.platform = platform
        self.vm = vm
        self.timing = timing
        self._alive = alive
        self._checks = dict(checks)
        self.t0 = platform.now
        self.mono0 = time.monotonic()
        self.marks: list[StateChange] = []
        self.events: dict[str, str] = {}
        self.not_before: dict[str, float] = {}
        self.check_results: dict[str, tuple[bool, str]] = {}
        self.faults: list[ActiveFault] = []
        self._status: dict[str, str] = {}
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="forewarn-verify-clock")
        #: When the relay saw the handler send request bytes (trial seconds); the engine
        #: sets it. It sees what the platform never records: requests to a deleted VM.
        self.sends: Callable[[], list[float]] = list
        #: Answer every request 400 until the given monotonic moment (the engine sets it:
        #: the relay does it, in front of the platform).
        self.refuse_until: Callable[[float], None] = lambda moment: None
        self._last = time.monotonic()

    # -- the clock -------------------------------------------------------------------------

    def start_clock(self) -> None:
        self._last = time.monotonic()
        self._ticker.start()

    def stop_clock(self) -> None:
        self._stop.set()
        if self._ticker.is_alive():
            self._ticker.join()

    def _tick(self) -> None:
        while not self._stop.wait(TICK):
            now = time.monotonic()
            elapsed, self._last = now - self._last, now
            with contextlib.suppress(RuntimeError):  # the platform closed under it
                self.platform.advance(elapsed)
                self._look_at_events()

    def now_t(self) -> float:
        return (self.platform.now - self.t0).total_seconds()

    def on_impact(self, change: ImpactChange) -> None:
        phase = {"start": "ImpactStart", "end": "ImpactEnd", "deleted": "Deleted"}[change.phase]
        if change.vm == self.vm or change.phase != "deleted":
            detail = change.vm + (f", {change.event_type.value}" if change.event_type else "")
            self.mark(phase, change.event_id or "", detail)

    def _look_at_events(self) -> None:
        with self._lock:
            tracked = dict(self._status)
        if not tracked:
            return
        live = {v.event.event_id.upper(): v.event.status.value for v in self.platform.events()}
        for event_id, status in tracked.items():
            now = live.get(event_id)
            if now is None and status not in ("Completed", "Canceled"):
                ended = "Canceled" if event_id in self._cancelled else "Completed"
                self.mark(ended, event_id)
                with self._lock:
                    self._status[event_id] = ended
            elif now is not None and now != status:
                self.mark(now, event_id)
                with self._lock:
                    self._status[event_id] = now

    # -- what a drive does -----------------------------------------------------------------

    def mark(self, state: str, event_id: str = "", detail: str = "") -> None:
        moment = self.platform.now
        with self._lock:
            self.marks.append(
                StateChange(
                    round((moment - self.t0).total_seconds(), 3),
                    moment.isoformat(),
                    state,
                    event_id,
                    detail,
                )
            )

    def track(self, role: str, event: Event, detail: str = "") -> Event:
        """Note an event the drive made: its role, its state now, its NotBefore."""
        event_id = event.event_id.upper()
        self.events[role] = event_id
        described = f"{event.event_type.value}, {event.source.value}, " + ", ".join(
            r.name for r in event.resources
        )
        if event.duration_seconds != -1 or event.event_type is EventType.FREEZE:
            described += f", DurationInSeconds {event.duration_seconds}"
        self.mark(event.status.value, event_id, f"{described}{', ' + detail if detail else ''}")
        if event.not_before is not None:
            not_before = (event.not_before - self.t0).total_seconds()
            self.not_before[role] = not_before
            with self._lock:
                self.marks.append(
                    StateChange(
                        round(not_before, 3), event.not_before.isoformat(), "NotBefore", event_id
                    )
                )
        with self._lock:
            self._status[event_id] = event.status.value
        return event

    def schedule(
        self,
        role: str,
        event_type: EventType,
        *resources: str,
        source: EventSource = EventSource.PLATFORM,
        duration_seconds: int = -1,
    ) -> Event:
        event = self.platform.schedule(
            event_type,
            *(resources or (self.vm,)),
            source=source,
            duration_seconds=duration_seconds,
        )
        return self.track(role, event)

    def cancel(self, role: str) -> None:
        event_id = self.events[role]
        self._cancelled.add(event_id)
        self.platform.cancel(event_id)

    def fault(self, kind: str, **options: object) -> ActiveFault:
        fault = self.platform.fault(kind, vm=self.vm, **options)  # type: ignore[arg-type]
        self.faults.append(fault)
        detail = ", ".join(f"{k} {v}" for k, v in options.items())
        self.mark("Fault", "", f"{kind}{': ' + detail if detail else ''}")
        return fault

    def fault_left(self) -> bool:
        """Whether any fault this trial set is still in force."""
        return bool(self.platform.faults())

    def alive(self) -> bool:
        return self._alive()

    def refuse(self, seconds: float) -> None:
        """Every request answered 400 for ``seconds`` (real time), as Azure answers one
        without ``Metadata: true``; marked on the timeline."""
        self.refuse_until(time.monotonic() + seconds)
        self.mark("Refusing", "", f"every request answered 400 for {seconds:g} s")

    def wait(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Wait (real time) until ``ready()``; False at ``timeout``; ``HandlerGone`` when the
        handler exits first."""
        deadline = time.monotonic() + timeout
        while True:
            if ready():
                return True
            if not self._alive():
                raise HandlerGone
            if time.monotonic() >= deadline:
                return False
            time.sleep(TICK)

    def wait_until(self, t: float) -> None:
        """Wait until the trial's clock reads ``t`` (or the handler exits)."""
        self.wait(lambda: self.now_t() >= t, max(0.0, t - self.now_t()) + 5.0)

    def sleep(self, seconds: float) -> None:
        self.wait_until(self.now_t() + seconds)

    def requests(self) -> list[object]:
        return list(self.platform.requests())

    def answered_since(self, t: float) -> int:
        """How many of the handler's event polls were answered since trial time ``t``."""
        return sum(
            1
            for r in self.platform.requests()
            if is_events_request(r)
            and r.method == "GET"
            and r.status in (200, 304)
            and (r.at - self.t0).total_seconds() >= t
        )

    def wait_polls(self, count: int, timeout: float | None = None) -> bool:
        """Wait for ``count`` more answered polls."""
        since = self.now_t()
        budget = timeout if timeout is not None else count * self.timing.interval + 5.0
        return self.wait(lambda: self.answered_since(since) >= count, budget)

    def seen(self, role: str) -> bool:
        wanted = self.events[role]
        return any(
            wanted in _shown(r.response_body)
            for r in self.platform.requests()
            if r.method == "GET" and r.status == 200 and is_events_request(r)
        )

    def approved(self, role: str) -> bool:
        return bool(self.platform.approvals_of(self.events[role]))

    def check(self, name: str) -> tuple[bool, str] | None:
        """Run ``--drained-check``/``--recovered-check`` now; None when not given."""
        command = self._checks.get(name)
        if command is None:
            return None
        result = run_check(command)
        self.check_results[name] = result
        self.mark("Check", "", f"{name}: {'ok' if result[0] else 'failed'}")
        return result

    def has_check(self, name: str) -> bool:
        return name in self._checks


def _shown(body: bytes) -> str:
    return body.decode("utf-8", "replace").upper()


# -- trials, as the engine needs them ------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    """A trial: what it is (:class:`TrialInfo`), the fleet it runs on, how it drives the
    platform and how it grades what it saw. ``first_call_delay``: its platform makes the
    handler's first request wait; ``needs``: a check without which it is n/a."""

    info: TrialInfo
    drive: Callable[[Stage], None]
    grade: Callable[[Observation], Grade]
    fleet: str = "single"
    first_call_delay: bool = False
    needs: str = ""
    warm_up: bool = True
    platform_timing: Callable[[RunTiming], Mapping[str, float]] | None = None

    @property
    def name(self) -> str:
        return self.info.name


__all__ = ["FLEETS", "HandlerGone", "Stage", "Trial"]

"""Running trials: a fresh platform per trial, its clock driven, the handler watched.

A run (:func:`run`) goes:

1. the relay listens at the handler's VM address (:mod:`forewarn.verify.relay`), and the
   handler starts (``-- CMD``), or the user starts it (``--attach``);
2. calibration: a platform of its own, no event; the handler's first two polls give its
   polling interval, from which the notices are scaled (:class:`RunTiming`);
3. each trial: a fresh :class:`~forewarn.testing.ForewarnPlatform` (its own fleet, seed and
   timing), the relay pointed at its VM, a warm-up until the handler polls it, then the
   trial's drive (events, faults, waits) while a ticker moves the platform's manual clock with
   real time, so the handler's timers and the platform's deadlines share one time; then the
   grade, from the :class:`~forewarn.verify.grading.Observation` alone;
4. the handler stopped (its whole process group), the relay closed.

A handler that exited during a trial, or whose VM was deleted (on Azure its process dies with
the VM), is started again for the next trial; ``--restart-per-trial`` restarts it for each.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from forewarn import __version__
from forewarn.domain.events import Event, EventSource, EventType
from forewarn.domain.impact import ImpactChange
from forewarn.domain.timing import PROFILES
from forewarn.errors import ForewarnError
from forewarn.faults import ActiveFault
from forewarn.testing import ForewarnPlatform
from forewarn.verify.grading import (
    Grade,
    Observation,
    answered_polls,
    evidence_of,
    is_events_request,
)
from forewarn.verify.handler import HandlerProcess, run_check
from forewarn.verify.model import (
    RunReport,
    StateChange,
    TrialInfo,
    TrialResult,
    Verdict,
    VerifyError,
)
from forewarn.verify.relay import Relay

#: How often the ticker moves the platform clock, in real seconds.
TICK = 0.05
#: A poll counts as the handler's interval when it is at least this long (a burst of
#: requests at start-up, instance metadata then events, is not its timer).
MIN_INTERVAL = 0.05
#: Notices are at least this long, and at least this many of the handler's intervals.
NOTICE_FLOOR = 10.0
NOTICE_POLLS = 10
#: Impact and Started period of the trials' events (the documented 7 s and 10 min, shortened).
IMPACT = 3.0
STARTED_PERIOD = 3.0
#: The first-call delay the ``first-call-delay`` trial uses, of the documented two minutes.
FIRST_CALL_DELAY = 15.0
#: How long a handler has to give up on a request that gets no answer (real seconds).
HELD = 20.0
#: How long the run waits for the handler's first request, and a trial's warm-up.
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class RunTiming:
    """Every duration of the run. ``interval`` is the handler's measured polling interval
    (real seconds); notices come from the base profile scaled down to what that interval
    allows (at least :data:`NOTICE_POLLS` polls and :data:`NOTICE_FLOOR` seconds, never more
    than the profile's), ``overrides`` (``--timing``) last."""

    profile: str
    interval: float
    notices: Mapping[str, float]
    impact: float
    started_period: float
    first_call_delay: float
    held: float = 20.0
    overrides: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def scaled(
        cls, profile: str, interval: float, overrides: Mapping[str, float] | None = None
    ) -> RunTiming:
        try:
            base = PROFILES[profile]
        except KeyError:
            raise VerifyError(
                f"unknown profile {profile!r}; known: {', '.join(PROFILES)}"
            ) from None
        given = dict(overrides or {})
        allowed = float(math.ceil(max(NOTICE_FLOOR, NOTICE_POLLS * interval)))
        notices = {}
        for event_type in EventType:
            documented = base.notice_for(event_type).total_seconds()
            if event_type is EventType.TERMINATE and base.terminate_notice is not None:
                documented = base.terminate_notice.total_seconds()
            notices[event_type.value] = given.pop(
                f"notice.{event_type.value}", min(documented, allowed)
            )
        timing = cls(
            profile=profile,
            interval=interval,
            notices=notices,
            impact=given.pop("impact", min(IMPACT, base.impact.total_seconds())),
            started_period=given.pop(
                "started_period", min(STARTED_PERIOD, base.started_period.total_seconds())
            ),
            first_call_delay=given.pop(
                "first_call_delay", min(FIRST_CALL_DELAY, base.first_call_delay.total_seconds())
            ),
            held=given.pop("held", HELD),
            overrides=dict(overrides or {}),
        )
        if given:
            known = ", ".join(
                ["impact", "started_period", "first_call_delay", "held"]
                + [f"notice.{t.value}" for t in EventType]
            )
            raise VerifyError(f"unknown timing {', '.join(given)}; known: {known}")
        return timing

    def notice(self, event_type: str) -> float:
        return self.notices[event_type]

    def platform_timing(self, first_call_delay: bool) -> dict[str, float]:
        """The overrides a trial's platform gets."""
        timing = {f"notice.{name}": seconds for name, seconds in self.notices.items()}
        timing.update(
            impact=self.impact,
            started_period=self.started_period,
            first_call_delay=self.first_call_delay if first_call_delay else 0.0,
            terminate_notice=self.notices[EventType.TERMINATE.value],
        )
        return timing

    def as_dict(self) -> dict[str, float]:
        out = {f"notice.{name}": seconds for name, seconds in self.notices.items()}
        out.update(
            interval=round(self.interval, 3),
            impact=self.impact,
            started_period=self.started_period,
            first_call_delay=self.first_call_delay,
            held=self.held,
        )
        return out

    def describe(self) -> str:
        base = PROFILES[self.profile]
        shrunk = ", ".join(
            f"{name} {base.notice_for(EventType(name)).total_seconds():g}s->{seconds:g}s"
            for name, seconds in self.notices.items()
        )
        return (
            f"Notices from the {self.profile} profile, shortened to what the handler's "
            f"timer allows (it polled every {self.interval:.1f} s: at least {NOTICE_POLLS} "
            f"polls and {NOTICE_FLOOR:g} s, never longer than documented): {shrunk}. Impacts "
            f"{self.impact:g} s, Started for {self.started_period:g} s; the first-call delay "
            f"(documented: up to 120 s) is {self.first_call_delay:g} s in first-call-delay "
            f"and 0 elsewhere. A request held unanswered must be given up within "
            f"{self.held:g} s (held). The platform clock runs at real time. "
            "--timing KEY=SECONDS sets any of them."
        )


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


class HandlerGone(Exception):  # noqa: N818 - a signal inside a trial, never shown
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

    @property
    def name(self) -> str:
        return self.info.name


# -- a run ---------------------------------------------------------------------------------

Progress = Callable[[int, int, str, TrialResult | None], None]


@dataclass
class Attachment:
    """How the handler is reached: a process forewarn runs, or (``handler`` None) one the
    user runs against the relay's address."""

    relay: Relay
    handler: HandlerProcess | None
    description: str
    restart_per_trial: bool = False

    def alive(self) -> bool:
        return self.handler is None or self.handler.running


class Runner:
    """Runs trials for one attachment; :meth:`calibrate` first, then :meth:`run_trial`."""

    def __init__(
        self,
        attachment: Attachment,
        *,
        profile: str = "documented",
        overrides: Mapping[str, float] | None = None,
        checks: Mapping[str, str] | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.attachment = attachment
        self.profile = profile
        self.overrides = dict(overrides or {})
        self.checks = dict(checks or {})
        self.start_timeout = start_timeout
        self.timing: RunTiming | None = None
        self._vm_name = FLEETS["single"][0]  # the calibration's
        RunTiming.scaled(profile, 1.0, overrides)  # refuse a bad profile or key at once

    # -- the handler -----------------------------------------------------------------------

    def _ensure_started(self, fresh: bool) -> None:
        handler = self.attachment.handler
        if handler is None:
            return
        if fresh or not handler.running:
            handler.start()

    def _platform(
        self, trial_fleet: str, seed: int, first_call: bool
    ) -> tuple[ForewarnPlatform, str, list[Stage]]:
        vm, fleet = FLEETS[trial_fleet]
        stages: list[Stage] = []

        def hook(change: ImpactChange) -> None:
            if stages:
                stages[0].on_impact(change)

        timing = self.timing or RunTiming.scaled(self.profile, 1.0, self.overrides)
        platform = ForewarnPlatform(
            fleet=fleet,
            profile=self.profile,
            timing=timing.platform_timing(first_call),
            seed=seed,
            start=datetime.now(UTC).replace(microsecond=0),
            impact_hook=hook,
        )
        return platform, vm, stages

    def _point(self, platform: ForewarnPlatform, vm: str) -> None:
        address = platform.url_for(vm).removeprefix("http://")
        host, port = address.rsplit(":", 1)
        self.attachment.relay.point_at((host, int(port)))

    # -- calibration -----------------------------------------------------------------------

    def calibrate(self) -> RunTiming:
        """Wait for the handler's first requests on a quiet platform; its polling interval
        scales the notices. ``VerifyError`` when it never asks or exits at once."""
        self._ensure_started(fresh=True)
        platform, vm, _ = self._platform("single", 0, first_call=False)
        try:
            self._point(platform, vm)
            t0 = time.monotonic()

            def answered() -> list[float]:
                return [
                    (r.at - platform.clock.now()).total_seconds()
                    for r in platform.requests()
                    if is_events_request(r) and r.method == "GET" and r.status in (200, 304)
                ]

            times: list[float] = []
            deadline = t0 + self.start_timeout
            stepped = platform.now
            while True:
                platform.advance(0)  # nothing is scheduled: the clock need not move
                polls = [r for r in platform.requests() if is_events_request(r)]
                got = [r for r in polls if r.method == "GET" and r.status in (200, 304)]
                if len(got) >= 2:
                    break
                if not self.attachment.alive():
                    raise VerifyError(self._exit_message(len(polls)))
                if time.monotonic() >= deadline:
                    what = "answered no request for events" if not got else "polled only once"
                    raise VerifyError(
                        f"the handler {what} within {self.start_timeout:g} s"
                        + (
                            f"; it was pointed at {self.address_url()}"
                            if self.attachment.handler is None
                            else ""
                        )
                    )
                if len(got) == 1 and not times:
                    times.append(time.monotonic())
                    deadline = max(deadline, time.monotonic() + 130.0)
                time.sleep(TICK)
            interval = max(MIN_INTERVAL, time.monotonic() - times[0]) if times else 1.0
            del stepped, answered
        finally:
            self.attachment.relay.point_at(None)
            platform.close()
        self.timing = RunTiming.scaled(self.profile, interval, self.overrides)
        return self.timing

    def _exit_message(self, requests: int) -> str:
        handler = self.attachment.handler
        assert handler is not None
        status = handler.poll()
        said = handler.output_tail(300).splitlines()
        last = f": {said[-1]}" if said else ""
        when = "at once" if requests == 0 else f"after {requests} request(s)"
        return f"the handler exited {when} (status {status}){last}"

    def address_url(self) -> str:
        host, port = self.attachment.relay.address
        return f"http://{host}:{port}"

    # -- one trial -------------------------------------------------------------------------

    def run_trial(self, trial: Trial, index: int) -> TrialResult:
        info = trial.info
        began = time.monotonic()
        if trial.needs and trial.needs not in self.checks:
            return TrialResult(
                info.name, info.title, info.source, info.requires, Verdict.NA,
                f"needs --{trial.needs}-check CMD to see the application's state",
            )  # fmt: skip
        timing = self.timing
        assert timing is not None, "calibrate first"
        handler = self.attachment.handler
        vm_name = FLEETS[trial.fleet][0]
        if handler is None and vm_name != self._vm_name:
            return TrialResult(
                info.name, info.title, info.source, info.requires, Verdict.NA,
                f"runs on a VM named {vm_name}, not {self._vm_name}: a handler forewarn "
                "cannot restart (--attach) would keep its old name",
            )  # fmt: skip
        # A handler learns its VM's name once; on Azure that name never changes under it.
        fresh = (
            self.attachment.restart_per_trial or trial.first_call_delay or vm_name != self._vm_name
        )
        self._vm_name = vm_name
        if fresh and handler is not None and handler.running:
            handler.stop()
        platform, vm, holder = self._platform(trial.fleet, index + 1, trial.first_call_delay)
        stage = Stage(platform, vm, timing, self.attachment.alive, self.checks)
        holder.append(stage)
        exited: int | None = None
        exited_t: float | None = None
        problem = ""
        could_not = ""
        try:
            self._point(platform, vm)
            stage.start_clock()
            if handler is not None and not handler.running:
                handler.start()
                stage.mark("HandlerStarted", "", self.attachment.description)
            try:
                # One polling interval at least: a handler polling once a minute is graded
                # on the trial, not failed for not polling within --start-timeout.
                warm_up = max(self.start_timeout, 2 * timing.interval + 5.0)
                if trial.warm_up and not stage.wait_polls(1, warm_up):
                    problem = f"the handler did not poll within {warm_up:g} s"
                else:
                    trial.drive(stage)
            except HandlerGone:
                pass
            except ForewarnError as error:  # the platform refused a step the handler's
                # own doing made impossible (it approved what the trial meant to cancel)
                could_not = f"the trial could not be carried out: {error}"
            if handler is not None and handler.poll() is not None:
                exited = handler.poll()
                exited_t = stage.now_t()
                stage.mark("HandlerExited", "", f"status {exited}")
        finally:
            stage.stop_clock()
            self.attachment.relay.point_at(None)
            observation = self._observe(stage, timing, exited, exited_t)
            platform.close()
            deleted = any(m.state == "Deleted" for m in stage.marks)
            if handler is not None and (deleted or exited is not None):
                handler.stop()  # on Azure its process went with its VM; or it is gone
        if problem:
            grade = Grade(Verdict.FAIL, problem)
        elif could_not:
            grade = Grade(Verdict.NA, could_not)
        else:
            grade = trial.grade(observation)
        return TrialResult(
            info.name,
            info.title,
            info.source,
            info.requires,
            grade.verdict,
            grade.reason,
            evidence_of(observation, grade.notes),
            round(time.monotonic() - began, 3),
        )

    def _observe(
        self, stage: Stage, timing: RunTiming, exited: int | None, exited_t: float | None
    ) -> Observation:
        traffic = self.attachment.relay.traffic(stage.mono0)
        handler = self.attachment.handler
        hits = sum(fault.hits for fault in stage.faults)
        with contextlib.suppress(RuntimeError):
            live = {f.id: f.hits for f in stage.platform.faults()}
            hits = sum(live.get(f.id, f.hits) for f in stage.faults)
        return Observation(
            t0=stage.t0,
            requests=tuple(stage.platform.requests()),
            marks=tuple(sorted(stage.marks, key=lambda m: m.t)),
            events=dict(stage.events),
            not_before=dict(stage.not_before),
            vm=stage.vm,
            interval=timing.interval,
            exited=exited,
            exited_t=exited_t,
            sends=tuple(round(x.at - stage.mono0, 3) for x in traffic if x.kind == "data"),
            opens=tuple(round(x.at - stage.mono0, 3) for x in traffic if x.kind == "open"),
            checks=dict(stage.check_results),
            faults_hit=hits,
            output=handler.output_tail() if handler is not None and exited is not None else "",
            end_t=stage.now_t(),
            patience=timing.held,
        )


def fault_hits(stage: Stage) -> int:
    live = {f.id: f.hits for f in stage.platform.faults()}
    return sum(live.get(f.id, f.hits) for f in stage.faults)


def run(
    runner: Runner,
    trials: Sequence[Trial],
    *,
    suite: str,
    progress: Progress | None = None,
) -> RunReport:
    """Calibrate, run ``trials`` in order, and the report. ``VerifyError`` when the run
    could not happen; the caller stops the handler and the relay."""
    started = datetime.now(UTC)
    if progress is not None:
        progress(0, len(trials), "calibrating", None)
    timing = runner.calibrate()
    results: list[TrialResult] = []
    for index, trial in enumerate(trials):
        if progress is not None:
            progress(index, len(trials), trial.name, None)
        result = runner.run_trial(trial, index)
        results.append(result)
        if progress is not None:
            progress(index + 1, len(trials), trial.name, result)
    return RunReport(
        handler=runner.attachment.description,
        suite=suite,
        profile=runner.profile,
        scaling=timing.describe(),
        started=started.isoformat(timespec="seconds"),
        ended=datetime.now(UTC).isoformat(timespec="seconds"),
        results=tuple(results),
        timing=timing.as_dict(),
        version=__version__,
    )


def answered_after(observation: Observation, t: float) -> bool:
    return bool(answered_polls(observation, after=t))


__all__ = [
    "FLEETS",
    "Attachment",
    "HandlerGone",
    "Progress",
    "RunTiming",
    "Runner",
    "Stage",
    "Trial",
    "fault_hits",
    "run",
]

_ = timedelta  # durations are given as seconds throughout

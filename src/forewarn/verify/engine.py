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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from forewarn import __version__
from forewarn.domain.impact import ImpactChange
from forewarn.errors import ForewarnError
from forewarn.testing import ForewarnPlatform, RecordedRequest
from forewarn.verify.grading import Grade, Observation, evidence_of, is_events_request
from forewarn.verify.handler import HandlerProcess
from forewarn.verify.model import RunReport, TrialResult, Verdict, VerifyError
from forewarn.verify.relay import BAD_REQUEST, Relay, Traffic
from forewarn.verify.stage import FLEETS, HandlerGone, Stage, Trial
from forewarn.verify.timing import MIN_INTERVAL, START_TIMEOUT, TICK, RunTiming

# -- a run ---------------------------------------------------------------------------------


class TrialError(VerifyError):
    """A trial that could not run through an error of its own (a bug of forewarn's, not the
    handler's doing): the run stops there, as one that could not happen (exit 2), naming the
    trial; the handler is stopped on the way out like any other run's end."""

    def __init__(self, trial: str, error: BaseException) -> None:
        self.trial = trial
        said = str(error) or "no message"
        super().__init__(
            f"trial {trial} could not run: an internal error of the trial, not the handler's "
            f"doing ({type(error).__name__}: {said}); the trials before it are not reported"
        )


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
        self,
        trial_fleet: str,
        seed: int,
        first_call: bool,
        extra: Mapping[str, float] | None = None,
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
            timing={**timing.platform_timing(first_call), **(extra or {})},
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
                    raise VerifyError(
                        _silence(polls, got, self.start_timeout)
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
        return f"http://{host}" + ("" if port == 80 else f":{port}")

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
        extra = trial.platform_timing(timing) if trial.platform_timing is not None else None
        platform, vm, holder = self._platform(trial.fleet, index + 1, trial.first_call_delay, extra)
        stage = Stage(platform, vm, timing, self.attachment.alive, self.checks)
        holder.append(stage)
        relay = self.attachment.relay
        stage.sends = lambda: [
            x.at - stage.mono0 for x in relay.traffic(stage.mono0) if x.kind == "data"
        ]
        stage.refuse_until = relay.refuse_until
        exited: int | None = None
        exited_t: float | None = None
        problem = ""
        could_not = ""
        broken: BaseException | None = None
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
            except Exception as error:
                broken = error
            if handler is not None and handler.poll() is not None:
                exited = handler.poll()
                exited_t = stage.now_t()
                stage.mark("HandlerExited", "", f"status {exited}")
        finally:
            stage.stop_clock()
            self.attachment.relay.refuse_until(0.0)
            self.attachment.relay.point_at(None)
            observation = self._observe(stage, timing, exited, exited_t)
            platform.close()
            deleted = any(m.state == "Deleted" for m in stage.marks)
            if handler is not None and (deleted or exited is not None):
                handler.stop()  # on Azure its process went with its VM; or it is gone
        if broken is not None:
            raise TrialError(info.name, broken)
        if problem:
            grade = Grade(Verdict.FAIL, problem)
        elif could_not:
            grade = Grade(Verdict.NA, could_not)
        else:
            try:
                grade = trial.grade(observation)
            except Exception as error:
                raise TrialError(info.name, error) from error
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
            faulted=tuple(
                sorted(
                    (*stage.platform.faulted_requests(), *_refused(stage, traffic)),
                    key=lambda r: r.at,
                )
            ),
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


def _silence(
    polls: Sequence[RecordedRequest], answered: Sequence[RecordedRequest], seconds: float
) -> str:
    """What the handler did in its first ``seconds``, when too little to calibrate on."""
    if answered:
        return f"the handler polled only once within {seconds:g} s"
    if polls:
        statuses = ", ".join(str(status) for status in sorted({r.status for r in polls}))
        return (
            f"the handler sent {len(polls)} request(s) for events within {seconds:g} s, "
            f"none answered 200 (status {statuses})"
        )
    return f"the handler sent no request for events within {seconds:g} s"


def _refused(stage: Stage, traffic: Sequence[Traffic]) -> list[RecordedRequest]:
    """The requests the relay answered 400 itself, as recorded requests (their request line
    is all it read of them)."""
    refused = []
    for item in traffic:
        if item.kind != "refused":
            continue
        method, _, rest = item.detail.partition(" ")
        target = rest.rsplit(" ", 1)[0] if " HTTP/" in rest else rest
        path, _, query = target.partition("?")
        refused.append(
            RecordedRequest(
                at=stage.t0 + timedelta(seconds=item.at - stage.mono0),
                vm=stage.vm,
                method=method,
                path=path,
                query=query,
                headers={},
                body=b"",
                status=400,
                response_body=BAD_REQUEST.split(b"\r\n\r\n", 1)[1],
                fault="bad-request",
            )
        )
    return refused


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


__all__ = ["Attachment", "Progress", "Runner", "TrialError", "run"]

"""The agent's pipeline: change -> store -> policy -> hooks -> approval.

The documented loop (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High
level overview") prepares for new events and recovers from removed ones; this is that loop made
durable and concurrent:

- every event of a document is reconsidered on every poll, and the :class:`HandledStore`
  says which steps are already done, so a restart, a lost approval or a repeated document
  never repeats a hook and never approves twice;
- hooks run on a bounded pool of workers while polling goes on, one event's steps strictly in
  order (prepare, approve, started, recover), different events side by side;
- an approval is sent only after every prepare hook of the event exited 0, only by the elected
  VM, and only while the event is still Scheduled; a failed approval is tried again on later
  polls, up to ``approval_attempts`` in all.

``dry_run`` decides and logs what would happen, and does nothing else: no hooks, no approval,
nothing written to the store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from concurrent.futures import wait as wait_for
from datetime import datetime

from forewarn.agent.config import LeaderElection
from forewarn.agent.hooks import HookOutcome, HookRunner, Moment
from forewarn.agent.leader import leader, may_approve
from forewarn.agent.logs import JsonLog
from forewarn.agent.metrics import AgentMetrics
from forewarn.agent.policies import Action, Decision, Policy
from forewarn.agent.store import HandledStore, Outcome, Step
from forewarn.client import DocumentChange, ImdsError, ScheduledEvent, parse_document


class InlineExecutor(Executor):
    """Runs each task at once on the caller's thread: deterministic pipelines for tests and
    for ``hook_workers`` of 1 where ordering matters more than overlap."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: Future[object] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def _fields(event: ScheduledEvent) -> dict[str, object]:
    return {
        "event_id": event.event_id,
        "type": str(event.event_type),
        "status": str(event.status),
        "source": None if event.source is None else str(event.source),
        "resources": list(event.resources),
        "duration": event.duration_seconds,
    }


class Pipeline:
    def __init__(
        self,
        *,
        approve: Callable[[str], None],
        policy: Policy,
        election: LeaderElection,
        hooks: HookRunner,
        store: HandledStore,
        metrics: AgentMetrics,
        log: JsonLog,
        executor: Executor,
        now: Callable[[], datetime],
        approval_attempts: int = 5,
        dry_run: bool = False,
    ) -> None:
        self.vm_name = ""
        self._approve_call = approve
        self.policy = policy
        self.election = election
        self.hooks = hooks
        self.store = store
        self.metrics = metrics
        self.log = log
        self.executor = executor
        self._now = now
        self.approval_attempts = approval_attempts
        self.dry_run = dry_run
        self._lock = threading.Lock()
        self._current: dict[str, ScheduledEvent] = {}
        self._decisions: dict[str, Decision] = {}
        self._tails: dict[str, Future[None]] = {}
        self._busy: set[tuple[str, Step]] = set()
        self._approval_failures: dict[str, int] = {}
        self._told: set[tuple[str, str]] = set()  # dry-run lines already written

    # -- what the poll loop calls ----------------------------------------------------------

    def on_change(self, change: DocumentChange) -> None:
        """A new DocumentIncarnation: reconsider what is there, recover from what left."""
        with self._lock:
            self._current = {event.event_id.upper(): event for event in change.current.events}
        self.reconcile()
        for event in change.removed:
            self._gone(event)
        if change.previous is None and not self.dry_run:
            # Events acted on before a restart that disappeared while the agent was down.
            for event_id in self.store.unrecovered():
                if event_id not in self._current:
                    remembered = self._remembered_event(event_id)
                    if remembered is not None:
                        self._gone(remembered)

    def reconcile(self) -> None:
        """Start whatever step each current event still needs (called on every poll)."""
        with self._lock:
            events = list(self._current.values())
        for event in events:
            self._consider(event)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for the steps under way; True when none is left."""
        with self._lock:
            pending = list(self._tails.values())
        _, not_done = wait_for(pending, timeout=timeout)
        return not not_done

    # -- deciding --------------------------------------------------------------------------

    def decision(self, event: ScheduledEvent) -> Decision:
        event_id = event.event_id.upper()
        with self._lock:
            known = self._decisions.get(event_id)
        if known is not None:
            return known
        steps = {} if self.dry_run else self.store.steps(event_id)
        if Step.DECIDED in steps:
            recorded = json.loads(steps[Step.DECIDED][1])
            decision = Decision(Action(recorded["action"]), recorded["rule"])
        else:
            decision = self.policy.decide(event, self.vm_name)
            if not self.dry_run:
                self.store.record(
                    event_id,
                    Step.DECIDED,
                    Outcome.OK if decision.action.acts else Outcome.SKIPPED,
                    self._now(),
                    json.dumps(
                        {
                            "action": decision.action.value,
                            "rule": decision.rule,
                            "event": dict(event.raw),
                        }
                    ),
                )
        with self._lock:
            self._decisions[event_id] = decision
        self.metrics.events_seen.labels(str(event.event_type), str(event.source or "")).inc()
        self.metrics.decisions.labels(decision.action.value).inc()
        self.log.info(
            "event seen",
            **_fields(event),
            impacts_this_vm=event.impacts(self.vm_name),
            action=decision.action.value,
            rule=decision.rule,
        )
        return decision

    def _remembered_event(self, event_id: str) -> ScheduledEvent | None:
        detail = self.store.steps(event_id).get(Step.DECIDED, (Outcome.SKIPPED, ""))[1]
        try:
            raw = json.loads(detail)["event"]
            return parse_document({"DocumentIncarnation": 0, "Events": [raw]}).events[0]
        except (ValueError, KeyError, IndexError, TypeError, ImdsError):
            self.log.warning(
                "cannot recover an event whose record is unreadable", event_id=event_id
            )
            return None

    def _consider(self, event: ScheduledEvent) -> None:
        decision = self.decision(event)
        if not decision.action.acts:
            return
        if self.dry_run:
            self._tell_dry_run(event, decision)
            return
        event_id = event.event_id.upper()
        steps = self.store.steps(event_id)
        if Step.RECOVERED in steps and event.is_scheduled:
            # Recovered, yet Scheduled again: the endpoint lost its state and shows the event
            # anew. Whatever was prepared has been undone by the recover hooks: start over.
            self.log.warning("event back after recovery: preparing again", **_fields(event))
            self.store.reopen(event_id)
            with self._lock:
                self._approval_failures.pop(event_id, None)
            steps = self.store.steps(event_id)
        if event.is_scheduled:
            if decision.action.prepares and Step.PREPARED not in steps:
                self._submit(event_id, Step.PREPARED, self._prepare_then_approve, event)
            elif Step.APPROVED not in steps and self._prepared_ok(decision, steps):
                self._submit(event_id, Step.APPROVED, self._approve, event)
        elif event.is_started and Step.STARTED not in steps:
            self._submit(event_id, Step.STARTED, self._started, event)

    @staticmethod
    def _prepared_ok(decision: Decision, steps: dict[Step, tuple[Outcome, str]]) -> bool:
        if not decision.action.prepares:
            return True
        return steps.get(Step.PREPARED, (Outcome.FAILED, ""))[0] is Outcome.OK

    def _tell_dry_run(self, event: ScheduledEvent, decision: Decision) -> None:
        key = (event.event_id.upper(), str(event.status))
        if key in self._told:
            return
        self._told.add(key)
        would: list[str] = []
        if event.is_scheduled:
            if decision.action.prepares and self.hooks.has(Moment.PREPARE):
                would.append("run prepare hooks")
            if may_approve(event, self.vm_name, self.election):
                would.append("approve")
        elif event.is_started and self.hooks.has(Moment.STARTED):
            would.append("run started hooks")
        if "approve" in would:
            self.metrics.approvals.labels("dry-run").inc()
        self.log.info("dry run: nothing done", **_fields(event), would=would, rule=decision.rule)

    # -- running steps ---------------------------------------------------------------------

    def _submit(
        self,
        event_id: str,
        step: Step,
        work: Callable[[ScheduledEvent], None],
        event: ScheduledEvent,
    ) -> None:
        key = (event_id, step)
        with self._lock:
            if key in self._busy:
                return
            self._busy.add(key)
            before = self._tails.get(event_id)

        def run() -> None:
            if before is not None:
                wait_for([before])
            try:
                work(event)
            except Exception as exc:  # a bug must not stop the other events' handling
                self.log.error(
                    "step failed unexpectedly", event_id=event_id, step=step.value, error=repr(exc)
                )
            finally:
                with self._lock:
                    self._busy.discard(key)

        future = self.executor.submit(run)
        with self._lock:
            self._tails[event_id] = future

        def forget(done: Future[None]) -> None:
            with self._lock:
                if self._tails.get(event_id) is done:
                    del self._tails[event_id]

        future.add_done_callback(forget)

    def _run_hooks(self, moment: Moment, event: ScheduledEvent) -> HookOutcome:
        outcome = self.hooks.run(moment, event, self.vm_name)
        for result in outcome.results:
            self.metrics.hook_duration.labels(moment.value).observe(result.seconds)
            self.log.log(
                "info" if result.ok else "error",
                "hook ran" if result.ok else "hook failed",
                event_id=event.event_id,
                hook=moment.value,
                command=result.command,
                exit_code=result.exit_code,
                timed_out=result.timed_out,
                seconds=round(result.seconds, 3),
                output=result.output,
                **({"error": result.error} if result.error else {}),
            )
        if not outcome.ok:
            self.metrics.hook_failures.labels(moment.value, outcome.failure).inc()
        return outcome

    def _prepare_then_approve(self, event: ScheduledEvent) -> None:
        event_id = event.event_id.upper()
        outcome = self._run_hooks(Moment.PREPARE, event)
        self.store.record(
            event_id,
            Step.PREPARED,
            Outcome.OK if outcome.ok else Outcome.FAILED,
            self._now(),
            outcome.failure,
        )
        if not outcome.ok:
            self.log.error(
                "prepare failed: this VM will not approve; the event starts at NotBefore",
                **_fields(event),
            )
            return
        self._approve(event)

    def _approve(self, event: ScheduledEvent) -> None:
        event_id = event.event_id.upper()
        if Step.APPROVED in self.store.steps(event_id):
            return
        if not may_approve(event, self.vm_name, self.election):
            chosen = leader(event, self.election)
            reason = (
                "not in Resources" if not event.impacts(self.vm_name) else f"leader is {chosen}"
            )
            self.store.record(event_id, Step.APPROVED, Outcome.SKIPPED, self._now(), reason)
            self.log.info(
                "not approving: another VM approves", event_id=event.event_id, reason=reason
            )
            return
        with self._lock:
            latest = self._current.get(event_id)
        if latest is None:
            self.log.info("not approving: the event is gone", event_id=event.event_id)
            return
        if not latest.is_scheduled:
            self.store.record(
                event_id, Step.APPROVED, Outcome.SKIPPED, self._now(), "already started"
            )
            return
        try:
            self._approve_call(event.event_id)
        except ImdsError as exc:
            failures = self._approval_failures.get(event_id, 0) + 1
            self._approval_failures[event_id] = failures
            self.metrics.approvals.labels("error").inc()
            if failures >= self.approval_attempts:
                self.store.record(event_id, Step.APPROVED, Outcome.FAILED, self._now(), str(exc))
                self.metrics.approvals.labels("gave-up").inc()
                self.log.error(
                    "approval failed; giving up",
                    event_id=event.event_id,
                    attempts=failures,
                    error=str(exc),
                )
            else:
                self.log.warning(
                    "approval failed; trying again at the next poll",
                    event_id=event.event_id,
                    attempts=failures,
                    error=str(exc),
                )
            return
        self.store.record(event_id, Step.APPROVED, Outcome.OK, self._now())
        self.metrics.approvals.labels("ok").inc()
        self.log.info("approved", **_fields(event))

    def _started(self, event: ScheduledEvent) -> None:
        event_id = event.event_id.upper()
        if Step.STARTED in self.store.steps(event_id):
            return
        outcome = self._run_hooks(Moment.STARTED, event)
        self.store.record(
            event_id,
            Step.STARTED,
            Outcome.OK if outcome.ok else Outcome.FAILED,
            self._now(),
            outcome.failure,
        )
        self.log.info("event started", **_fields(event))

    def _gone(self, event: ScheduledEvent) -> None:
        decision = self.decision(event)
        if not decision.action.acts:
            self.log.info("event gone", **_fields(event))
            with self._lock:
                self._decisions.pop(event.event_id.upper(), None)
            return
        if self.dry_run:
            self.log.info("dry run: nothing done", **_fields(event), would=["run recover hooks"])
            return
        self._submit(event.event_id.upper(), Step.RECOVERED, self._recover, event)

    def _recover(self, event: ScheduledEvent) -> None:
        event_id = event.event_id.upper()
        if Step.RECOVERED in self.store.steps(event_id):
            return
        outcome = self._run_hooks(Moment.RECOVER, event)
        self.store.record(
            event_id,
            Step.RECOVERED,
            Outcome.OK if outcome.ok else Outcome.FAILED,
            self._now(),
            outcome.failure,
        )
        self.log.info(
            "recovered" if outcome.ok else "recover hooks failed", event_id=event.event_id
        )
        with self._lock:
            self._decisions.pop(event_id, None)
            self._approval_failures.pop(event_id, None)


__all__ = [
    "InlineExecutor",
    "Pipeline",
]

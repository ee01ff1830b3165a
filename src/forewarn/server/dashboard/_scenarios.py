"""Scenarios started from the dashboard, with their progress.

A run goes through the control API over HTTP, exactly as ``forewarn scenario run`` does, on a
thread of its own: every step passes the same door (and the same guard) as any other client,
and the server's loop is never touched from that thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forewarn.scenario.client import ControlClient
from forewarn.scenario.schema import Scenario, Step
from forewarn.scenario.steps import ScenarioResult, run_scenario

if TYPE_CHECKING:
    import httpx

__all__ = ["ScenarioRuns"]

#: Runs remembered for the page, newest last.
KEPT_RUNS = 20


@dataclass
class _Run:
    run_id: int
    scenario: Scenario
    done: int = 0
    result: ScenarioResult | None = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def view(self) -> dict[str, Any]:
        with self.lock:
            result, error, done = self.result, self.error, self.done
        if error is not None:
            status, detail = "failed", error
        elif result is None:
            status, detail = "running", ""
        elif result.passed:
            status, detail = "passed", ""
        else:
            failure = result.failure
            assert failure is not None
            status = "failed"
            detail = failure.render(self.scenario.source, len(self.scenario.steps))
        return {
            "id": self.run_id,
            "name": self.scenario.name,
            "steps": len(self.scenario.steps),
            "done": done,
            "status": status,
            "detail": detail,
        }


class ScenarioRuns:
    """Starts scenario runs and reports them; ``connect`` opens an HTTP client on the control
    API (None: this app is not being served, so nothing can run)."""

    def __init__(self, connect: Callable[[], httpx.Client] | None) -> None:
        self._connect = connect
        self._runs: list[_Run] = []
        self._lock = threading.Lock()
        self._next = 1

    @property
    def available(self) -> bool:
        return self._connect is not None

    def start(self, scenario: Scenario) -> dict[str, Any]:
        """Run ``scenario`` (checked whole already: no step runs unless every step is
        valid) on a thread of its own."""
        with self._lock:
            run = _Run(self._next, scenario)
            self._next += 1
            self._runs = [*self._runs[-(KEPT_RUNS - 1) :], run]
        threading.Thread(target=self._run, args=(run,), daemon=True).start()
        return run.view()

    def views(self) -> list[dict[str, Any]]:
        with self._lock:
            runs = list(self._runs)
        return [run.view() for run in runs]

    def _run(self, run: _Run) -> None:
        assert self._connect is not None

        def advance(step: Step) -> None:
            with run.lock:
                run.done += 1

        try:
            with self._connect() as http:
                result = run_scenario(run.scenario, ControlClient(http), on_step=advance)
        except Exception as exc:  # a run that breaks is shown, never raised in a thread
            with run.lock:
                run.error = f"{type(exc).__name__}: {exc}"
            return
        with run.lock:
            run.result = result

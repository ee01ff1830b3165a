"""``forewarn verify`` inside a test: grade a handler and fail the test naming the trials.

The pytest fixture ``forewarn_verify`` (:mod:`forewarn.testing.plugin`) is
:func:`verify_handler` with the test's failure attached. A handler is either a command (as
``forewarn verify -- CMD`` runs it, with ``FOREWARN_IMDS_ENDPOINT`` set) or a callable run on a
thread of the test's process, ``handler(endpoint, stop)``: ``endpoint`` is its VM's address
(``http://127.0.0.1:PORT``), ``stop`` a :class:`threading.Event` set when the run is over, by
which it must return. An object handler passes its method (``verify(worker.run)``).

The run is the command's: the same trials, timing and grading (docs/verify.md); only the
report goes to the caller instead of the terminal.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence

from forewarn.errors import ForewarnError
from forewarn.verify.model import RunReport, TrialResult, VerifyError

#: A handler run on a thread: ``handler(endpoint, stop)`` until ``stop`` is set.
ThreadHandler = Callable[[str, threading.Event], object]
#: How long a thread handler has to return once ``stop`` is set.
THREAD_STOP_TIMEOUT = 10.0
_URL = re.compile(r"http://[^\s:/]+(?::\d+)?")


class VerifyFailed(ForewarnError, AssertionError):  # noqa: N818 - "the verify failed"
    """Trials failed: the message names each with its reason and its evidence. An
    AssertionError as well, so pytest reports it as the test's failure."""

    def __init__(self, report: RunReport, raised: BaseException | None = None) -> None:
        self.report = report
        message = failure_message(report)
        if raised is not None:
            message += f"\n\nthe handler raised {raised!r}"
        super().__init__(message)


def failure_message(report: RunReport, evidence_lines: int = 12) -> str:
    """What a failed run says: one line per failed trial, then each one's evidence."""
    failed = report.failed
    names = ", ".join(result.name for result in failed)
    lines = [f"forewarn verify: {len(failed)} trial(s) failed: {names}"]
    lines += [f"  {result.name}: {result.reason}" for result in failed]
    for result in failed:
        lines += ["", *_evidence(result, evidence_lines)]
    return "\n".join(lines)


def _evidence(result: TrialResult, limit: int) -> list[str]:
    return [
        f"{result.name} ({result.source}): a pass requires {result.requires}",
        *(f"    {line}" for line in result.evidence.describe(limit).splitlines()),
    ]


def verify_handler(
    handler: Sequence[str] | ThreadHandler,
    *,
    suite: str = "quick",
    trials: Sequence[str] = (),
    profile: str = "documented",
    timing: Mapping[str, float] | None = None,
    endpoint_env: str = "FOREWARN_IMDS_ENDPOINT",
    restart_per_trial: bool = False,
    drained_check: str | None = None,
    recovered_check: str | None = None,
    start_timeout: float = 30.0,
    environ: Mapping[str, str] | None = None,
    check: bool = True,
) -> RunReport:
    """Grade ``handler`` on ``suite`` (or only ``trials``); the report.

    With ``check`` (the default) a run where a trial failed raises :class:`VerifyFailed`
    (an ``AssertionError`` naming the trials); warnings and n/a never do. A run that could not
    happen raises :class:`~forewarn.verify.model.VerifyError`, as ``forewarn verify`` exits 2.
    """
    from forewarn.verify.session import Options
    from forewarn.verify.session import verify_handler as run_session
    from forewarn.verify.trials import select

    chosen = select(suite, trials)
    checks = {"drained": drained_check, "recovered": recovered_check}
    options = Options(
        command=() if callable(handler) else tuple(handler),
        attach=callable(handler),
        endpoint_env=endpoint_env,
        restart_per_trial=restart_per_trial,
        profile=profile,
        timing=dict(timing or {}),
        checks={name: command for name, command in checks.items() if command},
        start_timeout=start_timeout,
        suite="custom" if trials else suite,
        environ=dict(os.environ if environ is None else environ),
    )
    raised: list[BaseException] = []
    if callable(handler):
        report = _run_threaded(
            handler, raised, lambda announce: run_session(options, chosen, announce=announce)
        )
    else:
        report = run_session(options, chosen)
    if check and not report.passed:
        raise VerifyFailed(report, raised[0] if raised else None)
    return report


def _run_threaded(
    handler: ThreadHandler,
    raised: list[BaseException],
    run: Callable[[Callable[[str], None]], RunReport],
) -> RunReport:
    """Attach mode, with the handler started on a thread once its VM's address is announced;
    what it raised, if anything, goes into ``raised`` (its silence is what the trials grade)."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def body(endpoint: str) -> None:
        try:
            handler(endpoint, stop)
        except BaseException as error:  # reported with the failed trials
            raised.append(error)

    def announce(line: str) -> None:
        found = _URL.search(line)
        if found is None or threads:
            return
        thread = threading.Thread(
            target=body, args=(found.group(0),), name="forewarn-verify-handler", daemon=True
        )
        threads.append(thread)
        thread.start()

    try:
        report = run(announce)
    finally:
        stop.set()
        for thread in threads:
            thread.join(THREAD_STOP_TIMEOUT)
    if not threads:
        raise VerifyError("the handler's VM address was never announced")
    if threads[0].is_alive():
        raise VerifyError(
            f"the handler did not return within {THREAD_STOP_TIMEOUT:g} s of stop being set"
        )
    return report


def verdicts_of(report: RunReport) -> dict[str, str]:
    """Each trial's verdict as its word (``{"headers": "pass"}``), for an ``assert ==``."""
    return {name: verdict.value for name, verdict in report.verdicts().items()}


__all__ = [
    "THREAD_STOP_TIMEOUT",
    "ThreadHandler",
    "VerifyFailed",
    "failure_message",
    "verdicts_of",
    "verify_handler",
]

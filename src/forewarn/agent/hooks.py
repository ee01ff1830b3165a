"""Running the user's commands for an event: ``prepare``, ``started`` and ``recover``.

A hook gets the event twice, as ``FOREWARN_EVENT_*`` environment variables for shell scripts
and as the event's JSON object (as the endpoint sent it) on standard input for programs. It
runs in a process group of its own, so a timeout kills it together with whatever it started
(``kubectl drain`` and its children). Only the last ``output_limit`` bytes of its output are
kept, for the logs; the rest goes to a temporary file and is dropped.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from forewarn.agent.config import HookSpec
from forewarn.client import ScheduledEvent


class Moment(enum.StrEnum):
    PREPARE = "prepare"  # before approval
    STARTED = "started"  # the event moved to Started
    RECOVER = "recover"  # the event disappeared: completed or cancelled


@dataclass(frozen=True, slots=True)
class CommandResult:
    command: str
    exit_code: int | None  # None when it could not start or was killed on timeout
    timed_out: bool
    seconds: float
    output: str  # the tail of stdout and stderr together
    error: str = ""  # why it could not start

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True, slots=True)
class HookOutcome:
    moment: Moment
    results: tuple[CommandResult, ...]

    @property
    def ok(self) -> bool:
        """True when every command ran and exited 0 (and so when there were none)."""
        return all(result.ok for result in self.results)

    @property
    def failure(self) -> str:
        for result in self.results:
            if result.timed_out:
                return "timeout"
            if result.error:
                return "not-started"
            if result.exit_code != 0:
                return "exit-code"
        return ""


def event_environment(event: ScheduledEvent, vm_name: str, moment: Moment) -> dict[str, str]:
    """The ``FOREWARN_*`` variables a hook sees."""
    raw_not_before = event.raw.get("NotBefore")
    return {
        "FOREWARN_EVENT_ID": event.event_id,
        "FOREWARN_EVENT_TYPE": str(event.event_type),
        "FOREWARN_EVENT_STATUS": str(event.status),
        "FOREWARN_EVENT_SOURCE": "" if event.source is None else str(event.source),
        "FOREWARN_EVENT_RESOURCES": ",".join(event.resources),
        "FOREWARN_EVENT_NOT_BEFORE": raw_not_before if isinstance(raw_not_before, str) else "",
        "FOREWARN_EVENT_DURATION": (
            "" if event.duration_seconds is None else str(event.duration_seconds)
        ),
        "FOREWARN_EVENT_DESCRIPTION": event.description or "",
        "FOREWARN_VM_NAME": vm_name,
        "FOREWARN_HOOK": moment.value,
    }


def event_json(event: ScheduledEvent) -> bytes:
    """The event as received; rebuilt from the model for an event that was not."""
    if event.raw:
        return json.dumps(dict(event.raw)).encode()
    return json.dumps(
        {
            "EventId": event.event_id,
            "EventStatus": str(event.status),
            "EventType": str(event.event_type),
            "Resources": list(event.resources),
        }
    ).encode()


def _tail(handle: IO[bytes], limit: int) -> str:
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - limit))
    text = handle.read().decode("utf-8", "replace")
    return ("..." if size > limit else "") + text


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


class HookRunner:
    """Runs the configured commands of each moment, in order, stopping at the first failure."""

    def __init__(
        self,
        hooks: Mapping[Moment, Sequence[HookSpec]],
        *,
        cwd: Path | None = None,
        output_limit: int = 4096,
        environ: Mapping[str, str] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hooks = {moment: tuple(hooks.get(moment, ())) for moment in Moment}
        self.cwd = cwd
        self.output_limit = output_limit
        self.environ = dict(os.environ if environ is None else environ)
        self._monotonic = monotonic

    def has(self, moment: Moment) -> bool:
        return bool(self.hooks[moment])

    def run(self, moment: Moment, event: ScheduledEvent, vm_name: str) -> HookOutcome:
        results: list[CommandResult] = []
        environment = {**self.environ, **event_environment(event, vm_name, moment)}
        stdin = event_json(event)
        for hook in self.hooks[moment]:
            result = self._run_one(hook, environment, stdin)
            results.append(result)
            if not result.ok:
                break
        return HookOutcome(moment, tuple(results))

    def _run_one(self, hook: HookSpec, environment: dict[str, str], stdin: bytes) -> CommandResult:
        argv = ["/bin/sh", "-c", hook.command] if isinstance(hook.command, str) else hook.command
        shown = hook.command if isinstance(hook.command, str) else " ".join(hook.command)
        started = self._monotonic()
        with tempfile.TemporaryFile() as output:
            try:
                process = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.PIPE,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    env=environment,
                    cwd=self.cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                return CommandResult(shown, None, False, 0.0, "", str(exc))
            timed_out = False
            try:
                process.communicate(stdin, timeout=hook.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
                process.communicate()
            seconds = self._monotonic() - started
            return CommandResult(
                shown,
                None if timed_out else process.returncode,
                timed_out,
                seconds,
                _tail(output, self.output_limit),
            )


__all__ = [
    "CommandResult",
    "HookOutcome",
    "HookRunner",
    "Moment",
    "event_environment",
    "event_json",
]

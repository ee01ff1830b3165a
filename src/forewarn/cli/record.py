"""``forewarn record``: run inside a VM, write what its Scheduled Events endpoint shows it.

A client of the VM-facing endpoint, like ``forewarn events get``: it loads the SDK's
constants and the trace modules, nothing of the server (docs/record-replay.md).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import click

from forewarn.cli.common import examples, parse_duration
from forewarn.client import DEFAULT_API_VERSION, FIRST_CALL_TIMEOUT, IMDS_ADDRESS
from forewarn.trace.format import TraceError
from forewarn.trace.recorder import DEFAULT_MAX_BYTES, Recorder, RecordSettings


def stopping(recorder: Recorder) -> Callable[[int, FrameType | None], None]:
    """The handler of SIGINT and SIGTERM: either ends the recording with a stop line, not
    mid-write. The recorder is told first (:meth:`Recorder.interrupt`), then
    ``KeyboardInterrupt`` cuts short whatever it waits on; if something swallows that, the
    recording still ends at its next turn."""

    def handler(signum: int, frame: FrameType | None) -> None:
        recorder.interrupt()
        raise KeyboardInterrupt

    return handler


def quiet_swallowed_interrupts(
    fallback: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], object]:
    """An unraisable hook that says nothing of a ``KeyboardInterrupt``: the one
    :func:`stopping` raises may land in a finalizer the collector runs (an HTTP library's
    response stream, say), where Python can only print it, a traceback the user did not
    cause. The recorder was told before it was raised, so nothing is lost by keeping quiet;
    anything else goes to ``fallback``."""

    def hook(unraisable: sys.UnraisableHookArgs) -> object:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            return None
        return fallback(unraisable)

    return hook


class _ProgressLine:
    """The progress line on standard error: redrawn in place on a terminal, else written
    again only when a change or an error has been counted."""

    def __init__(self) -> None:
        self.terminal = sys.stderr.isatty()
        self.last = ""

    def __call__(self, line: str) -> None:
        if self.terminal:
            click.echo(f"\r\033[K{line}", nl=False, err=True)
        elif _counted(line) != _counted(self.last):
            click.echo(line, err=True)
        self.last = line

    def end(self) -> None:
        if self.terminal and self.last:
            click.echo("", err=True)


def _counted(line: str) -> str:
    """The part of a progress line that changes with a change or an error, not a poll."""
    return line.partition(" polls, ")[2].split(";")[0] + line.partition(";")[2].split(";")[0]


@click.command(
    "record",
    epilog=examples(
        "forewarn record --out vm.trace                      # on the VM; Ctrl-C to stop",
        "forewarn record --out vm.trace --approve-after 30   # approve 30 s after seeing",
        "forewarn record --endpoint http://127.0.0.1:16954 --out vm0.trace",
    ),
)
@click.option(
    "--endpoint",
    default=f"http://{IMDS_ADDRESS}",
    show_default=True,
    metavar="URL",
    help="The Metadata Service's base URL (a forewarn serve's, to record forewarn).",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The trace file; an existing trace is checked and appended to.",
)
@click.option(
    "--interval",
    default="1s",
    show_default=True,
    help="Time between polls (0.2s at least: the IMDS limit is 5 requests a second).",
)
@click.option(
    "--approve-after",
    "approve_after",
    type=click.FloatRange(min=0),
    help="Approve each Scheduled event this many seconds after it is first seen "
    "(default: never approve). Written into the trace.",
)
@click.option(
    "--max-bytes",
    "max_bytes",
    type=click.IntRange(min=4096),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Stop, saying so in the trace, before it grows past this size.",
)
@click.option(
    "--api-version",
    default=DEFAULT_API_VERSION,
    show_default=True,
    help="The Scheduled Events api-version polled.",
)
@click.option(
    "--first-call-timeout",
    type=click.FloatRange(min=1),
    default=FIRST_CALL_TIMEOUT,
    show_default=True,
    help="Seconds the first call may take (the documentation: up to two minutes).",
)
def record(
    endpoint: str,
    out: Path,
    interval: str,
    approve_after: float | None,
    max_bytes: int,
    api_version: str,
    first_call_timeout: float,
) -> None:
    """Record every document this VM's Scheduled Events endpoint shows it into a trace, one
    line per change, until Ctrl-C or SIGTERM (docs/record-replay.md)."""
    try:
        settings = RecordSettings(
            out,
            endpoint=endpoint.rstrip("/"),
            interval=parse_duration(interval).total_seconds(),
            approve_after=approve_after,
            max_bytes=max_bytes,
            api_version=api_version,
            first_call_timeout=first_call_timeout,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    progress = _ProgressLine()
    recorder = Recorder(settings, progress=progress)
    handler = stopping(recorder)
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, handler)}
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # started with Ctrl-C ignored
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, handler)
    unraisable_hook = sys.unraisablehook
    sys.unraisablehook = quiet_swallowed_interrupts(unraisable_hook)
    try:
        reason = recorder.run()
    except TraceError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"{out}: {exc.strerror or exc}") from None
    finally:
        for number, before in previous.items():
            signal.signal(number, before)
        sys.unraisablehook = unraisable_hook
        progress.end()
    state = recorder.state
    click.echo(
        f"forewarn record: {out}: {state.changes} change(s) in {state.size} bytes; "
        f"stopped: {reason}",
        err=True,
    )


__all__ = ["record"]

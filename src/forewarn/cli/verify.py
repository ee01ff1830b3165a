"""``forewarn verify``: grade a Scheduled Events handler against what Azure does."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import click

from forewarn.cli.common import examples

ENDPOINT_ENV = "FOREWARN_IMDS_ENDPOINT"
#: Azure's own address, where ``--namespace`` serves the handler's VM.
AZURE_ADDRESS = "169.254.169.254"


def _timing(values: Sequence[str]) -> dict[str, float]:
    parsed: dict[str, float] = {}
    for value in values:
        key, sep, seconds = value.partition("=")
        try:
            parsed[key.strip()] = float(seconds)
        except ValueError:
            sep = ""
        if not sep or parsed.get(key.strip(), -1) < 0:
            raise click.BadParameter(
                f"{value!r}: give KEY=SECONDS, e.g. notice.Reboot=60", param_hint="--timing"
            )
    return parsed


def _writable(reports: Sequence[tuple[str, Path | None]]) -> None:
    """Refuse, before any trial runs, a report that could not be written at the end: a run of
    minutes must not end in a traceback (and an exit status that reads as a failed trial)."""
    from forewarn.verify.model import VerifyError

    for option, path in reports:
        if path is None:
            continue
        folder = path.parent
        if not folder.is_dir():
            raise VerifyError(f"{option} {path}: no folder {folder} to write it in")
        if not os.access(path if path.exists() else folder, os.W_OK):
            raise VerifyError(f"{option} {path}: cannot write there")


class _Signalled(BaseException):
    """SIGTERM or SIGHUP arrived: unwind the run as Ctrl-C does, so the handler's process
    group is stopped, the relay closed and the namespace deleted on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that stop a run as Ctrl-C does (a service manager's stop, a closed terminal).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """While the run goes, SIGTERM and SIGHUP raise :class:`_Signalled`; a second one while
    the run cleans up is ignored, so the cleanup finishes."""

    def stop(signum: int, frame: FrameType | None) -> None:
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        raise _Signalled(signum)

    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _progress(done: int, total: int, name: str, result: object) -> None:
    from forewarn.verify.model import TrialResult

    if not sys.stderr.isatty() and result is None:
        return
    if isinstance(result, TrialResult):
        line = f"[{done}/{total}] {name}: {result.verdict.label} ({result.duration:.1f} s)"
    else:
        line = f"[{done}/{total}] {name}..."
    if sys.stderr.isatty():
        click.echo(f"\r\033[K{line}", nl=result is not None, err=True)
    else:
        click.echo(line, err=True)


@click.command(
    "verify",
    context_settings={"allow_interspersed_args": False},
    epilog=examples(
        "forewarn verify --suite quick -- python my_handler.py",
        "forewarn verify --suite full --junit report.xml --json report.json -- ./handler",
        "forewarn verify --trial own-vm-only --trial survives-500 -- node handler.js",
        "forewarn verify --endpoint-env IMDS_URL -- python my_handler.py",
        "forewarn verify --attach --bind 0.0.0.0:8080   # then start the handler yourself",
        "forewarn verify --namespace -- python hard_coded.py   # as root",
        "forewarn verify --list",
    ),
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--suite",
    type=click.Choice(["quick", "full"]),
    default="quick",
    show_default=True,
    help="quick: the handful of trials that catch most defects (about a minute); full: all.",
)
@click.option("--trial", "trials", multiple=True, metavar="NAME", help="Run this trial only "
              "(repeatable); --list names them.")  # fmt: skip
@click.option("--list", "list_only", is_flag=True, help="List the trials and exit.")
@click.option(
    "--profile",
    default="documented",
    show_default=True,
    help="The timing profile notices are scaled from (documented, dev, fast).",
)
@click.option(
    "--timing",
    multiple=True,
    metavar="KEY=SECONDS",
    help="Set one duration: notice.TYPE (notice.Reboot...), impact, started_period, "
    "first_call_delay, held (how soon a held request must be given up).",
)
@click.option(
    "--endpoint-env",
    default=ENDPOINT_ENV,
    show_default=True,
    metavar="NAME",
    help="The environment variable that gives the handler its VM's address.",
)
@click.option("--attach", is_flag=True, help="Start no handler: print the VM's address and "
              "wait for the handler you start there.")  # fmt: skip
@click.option(
    "--bind",
    metavar="HOST:PORT",
    help="Where the handler's VM listens (default 127.0.0.1 on a free port; with "
    "--namespace, 169.254.169.254:80 inside it).",
)
@click.option("--namespace", is_flag=True, help="As root: run the handler in a network "
              "namespace where 169.254.169.254:80 is its VM.")  # fmt: skip
@click.option("--restart-per-trial", is_flag=True, help="Start the handler afresh for "
              "each trial.")  # fmt: skip
@click.option("--drained-check", metavar="CMD", help="A shell command that exits 0 when the "
              "application is drained; graded when the handler approves.")  # fmt: skip
@click.option("--recovered-check", metavar="CMD", help="A shell command that exits 0 once the "
              "application recovered; graded after the event.")  # fmt: skip
@click.option("--start-timeout", type=click.FloatRange(min=1), default=30.0,
              show_default=True, help="Seconds to wait for the handler's first "
              "request.")  # fmt: skip
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report as JSON.")  # fmt: skip
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write JUnit XML: one testcase per trial.")  # fmt: skip
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a self-contained HTML page: verdicts and timelines.")  # fmt: skip
def verify(
    command: tuple[str, ...],
    suite: str,
    trials: tuple[str, ...],
    list_only: bool,
    profile: str,
    timing: tuple[str, ...],
    endpoint_env: str,
    attach: bool,
    bind: str | None,
    namespace: bool,
    restart_per_trial: bool,
    drained_check: str | None,
    recovered_check: str | None,
    start_timeout: float,
    json_path: Path | None,
    junit_path: Path | None,
    html_path: Path | None,
) -> None:
    """Grade a Scheduled Events handler, trial by trial, against what Azure does.

    Each trial runs a fresh platform, makes events and faults happen, and grades what the
    handler did: pass, fail, warn or n/a, with the requests it sent as evidence. Exit 0 when
    no trial fails, 1 when one does, 2 when the run could not happen (docs/verify.md).
    """
    from forewarn.verify.model import VerifyError
    from forewarn.verify.reports import listing, table, write_junit
    from forewarn.verify.session import Options, verify_handler
    from forewarn.verify.trials import TRIALS, select

    if list_only:
        click.echo(listing([trial.info for trial in TRIALS]))
        return
    reports = (("--json", json_path), ("--junit", junit_path), ("--html", html_path))
    try:
        _writable(reports)
        chosen = select(suite, trials)
        options = Options(
            command=command,
            attach=attach,
            namespace=namespace,
            bind=bind,
            endpoint_env=endpoint_env,
            restart_per_trial=restart_per_trial,
            profile=profile,
            timing=_timing(timing),
            checks={
                name: check
                for name, check in (("drained", drained_check), ("recovered", recovered_check))
                if check
            },
            start_timeout=start_timeout,
            suite="custom" if trials else suite,
            environ=dict(os.environ),
        )
        with _stopped_by_signals():
            report = verify_handler(
                options,
                chosen,
                progress=_progress,
                announce=lambda line: click.echo(line, err=True),
            )
    except VerifyError as error:
        click.echo(f"forewarn verify: {error}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:  # the handler and the relay were stopped on the way out
        click.echo("forewarn verify: interrupted", err=True)
        sys.exit(130)
    except _Signalled as stopped:  # likewise
        name = signal.Signals(stopped.signum).name
        click.echo(f"forewarn verify: stopped by {name}; the handler was stopped", err=True)
        sys.exit(128 + stopped.signum)
    click.echo(table(report))
    try:
        if json_path is not None:
            json_path.write_text(report.to_json() + "\n", encoding="utf-8")
        if junit_path is not None:
            write_junit(report, junit_path)
        if html_path is not None:
            from forewarn.verify.html import render_html

            html_path.write_text(render_html(report), encoding="utf-8")
    except OSError as error:  # checked before the run; the disk may still fill meanwhile
        click.echo(f"forewarn verify: could not write the report: {error}", err=True)
        sys.exit(2)
    sys.exit(report.exit_code)


__all__ = ["verify"]

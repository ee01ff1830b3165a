"""The handler under test as a process forewarn starts, watches and stops.

``forewarn verify -- CMD ARGS...`` starts ``CMD`` in a process group of its own, with
``FOREWARN_IMDS_ENDPOINT`` (or the ``--endpoint-env`` name) set to its VM's address, its
output kept in a temporary file (a pipe nobody reads would block it), and stops the whole
group when the run ends, whatever ended it: nothing the handler started is left running.
With ``--namespace`` the command runs through ``ip netns exec``, where Azure's own address
is its VM.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence

from forewarn.verify.model import VerifyError

#: How long a stopped handler has to exit on SIGTERM before its group is killed.
STOP_GRACE = 3.0
#: The most of the handler's output kept for the report.
OUTPUT_TAIL = 2000


class HandlerProcess:
    """One command, started and stopped as often as the run needs (``--restart-per-trial``,
    or after its VM was deleted or it exited)."""

    def __init__(
        self,
        argv: Sequence[str],
        environ: Mapping[str, str],
        *,
        wrapper: Sequence[str] = (),
    ) -> None:
        if not argv:
            raise VerifyError("no handler command: give one after --, or use --attach")
        self.argv = tuple(argv)
        self.environ = dict(environ)
        self.wrapper = tuple(wrapper)
        self._process: subprocess.Popen[bytes] | None = None
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.starts = 0
        self.exited_at: float | None = None

    def check_command(self) -> None:
        """``VerifyError`` when the command cannot be found, before anything starts."""
        program = self.argv[0]
        if os.sep in program:
            if not os.path.isfile(program) or not os.access(program, os.X_OK):
                raise VerifyError(f"handler command not found or not executable: {program}")
        elif shutil.which(program, path=self.environ.get("PATH")) is None:
            raise VerifyError(f"handler command not found: {program}")

    def start(self) -> None:
        self.stop()
        self._output.seek(0)
        self._output.truncate()
        try:
            self._process = subprocess.Popen(
                [*self.wrapper, *self.argv],
                env=self.environ,
                stdin=subprocess.DEVNULL,
                stdout=self._output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own: stopped whole
            )
        except OSError as error:
            raise VerifyError(f"cannot start the handler {self.argv[0]}: {error}") from None
        self.starts += 1
        self.exited_at = None

    def poll(self) -> int | None:
        """The exit status once it exited, None while it runs (or was never started)."""
        if self._process is None:
            return None
        status = self._process.poll()
        if status is not None and self.exited_at is None:
            self.exited_at = time.monotonic()
        return status

    @property
    def running(self) -> bool:
        return self._process is not None and self.poll() is None

    def stop(self) -> None:
        """SIGTERM to its group, SIGKILL after :data:`STOP_GRACE`; and its group's stragglers."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_GRACE)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_GRACE)
        _await_group_gone(process.pid, STOP_GRACE)

    def output_tail(self, limit: int = OUTPUT_TAIL) -> str:
        """The end of what the handler printed (stdout and stderr), as text."""
        self._output.flush()
        size = self._output.seek(0, os.SEEK_END)
        self._output.seek(max(0, size - limit))
        return self._output.read().decode("utf-8", "replace").strip()

    def describe(self) -> str:
        return " ".join(self.argv)

    def close(self) -> None:
        self.stop()
        self._output.close()


def _await_group_gone(group: int, timeout: float) -> None:
    """Return once no process of ``group`` runs, or after ``timeout``.

    A signal is delivered when its target is next scheduled, so a child still dying on a busy
    machine would outlive ``stop()`` by a moment: the run's promise is that nothing the handler
    started runs once verify has stopped it, not a moment later."""
    deadline = time.monotonic() + timeout
    while _group_runs(group) and time.monotonic() < deadline:
        time.sleep(0.01)


def _group_runs(group: int) -> bool:
    """Whether a process of ``group`` runs. A zombie does not: an init that does not reap
    leaves the group's dead children listed, and only /proc tells them from living ones."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: the signal test, which counts zombies as members
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        # after the command's name: state, parent, process group
        if int(fields[2]) == group and fields[0] != b"Z":
            return True
    return False


def run_check(command: str, timeout: float = 30.0) -> tuple[bool, str]:
    """A ``--drained-check`` / ``--recovered-check`` command run by the shell: whether it
    exited 0, and a line saying how it ended."""
    try:
        done = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            timeout=timeout,
            start_new_session=True,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"`{command}` did not finish within {timeout:g} s"
    said = (done.stdout + done.stderr).decode("utf-8", "replace").strip()[-200:]
    return done.returncode == 0, f"`{command}` exited {done.returncode}" + (
        f": {said}" if said else ""
    )


__all__ = ["OUTPUT_TAIL", "STOP_GRACE", "HandlerProcess", "run_check"]

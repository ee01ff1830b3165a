"""A real ``forewarn record`` process against a hostile endpoint of the test's own on
127.0.0.1 (docs/record-replay.md, "Recording"): the answer is cut off at the documented bound
as it is read, the trace says why, polling goes on, and Ctrl-C ends it at once with exit 0.

What a hostile run met before: a 2 GB ``Content-Length`` and an endless chunked body took the
recorder to 9.1 GB and 7.6 GB, SIGINT waited for the server, and a 200 KB body of ``[``
crashed it after it wrote "interrupted". The child's peak resident memory is read from
``/proc/PID/status`` (``VmHWM``) while it runs.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest
from e2e_support import clean_environment, http_server_in_thread

from forewarn.trace.format import Note, load_trace
from forewarn.trace.recorder import MAX_BODY_BYTES

pytestmark = pytest.mark.e2e

#: The recorder's resident memory is about 40 MB; the hostile bodies ran to gigabytes.
PEAK_BOUND_KB = 160 * 1024
WAIT = 30.0
CHUNK = b"x" * 65536


class Hostile(BaseHTTPRequestHandler):
    """Answers ``/metadata/scheduledevents`` as the class's ``mode`` says; the compute
    metadata, as Azure does off a VM, with a 404."""

    protocol_version = "HTTP/1.1"
    #: Each endpoint's subclass sets these (:meth:`Endpoints.start`).
    mode: ClassVar[str] = ""
    released: ClassVar[threading.Event]
    polls: ClassVar[list[str]]

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        if not self.path.startswith("/metadata/scheduledevents"):
            self._answer(404, b'{"error": "Not found"}')
            return
        self.polls.append(self.mode)
        try:
            getattr(self, f"_{self.mode}")()
        except OSError:  # the recorder hung up: as it should
            self.close_connection = True

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _declared(self) -> None:
        """A body of 2 GB declared, and sent for as long as anyone reads."""
        self.send_response(200)
        self.send_header("Content-Length", str(2 * 1024**3))
        self.end_headers()
        while not self.released.is_set():
            self.wfile.write(CHUNK)

    def _chunked(self) -> None:
        """Chunks, without end."""
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while not self.released.is_set():
            self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))

    def _deep(self) -> None:
        self._answer(200, b"[" * 200_000)

    def _stalled(self) -> None:
        """Headers and a few bytes of a 1 KB body, then nothing until the test ends."""
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b'{"Document')
        self.wfile.flush()
        self.released.wait(120)
        self.close_connection = True


class Endpoints:
    """Hostile endpoints started by a test, each in its mode; ``polls`` lists the polls of
    Scheduled Events they received."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.stack = stack
        self.released = threading.Event()
        self.polls: list[str] = []

    def start(self, mode: str) -> str:
        """The URL of an endpoint answering in ``mode``."""
        attributes = {"mode": mode, "released": self.released, "polls": self.polls}
        handler = type(f"Hostile_{mode}", (Hostile,), attributes)
        return self.stack.enter_context(http_server_in_thread(handler))


@pytest.fixture
def hostile() -> Iterator[Endpoints]:
    with contextlib.ExitStack() as stack:
        endpoints = Endpoints(stack)
        stack.callback(endpoints.released.set)  # first, so stalled answers end
        yield endpoints


class Recording:
    """A real ``forewarn record`` process, killed when ``stack`` closes if it is still
    running (a test that failed before its interrupt)."""

    def __init__(self, endpoint: str, out: Path, stack: contextlib.ExitStack) -> None:
        self.out = out
        self.log = out.with_suffix(".log")
        argv = [sys.executable, "-m", "forewarn", "record", "--out", str(out)]
        argv += ["--endpoint", endpoint, "--interval", "0.2"]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=clean_environment()
            )
        stack.callback(self._kill)

    def _kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(WAIT)

    def wait_until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not check():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.text()}"
            time.sleep(0.05)

    def text(self) -> str:
        return self.out.read_text() if self.out.exists() else ""

    def peak_kb(self) -> int:
        """The child's peak resident set so far (``VmHWM``), in KiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM")

    def interrupt(self) -> tuple[int, float]:
        """SIGINT, as Ctrl-C sends it: the exit status and how long it took to come."""
        sent = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        status = self.process.wait(WAIT)
        return status, time.monotonic() - sent


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        (
            "declared",
            f"200 declaring a body of {2 * 1024**3} bytes, over the {MAX_BODY_BYTES} a trace "
            "line holds: not read",
        ),
        (
            "chunked",
            f"200 with a body over {MAX_BODY_BYTES} bytes, the most a trace line holds: "
            "cut off there",
        ),
        (
            "deep",
            "200 with a body that is not a document: the body is not a JSON document "
            "(nested deeper than 32 levels)",
        ),
    ],
)
def test_a_hostile_body_is_cut_off_said_in_the_trace_and_recording_goes_on(
    hostile: Endpoints, tmp_path: Path, mode: str, said: str
) -> None:
    polls = hostile.polls
    recording = Recording(hostile.start(mode), tmp_path / "vm.trace", hostile.stack)
    recording.wait_until(lambda: said in recording.text(), "the error line")
    # Polling goes on past it (the same error is not written again), memory stays bounded.
    seen = len(polls)
    recording.wait_until(lambda: len(polls) >= seen + 5, "five more polls")
    peak = recording.peak_kb()
    status, _ = recording.interrupt()
    output = recording.log.read_text()
    assert status == 0, output
    assert "Traceback" not in output, output
    assert peak < PEAK_BOUND_KB, f"peak resident memory {peak} KiB"
    trace = load_trace(recording.out)
    errors = [r for r in trace.records if isinstance(r, Note) and r.kind == "error"]
    assert [e.text for e in errors if e.text == said] == [said]
    last = trace.records[-1]
    assert isinstance(last, Note)
    assert (last.kind, last.text) == ("stop", "interrupted")
    assert output.rstrip().endswith("stopped: interrupted")


def test_ctrl_c_stops_at_once_while_an_answer_is_coming(hostile: Endpoints, tmp_path: Path) -> None:
    """The first poll waits up to 130 s for its answer (the documented two minutes): an
    endpoint that sends a few bytes and stalls holds it there, and Ctrl-C does not wait for
    the endpoint."""
    polls = hostile.polls
    recording = Recording(hostile.start("stalled"), tmp_path / "vm.trace", hostile.stack)
    recording.wait_until(lambda: len(polls) >= 1, "the first poll")
    time.sleep(0.5)  # inside the read of the body
    status, took = recording.interrupt()
    output = recording.log.read_text()
    assert status == 0, output
    assert took < 10.0, f"{took:.1f} s after SIGINT; the read timeout is 130 s"
    assert "Traceback" not in output, output
    trace = load_trace(recording.out)
    assert trace.documents == ()
    last = trace.records[-1]
    assert isinstance(last, Note)
    assert (last.kind, last.text) == ("stop", "interrupted")

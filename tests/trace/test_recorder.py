"""``forewarn record``'s recorder against forewarn's real endpoint in process (the pytest
plugin's transport): one line per change, If-None-Match, approvals only when asked, bounded
size, resuming after a restart, 5 requests a second at most, the first call's long timeout.

Sources: learn.microsoft.com/azure/virtual-machines/linux/scheduled-events ("Polling
frequency": "poll the service once per second"; "Enabling and disabling": "a delayed response
in your first call of up to two minutes"); learn.microsoft.com/azure/virtual-machines/
instance-metadata-service ("Rate limiting": 5 requests per second).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from forewarn.cli.record import stopping
from forewarn.testing import ForewarnPlatform, MakePlatform
from forewarn.trace.format import DocumentRecord, Note, Resume, TraceError, load_trace
from forewarn.trace.recorder import (
    MAX_REQUESTS_PER_SECOND,
    STOP_RESERVE,
    Recorder,
    RecordError,
    RecordSettings,
)

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


class Polls:
    """Drives a recording poll by poll: ``between[i]`` runs after poll ``i`` (from 0); the
    recording stops after the last. The wall clock is the platform's."""

    def __init__(self, platform: ForewarnPlatform, *between: Callable[[], object]) -> None:
        self.platform = platform
        self.between = between
        self.done = 0
        self.stop = threading.Event()
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if " polls, " not in line:
            return  # a message, not the progress line of a poll
        if self.done < len(self.between):
            self.between[self.done]()
        self.done += 1
        if self.done >= len(self.between):
            self.stop.set()


def record(
    platform: ForewarnPlatform,
    out: Path,
    *between: Callable[[], object],
    transport: httpx.BaseTransport | None = None,
    **settings: object,
) -> Recorder:
    polls = Polls(platform, *between)
    recorder = Recorder(
        RecordSettings(out, endpoint="http://169.254.169.254", interval=0.2, **settings),  # type: ignore[arg-type]
        http=httpx.Client(transport=transport or platform.transport()),
        wall=lambda: platform.now,
        progress=polls,
        stop=polls.stop,
    )
    recorder.run()
    return recorder


def nothing() -> None:
    """A poll with nothing happening in between."""


@pytest.fixture
def platform(make_forewarn_platform: MakePlatform) -> ForewarnPlatform:
    return make_forewarn_platform(vms=["vm0"], start=START, seed=4, rate_limit=1000)


def test_one_line_per_change_with_the_body_as_received(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    out = tmp_path / "vm0.trace"
    record(
        platform,
        out,
        lambda: platform.restart("vm0"),
        nothing,
        # past the reboot's 7 s: a rebooting VM asks nothing
        lambda: platform.advance(timedelta(minutes=15, seconds=7)),
        lambda: platform.advance(timedelta(minutes=10)),
        nothing,
    )
    trace = load_trace(out)
    assert trace.vm_name == "vm0"
    assert trace.start.endpoint == "http://169.254.169.254"
    assert trace.start.approve_after is None
    documents = trace.documents
    assert [d.incarnation for d in documents] == [1, 2, 3, 4]
    assert [[e["EventStatus"] for e in d.events] for d in documents] == [
        [],
        ["Scheduled"],
        ["Started"],
        [],
    ]
    answered = [r for r in platform.requests(path="/metadata/scheduledevents") if r.status == 200]
    assert [d.body.encode() for d in documents] == [r.response_body for r in answered]
    assert documents[0].headers["Content-Type"] == "application/json; charset=utf-8"
    assert documents[1].headers["ETag"] == '"2"'
    assert documents[1].at == START, "the wall time it was seen at"
    assert documents[2].at == START + timedelta(minutes=15, seconds=7)
    assert isinstance(trace.records[-1], Note)
    assert (trace.records[-1].kind, trace.records[-1].text) == ("stop", "stopped")


def test_polls_send_the_last_etag_and_an_unchanged_document_is_a_304(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    record(platform, tmp_path / "t", nothing, nothing, nothing)
    polls = platform.requests(path="/metadata/scheduledevents")
    assert [r.headers.get("if-none-match") for r in polls] == [None, '"1"', '"1"']
    assert [r.status for r in polls] == [200, 304, 304]
    assert all(r.headers["metadata"] == "true" for r in polls)
    assert len(load_trace(tmp_path / "t").documents) == 1


def test_it_never_approves_unless_asked_then_approves_and_records_it(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    (event,) = platform.restart("vm0")
    record(platform, tmp_path / "quiet", nothing, nothing, nothing)
    platform.assert_not_approved(event)
    out = tmp_path / "approving"
    reboot = timedelta(seconds=7)  # a rebooting VM asks nothing
    record(platform, out, nothing, lambda: platform.advance(reboot), nothing, approve_after=0)
    approval = platform.assert_approved(event, by="vm0")
    trace = load_trace(out)
    assert trace.start.approve_after == 0
    (recorded,) = trace.approvals
    assert (recorded.event_ids, recorded.status, recorded.at) == (
        (event.event_id,),
        200,
        approval.at,
    )
    assert [[e["EventStatus"] for e in d.events] for d in trace.documents] == [
        ["Scheduled"],
        ["Started"],
    ]


def test_a_size_limit_stops_the_trace_with_a_line_saying_so(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    record(platform, tmp_path / "first", max_bytes=10 * STOP_RESERVE)
    first = len((tmp_path / "first").read_bytes().splitlines(keepends=True)[0])
    out = tmp_path / "small"
    limit = first + STOP_RESERVE + 900
    recorder = record(
        platform,
        out,
        *[lambda: platform.restart("vm0") if not platform.events() else platform.advance(900)] * 20,
        max_bytes=limit,
    )
    assert out.stat().st_size <= limit
    last = load_trace(out).records[-1]
    assert isinstance(last, Note)
    assert (last.kind, last.text) == ("stop", f"size limit of {limit} bytes reached")
    assert recorder.state.polls < 20, "it stopped at the limit"
    with pytest.raises(RecordError, match="already at its size limit"):
        record(platform, out, nothing, max_bytes=limit)


def test_a_restart_resumes_after_the_last_document_and_drops_a_torn_line(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    out = tmp_path / "resumed"
    record(platform, out, lambda: platform.restart("vm0"), nothing)
    with out.open("ab") as torn:
        torn.write(b'{"kind": "document", "at": "2022-04-1')  # a crash mid-write
    platform.advance(timedelta(minutes=15, seconds=7))  # Started, and the reboot over
    record(platform, out, nothing, nothing, approve_after=5)
    trace = load_trace(out)
    kinds = [r.kind for r in trace.records]
    assert kinds == ["document", "document", "stop", "resume", "document", "stop"]
    assert [d.incarnation for d in trace.documents] == [1, 2, 3]
    resume = next(r for r in trace.records if isinstance(r, Resume))
    assert resume.approve_after == 5
    polls = platform.requests(path="/metadata/scheduledevents")
    assert polls[-2].headers.get("if-none-match") == '"2"', "the resumed run starts from its ETag"
    assert platform.requests(path="/metadata/instance/compute").__len__() == 1, "compute once"


def test_an_existing_file_that_is_not_a_trace_is_refused_naming_its_line(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    out.write_text("shopping list\n")
    with pytest.raises(TraceError, match=r"notes\.txt:1: not a JSON object"):
        record(platform, out, nothing)
    assert out.read_text() == "shopping list\n", "left as it was"


def test_errors_are_written_once_each_and_recording_goes_on(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging":
    410 while the service starts; the client retries."""
    platform.fault("gone", count=3)
    out = tmp_path / "t"
    recorder = record(platform, out, nothing, nothing, nothing, nothing, nothing)
    trace = load_trace(out)
    assert [r.kind for r in trace.records] == ["error", "document", "stop"]
    error = trace.records[0]
    assert isinstance(error, Note)
    assert error.text.startswith("410: ")
    # the first 410 met the compute metadata's request: the start line says null
    assert trace.start.compute is None
    assert recorder.state.errors == 2


def _without_etags(platform: ForewarnPlatform) -> httpx.BaseTransport:
    """The endpoint as one without ETags: every poll is answered 200 with the document."""
    inner = platform.transport()

    def handle(request: httpx.Request) -> httpx.Response:
        request.headers.pop("If-None-Match", None)
        answer = inner.handle_request(request)
        answer.read()
        headers = [(k, v) for k, v in answer.headers.items() if k.lower() != "etag"]
        return httpx.Response(answer.status_code, headers=headers, content=answer.content)

    return httpx.MockTransport(handle)


@pytest.mark.parametrize("etags", [True, False], ids=["304", "same-document"])
def test_the_same_error_after_a_recovery_is_written_again(
    platform: ForewarnPlatform, tmp_path: Path, etags: bool
) -> None:
    """docs/record-replay.md, "Recording": a poll that gets no document "is an `error` line
    when the error changes". An answered poll in between, a 304 or the same document again,
    ends the error, so the next 410 is a new error with a line of its own: the trace shows
    the endpoint recovered between the two. learn.microsoft.com/azure/virtual-machines/
    instance-metadata-service, "Errors and debugging": 410 "Retry after some time"."""
    out = tmp_path / "t"
    record(
        platform,
        out,
        lambda: platform.fault("gone", count=1),
        nothing,  # poll 1 is the 410, poll 2 answered again
        lambda: platform.fault("gone", count=1),
        nothing,  # poll 3 is the second 410, the last
        transport=None if etags else _without_etags(platform),
    )
    polls = platform.requests(path="/metadata/scheduledevents")  # faults are not recorded
    assert [r.status for r in polls] == ([200, 304] if etags else [200, 200])
    trace = load_trace(out)
    assert [r.kind for r in trace.records] == ["document", "error", "error", "stop"]
    first, second = trace.records[1], trace.records[2]
    assert isinstance(first, Note)
    assert isinstance(second, Note)
    assert first.text == second.text
    assert first.text.startswith("410: ")


def test_never_more_than_five_requests_a_second(platform: ForewarnPlatform, tmp_path: Path) -> None:
    """Polls every 0.2 s and an approval of each new event: the sixth request in any one
    second waits."""
    sent: list[float] = []
    inner = platform.transport()

    def counting(request: httpx.Request) -> httpx.Response:
        sent.append(time.monotonic())
        return inner.handle_request(request)

    restarts = [
        lambda: platform.restart("vm0") if not platform.events() else platform.advance(1500)
    ]
    record(
        platform,
        tmp_path / "t",
        *restarts * 12,
        transport=httpx.MockTransport(counting),
        approve_after=0,
    )
    assert len(sent) > 12
    for index in range(len(sent) - MAX_REQUESTS_PER_SECOND):
        assert sent[index + MAX_REQUESTS_PER_SECOND] - sent[index] >= 1.0 - 1e-3


def test_the_first_call_may_take_the_documented_two_minutes(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    timeouts: list[object] = []
    inner = platform.transport()

    def seen(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metadata/scheduledevents":
            timeouts.append(request.extensions["timeout"]["read"])
        return inner.handle_request(request)

    record(platform, tmp_path / "t", nothing, nothing, transport=httpx.MockTransport(seen))
    assert timeouts == [130.0, 30.0]


def test_settings_refuse_polling_over_the_rate_limit(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="over the IMDS rate limit"):
        RecordSettings(tmp_path / "t", interval=0.1)


def test_the_body_is_kept_exactly(platform: ForewarnPlatform, tmp_path: Path) -> None:
    record(platform, tmp_path / "t", lambda: platform.restart("vm0"), nothing)
    documents = load_trace(tmp_path / "t").documents
    assert all(isinstance(d, DocumentRecord) for d in documents)
    assert json.loads(documents[-1].body)["Events"][0]["EventType"] == "Reboot"
    assert documents[-1].body == documents[-1].body.strip()


def test_an_answer_not_whole_within_its_timeout_is_cut_off(tmp_path: Path) -> None:
    """An endpoint trickling a body, a byte well within each read timeout, would hold a poll
    for ever: the whole answer has its call's timeout (the first call's 130 s here), then the
    trace says why, and polling goes on."""
    ticks = iter(range(0, 10**6, 7))  # seven seconds pass between two looks at the clock

    def trickling(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/metadata/scheduledevents":
            return httpx.Response(404)
        return httpx.Response(200, stream=_Trickle())

    stop = threading.Event()
    polls: list[str] = []

    def progress(line: str) -> None:
        polls.append(line)
        if len(polls) == 2:
            stop.set()

    recorder = Recorder(
        RecordSettings(tmp_path / "t", interval=0.2),
        http=httpx.Client(transport=httpx.MockTransport(trickling)),
        monotonic=lambda: float(next(ticks)),
        progress=progress,
        stop=stop,
    )
    assert recorder.run() == "stopped"
    errors = [r for r in load_trace(tmp_path / "t").records if isinstance(r, Note)]
    assert [(e.kind, e.text) for e in errors] == [
        ("error", "200 with a body not whole within 130 s: cut off there"),
        ("error", "200 with a body not whole within 30 s: cut off there"),
        ("stop", "stopped"),
    ]


class _Trickle(httpx.SyncByteStream):
    """A body that never ends, a byte at a time."""

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield b" "


def test_an_interrupt_something_swallowed_still_ends_the_recording(
    platform: ForewarnPlatform, tmp_path: Path
) -> None:
    """docs/record-replay.md: "Ctrl-C or SIGTERM stops it at once ...: it writes a `stop`
    line". The signals' handler tells the recorder before it raises ``KeyboardInterrupt``, so
    an interrupt that library code swallows (one raised in a finalizer the collector runs is
    only printed) still ends the recording, at its next turn, with ``interrupted``."""
    inner = platform.transport()
    polls: list[str] = []
    holder: list[Recorder] = []

    def swallowing(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/scheduledevents"):
            polls.append(request.url.path)
            if len(polls) == 2:
                # dropped, as a finalizer's exception is (only printed)
                with contextlib.suppress(KeyboardInterrupt):
                    stopping(holder[0])(signal.SIGINT, None)
        return inner.handle_request(request)

    stop = threading.Event()

    def progress(line: str) -> None:
        if len(polls) >= 6:  # the interrupt was lost: end the test's recording anyway
            stop.set()

    out = tmp_path / "vm.trace"
    recorder = Recorder(
        RecordSettings(out, endpoint="http://169.254.169.254", interval=0.2),
        http=httpx.Client(transport=httpx.MockTransport(swallowing)),
        wall=lambda: platform.now,
        progress=progress,
        stop=stop,
    )
    holder.append(recorder)
    assert recorder.run() == "interrupted"
    assert len(polls) == 2
    last = load_trace(out).records[-1]
    assert isinstance(last, Note)
    assert (last.kind, last.text) == ("stop", "interrupted")


#: A generator whose ``finally`` raises what it is given when the collector closes it: how a
#: ``KeyboardInterrupt`` lands in a library's finalizer, where Python can only print it.
_FINALIZER = """
import sys
from forewarn.cli.record import quiet_swallowed_interrupts

sys.unraisablehook = quiet_swallowed_interrupts(sys.unraisablehook)

def stream(error):
    try:
        yield
    finally:
        raise error

for error in (KeyboardInterrupt(), ValueError("a finalizer's own fault")):
    body = stream(error)
    next(body)
    del body
print("went on")
"""


def test_an_interrupt_a_finalizer_swallowed_prints_no_traceback() -> None:
    """docs/record-replay.md: Ctrl-C stops the recording with a ``stop`` line, no traceback.
    The interrupt :func:`stopping` raises may land in a finalizer (an HTTP library's response
    stream), which Python reports as "Exception ignored in" with a traceback: ``forewarn
    record`` keeps quiet about that one, and only that one."""
    done = subprocess.run(
        [sys.executable, "-c", _FINALIZER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "went on\n"
    assert "KeyboardInterrupt" not in done.stderr
    assert "ValueError: a finalizer's own fault" in done.stderr  # anything else still said

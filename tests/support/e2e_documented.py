"""The documented clients as the documents write them: curl command lines and the Python sample.

Kept in one place so the loopback tier and the network-namespace tier run the very same
commands, and so one test can check them against the reference files word for word.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from e2e_support import (
    AZURE_ENDPOINT,
    EMERGENCY_REPAIR,
    HOST_MAINTENANCE,
    LIVE_MIGRATION,
    REPO_ROOT,
    TENANT,
    USER_REBOOT,
)

#: learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Query for events".
QUERY_2020 = (
    "curl -H Metadata:true http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01"
)
#: learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event".
START_2020 = (
    "curl -H Metadata:true -X POST -d "
    """'{"StartRequests": [{"EventId": "f020ba2e-3bc0-4c40-a10b-86575a9eabd5"}]}' """
    "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01"
)
#: docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "Query for
#: events".
QUERY_2017 = (
    "curl -H Metadata:true http://169.254.169.254/metadata/scheduledevents?api-version=2017-03-01"
)
#: docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "Starting an
#: event (expedite)".
START_2017 = (
    "curl -H Metadata:true -X POST -d "
    """'{"DocumentIncarnation":"5", "StartRequests": [{"EventId": """
    """"f020ba2e-3bc0-4c40-a10b-86575a9eabd5"}]}' """
    "http://169.254.169.254/metadata/scheduledevents?api-version=2017-03-01"
)
#: The EventId the documents' POST examples carry.
DOCUMENTED_EVENT_ID = "f020ba2e-3bc0-4c40-a10b-86575a9eabd5"

DOCUMENTED_COMMANDS = {
    "scheduled-events-windows-2024.txt": (QUERY_2020, START_2020),
    "scheduled-events-preview-2017.md": (QUERY_2017, START_2017),
}

#: The documentation's Python sample, committed once: the example handler forewarn verify
#: grades (docs/verify.md) is the copy the documented-clients tests check and run.
SAMPLE_FILE = REPO_ROOT / "examples" / "handlers" / "docs_sample.py"
#: The line ending the header of the committed copy; the documented sample follows it.
_HEADER_END = "# " + "-" * 88 + "\n"
#: The one line of the sample a test may change, and only in a temporary copy.
SAMPLE_URL = "http://169.254.169.254/metadata/scheduledevents"


def curl_argv(command: str, address: str | None = None, event_id: str | None = None) -> list[str]:
    """A documented command as argv; ``address`` replaces 169.254.169.254 in its URL (only
    there), ``event_id`` the documents' example EventId in its body (only there)."""
    argv = shlex.split(command)
    url_index = len(argv) - 1
    assert argv[url_index].startswith(f"http://{AZURE_ENDPOINT}/"), argv
    if address is not None:
        argv[url_index] = argv[url_index].replace(AZURE_ENDPOINT, address, 1)
    if event_id is not None:
        body_index = argv.index("-d") + 1
        assert argv[body_index].count(DOCUMENTED_EVENT_ID) == 1, argv
        argv[body_index] = argv[body_index].replace(DOCUMENTED_EVENT_ID, event_id)
    return argv


def documented_sample() -> str:
    """The sample as committed below its header: the document's bytes, untouched."""
    text = SAMPLE_FILE.read_text(encoding="utf-8")
    header, separator, sample = text.partition(_HEADER_END)
    assert separator, "the header's closing line is missing"
    first = header.splitlines()[0]
    assert first.startswith("# Source: "), header
    assert "learn.microsoft.com/azure/virtual-machines/windows/scheduled-events" in first, header
    return sample


def sample_from_reference(reference: str) -> str:
    """The Python sample as learn.microsoft.com/azure/virtual-machines/windows/scheduled-events
    holds it (the page renders every code block twice; both copies must agree)."""
    lead = (
        "The following sample queries Metadata Service for scheduled events and approves "
        "each outstanding event:\n"
    )
    start = reference.index(lead) + len(lead)
    end = reference.index("Next steps\n", start)
    both = reference[start:end]
    half = len(both) // 2
    assert both[:half] == both[half:], "the two renderings of the sample differ"
    return both[:half]


def sample_pointing_at(base_url: str) -> str:
    """The sample with ``metadata_url`` (its only address) changed to ``base_url``."""
    sample = documented_sample()
    assert sample.count(SAMPLE_URL) == 1, "the sample names its URL more than once"
    return sample.replace(SAMPLE_URL, f"{base_url}/metadata/scheduledevents")


# -- driving the sample's advanced_sample loop ---------------------------------------------


class Control(Protocol):
    """What the scenario needs of the control plane: the HTTP API from here, or a relay
    inside a network namespace."""

    def create_event(self, event_type: str, resources: Sequence[str], **fields: Any) -> str: ...

    def events(self) -> dict[str, dict[str, Any]]: ...

    def cancel(self, event_id: str) -> None: ...


_PROCESSED = re.compile(r"Processed events from document: (\d+)\n")


class InteractiveProcess:
    """A child fed on stdin and read on stdout with bounded waits (no threads to leak)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env=dict(env),
        )
        self.stdout = ""

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode())
        self.process.stdin.flush()

    def read_for(
        self, seconds: float, until: re.Pattern[str] | None = None, count: int = 0
    ) -> None:
        """Read stdout for up to ``seconds``, or until ``until`` has matched ``count`` times."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + seconds
        while until is None or len(until.findall(self.stdout)) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            self.stdout += chunk.decode("utf-8", errors="replace")

    def finish(self, timeout: float) -> tuple[int, str, str]:
        """Wait for the exit (killing it after ``timeout``); status, stdout, stderr."""
        try:
            rest, errors = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            rest, errors = self.process.communicate()
        self.stdout += rest.decode("utf-8", errors="replace")
        return self.process.returncode, self.stdout, errors.decode("utf-8", errors="replace")


def drive_advanced_sample(sample: InteractiveProcess, control: Control) -> None:
    """Run the documented ``main()`` through three rounds of ``advanced_sample`` and check
    each decision the sample documents
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample"): Started
    events are logged, User events approved, Freezes shorter than 9 s approved, other impactful
    events logged and left alone; and the loop waits for a new DocumentIncarnation.

    The events impact WestNO_1 and the sample runs as WestNO_0 of the same availability set:
    "Acknowledging an event allows the event to proceed for all Resources in the event, not
    just the VM that acknowledges the event" (same document, "Start an event").
    """
    partner = ["WestNO_1"]
    hardware = control.create_event(
        "Reboot", partner, source="Platform", description=EMERGENCY_REPAIR, started=True
    )
    user_reboot = control.create_event("Reboot", partner, source="User", description=USER_REBOOT)
    short_freeze = control.create_event(
        "Freeze", partner, source="Platform", description=LIVE_MIGRATION, durationInSeconds=5
    )
    long_freeze = control.create_event(
        "Freeze", partner, source="Platform", description="long freeze", durationInSeconds=30
    )
    platform_reboot = control.create_event(
        "Reboot", partner, source="Platform", description=HOST_MAINTENANCE
    )

    def processed() -> list[int]:
        return [int(n) for n in _PROCESSED.findall(sample.stdout)]

    try:
        # Round 1: the first document holds all five events.
        sample.send("1\n")
        sample.read_for(10.0, _PROCESSED, 1)
        assert len(processed()) == 1, sample.stdout
        round1 = sample.stdout
        events = control.events()
        assert events[hardware]["EventStatus"] == "Started"
        for approved in (user_reboot, short_freeze):
            assert events[approved]["approvedBy"] == [TENANT], events[approved]
            assert events[approved]["EventStatus"] == "Started", events[approved]
        for left_alone in (long_freeze, platform_reboot):
            assert events[left_alone]["approvedBy"] == [], events[left_alone]
            assert events[left_alone]["EventStatus"] == "Scheduled", events[left_alone]
        # Logged: the Started event and the impactful ones; approved ones are not logged.
        for text in (EMERGENCY_REPAIR, "long freeze", HOST_MAINTENANCE):
            assert f"{text}\n" in round1, round1
        assert USER_REBOOT not in round1
        assert LIVE_MIGRATION not in round1

        # Round 2: the approvals changed the document, so it is processed at once, and the
        # two approved events now show as Started (logged).
        sample.send("1\n")
        sample.read_for(10.0, _PROCESSED, 2)
        assert len(processed()) == 2, sample.stdout
        assert processed()[1] > processed()[0]
        round2 = sample.stdout[len(round1) :]
        assert f"{USER_REBOOT}\n" in round2, round2
        assert f"{LIVE_MIGRATION}\n" in round2, round2

        # Round 3: nothing changes, so the loop keeps polling (about once a second) ...
        sample.send("1\n")
        sample.read_for(1.6, _PROCESSED, 3)
        assert len(processed()) == 2, "advanced_sample returned without a new incarnation"
        # ... until the platform calls the maintenance off: the event simply disappears.
        control.cancel(platform_reboot)
        sample.read_for(10.0, _PROCESSED, 3)
        assert len(processed()) == 3, sample.stdout
        assert processed()[2] > processed()[1]
        round3 = sample.stdout[len(round1) + len(round2) :]
        assert HOST_MAINTENANCE not in round3, round3

        sample.send("2\n")
    finally:
        status, stdout, stderr = sample.finish(timeout=10.0)
    assert status == 0, f"the sample failed:\n{stdout}\n{stderr}"
    assert stderr == "", stderr
    assert platform_reboot not in control.events()


def write_sample(directory: Path, text: str) -> Path:
    path = directory / "scheduled_events_sample.py"
    path.write_text(text, encoding="utf-8")
    return path
